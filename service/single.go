package service

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
)

// sellOne is a fenced hold of one purchase: one transaction of three
// statements, as few as a purchase can take. The decrement is conditional
// on the stock and either claims the fence itself or applies only while the
// fence is still the hold's token (fw), and says what it left; then the
// user's units are raised within the limit and the order written. A
// purchase it refuses, or whose request ID was used, is answered as one by
// one would: its request ID's order first. An error is the hold's.
func (s *Seckill) sellOne(ctx context.Context, st Strategy, p Purchase, fw fenceWrite) (answer, error) {
	o, err := s.buyOne(ctx, st, p, fw)
	if err == nil {
		return answer{r: Receipt{Order: o}}, nil
	}
	switch ErrorCode(err) {
	case CodeSoldOut, CodeLimitExceeded, CodeRequestIDReused, CodeNotFound:
		// The purchase's own answer (after its request ID's order, if any).
	default:
		if !errors.Is(err, gorm.ErrDuplicatedKey) {
			return answer{}, err // the hold's: the lock lost, the store down
		}
	}
	rctx, rcancel := s.dbCtx(ctx, 0)
	defer rcancel()
	r, err := s.replayRaced(rctx, p, err)
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return answer{}, err
	}
	return answer{r: r, err: err}, nil
}

// buyOne is one purchase's transaction: the conditional decrement (doing
// with the fence what fw says), the user's units within the limit, the
// order; ErrSoldOut when less than the quantity is left, ErrLockLost when
// the fence moved on from fw's token. A deadlock victim tries once more.
// On MySQL a purchase that goes through takes two round trips
// (buyOneTrip); any other finds its answer step by step. Either way it
// makes at most three bounded database calls.
func (s *Seckill) buyOne(ctx context.Context, st Strategy, p Purchase, fw fenceWrite) (o model.Order, err error) {
	gen := s.memory.generation(p.ProductID)
	defer func() {
		if uncommitted(err) {
			o, err = s.settleOne(ctx, p, err)
		}
		if err == nil {
			s.wrote(p.ProductID, o.RemainingStock, gen)
		}
	}()
	// Not after a claim at the grant (fw.token): that hold's claim and read
	// already spent two of the database calls PurchaseBudget allows.
	if s.mysql && fw.token == nil {
		o, ok, err := s.buyOneTrip(ctx, p, fw)
		if err != nil || ok {
			return o, err
		}
	}
	try := func() error {
		ctx, cancel := s.dbCtx(ctx, 0)
		defer cancel()
		return s.transaction(ctx, func(tx *gorm.DB) error {
			left, ok, err := s.takeStock(ctx, tx, p.ProductID, p.Quantity, fw)
			if err != nil {
				return err
			}
			if !ok {
				// What stopped it, read as it is now: on TiDB a plain
				// read would see the transaction's start (see
				// lockingReads), before the write it waited for.
				read := tx
				if s.lockingReads {
					read = forUpdate(tx)
				}
				prod, err := s.product(ctx, read, p.ProductID)
				if err != nil {
					return err
				}
				if fw.token != nil && prod.Fence != *fw.token {
					return &fenceMoved{generation: prod.Generation}
				}
				s.sawStock(p.ProductID, prod.Stock, prod.Generation)
				return soldOut(p.ProductID, prod.Stock)
			}
			return s.finishOrder(tx, p, left, &o)
		})
	}
	err = try()
	if isDeadlock(err) && !uncommitted(err) {
		err = try()
	}
	return o, err
}

// takeStock decrements the product's stock by q if at least q is left, in
// one statement that also does with the fence what fw says, and returns the
// stock it left; ok is false when it changed nothing. The stock left comes
// from the write itself: MySQL's LAST_INSERT_ID(expr) (never negative
// here), SQLite's RETURNING.
func (s *Seckill) takeStock(ctx context.Context, tx *gorm.DB, id, q int64, fw fenceWrite) (left int64, ok bool, err error) {
	query, args := s.decrementSQL(id, q, fw)
	if !s.mysql {
		var stocks []int64
		if err := tx.Raw(query, args...).Scan(&stocks).Error; err != nil {
			return 0, false, fmt.Errorf("decrement the stock of product %d: %w", id, err)
		}
		if len(stocks) == 0 {
			return 0, false, nil
		}
		return stocks[0], true, nil
	}
	res, err := tx.Statement.ConnPool.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, false, fmt.Errorf("decrement the stock of product %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return 0, false, err
	}
	left, err = res.LastInsertId()
	if err != nil {
		return 0, false, fmt.Errorf("the stock product %d was left with: %w", id, err)
	}
	return left, true, nil
}

// finishOrder is the end of a single purchase's transaction, after its
// decrement left stock left: raise the user's units within the limit, then
// write the order.
func (s *Seckill) finishOrder(tx *gorm.DB, p Purchase, left int64, o *model.Order) error {
	if err := s.raiseUnits(tx, p); err != nil {
		return err
	}
	*o = newOrder(p, p.Strategy, left)
	if err := tx.Create(o).Error; err != nil {
		return fmt.Errorf("write order: %w", err)
	}
	return nil
}

// newOrder is the order p makes, leaving stock left.
func newOrder(p Purchase, strategy string, left int64) model.Order {
	o := model.Order{
		ProductID:      p.ProductID,
		UserID:         model.BinaryString(p.UserID),
		Quantity:       p.Quantity,
		Strategy:       strategy,
		RemainingStock: left,
	}
	if p.RequestID != "" {
		rid := model.BinaryString(p.RequestID)
		o.RequestID = &rid
	}
	return o
}

// raiseUnits adds p's units to the user's, in one conditional upsert that
// changes nothing when the sum would pass the limit: the row lock it takes
// orders this user's concurrent purchases, whatever sells them.
func (s *Seckill) raiseUnits(tx *gorm.DB, p Purchase) error {
	limit := s.cfg.PerUserLimit
	if limit <= 0 {
		return nil
	}
	exceeded := errorf(CodeLimitExceeded, "user %s would hold more than %d of product %d", p.UserID, limit, p.ProductID)
	if p.Quantity > limit {
		return exceeded
	}
	res := tx.Exec(s.stmt(stmtRaiseUnits), p.ProductID, p.UserID, p.Quantity, limit)
	if res.Error != nil {
		return fmt.Errorf("raise the units of user %s: %w", p.UserID, res.Error)
	}
	if res.RowsAffected == 0 {
		return exceeded
	}
	return nil
}

// wrote records the stock a committed write left, in generation gen: the
// memory's when the write began (stockMemory.generation).
func (s *Seckill) wrote(product, left, gen int64) {
	if h := s.cfg.hooks.committed; h != nil {
		h(product)
	}
	s.sawStock(product, left, gen)
}
