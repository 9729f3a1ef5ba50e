package service

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
)

// sellOptimistic does the purchase's work and pause, then, without reading
// the stock first, lets one conditional UPDATE decide: stock = stock - q
// WHERE stock >= q. The per-user limit is raised after that UPDATE, under
// the row lock it took, by one conditional upsert of the user's units.
func (s *Seckill) sellOptimistic(ctx context.Context, p Purchase) (Receipt, error) {
	if err := doWork(ctx, p.Work+p.Pause); err != nil {
		return Receipt{}, err
	}
	o, err := s.buyOne(ctx, Strategy{Name: p.Strategy}, p, fenceWrite{})
	return Receipt{Order: o}, err
}

// sellNone is the unguarded purchase: read the stock and check it, do the
// work, then write the decrement whatever the stock is now.
func (s *Seckill) sellNone(ctx context.Context, p Purchase) (Receipt, error) {
	rctx, cancel := s.dbCtx(ctx, 0)
	prod, err := s.product(rctx, s.db, p.ProductID)
	cancel()
	if err != nil {
		return Receipt{}, err
	}
	s.sawStock(p.ProductID, prod.Stock, prod.Generation)
	if prod.Stock < p.Quantity {
		return Receipt{}, soldOut(p.ProductID, prod.Stock)
	}
	if err := doWork(ctx, p.Work+p.Pause); err != nil {
		return Receipt{}, err
	}
	var o model.Order
	tctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	err = s.transaction(tctx, func(tx *gorm.DB) error {
		res := tx.Model(&model.Product{}).Where("id = ?", p.ProductID).Update("stock", exprDecrement(p.Quantity))
		if res.Error != nil {
			return fmt.Errorf("decrement stock: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return notFound(p.ProductID)
		}
		var left int64
		if err := tx.Model(&model.Product{}).Where("id = ?", p.ProductID).Select("stock").Scan(&left).Error; err != nil {
			return fmt.Errorf("read remaining stock: %w", err)
		}
		return s.finishOrder(tx, p, left, &o)
	})
	if uncommitted(err) {
		o, err = s.settleOne(ctx, p, err)
	}
	if err == nil {
		s.wrote(p.ProductID, o.RemainingStock, prod.Generation)
	}
	return Receipt{Order: o}, err
}
