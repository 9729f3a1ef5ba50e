package service

import (
	"context"

	"github.com/seckill/seckill/service/stockcache"
)

// sellOptimistic does the purchase's work and pause, then, without reading
// the stock first, lets the conditional purchase decide: stock = stock - q
// WHERE stock >= q, the user's units within the limit and the order in one
// transaction (sellOne, unfenced).
func (s *Seckill) sellOptimistic(ctx context.Context, p Purchase) (Receipt, error) {
	if err := doWork(ctx, p.Work+p.Pause); err != nil {
		return Receipt{}, err
	}
	a, err := s.sellOne(ctx, Strategy{Name: p.Strategy}, p, false)
	if err != nil {
		return Receipt{}, err
	}
	return a.r, a.err
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
	s.cache.Saw(p.ProductID, prod.Stock, stockcache.Of(prod))
	if prod.Stock < p.Quantity {
		return Receipt{}, soldOut(p.ProductID, prod.Stock)
	}
	if err := doWork(ctx, p.Work+p.Pause); err != nil {
		return Receipt{}, err
	}
	as, err := s.sell(ctx, Strategy{Name: p.Strategy}, []Purchase{p}, stockRead{trusted: &prod.Stock})
	if err != nil {
		return Receipt{}, err
	}
	return as[0].r, as[0].err
}
