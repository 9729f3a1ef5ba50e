package service

import (
	"context"

	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

// The strategies with no lock and no line: each purchase is its own
// transaction. One that failed may have been made by an earlier try of
// its request ID meanwhile, which replayRaced looks up.

// sellOptimistic does the purchase's work and pause, then, without reading
// the stock first, lets the conditional purchase decide: stock = stock - q
// WHERE stock >= q, the user's units within the limit and the order in one
// transaction (sellOne, unfenced).
func (s *Seckill) sellOptimistic(ctx context.Context, st Strategy, p Purchase) (Receipt, error) {
	if err := doWork(ctx, p.Work+p.Pause); err != nil {
		return s.unlockedFailed(ctx, p, err)
	}
	a, err := s.sellOne(ctx, st, p, false)
	if err == nil {
		err = a.Err
	}
	if err != nil {
		return s.unlockedFailed(ctx, p, err)
	}
	return a.R, nil
}

// unlockedFailed answers an unlocked purchase p that failed with err.
func (s *Seckill) unlockedFailed(ctx context.Context, p Purchase, err error) (Receipt, error) {
	rctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	return s.replayRaced(rctx, p, failure.Store(purchaseOp(p), err))
}

// sellNone is the unguarded purchase: read the stock and check it, do the
// work, then write the decrement whatever the stock is now.
func (s *Seckill) sellNone(ctx context.Context, st Strategy, p Purchase) (Receipt, error) {
	r, err := s.sellUnguarded(ctx, st, p)
	if err != nil {
		return s.unlockedFailed(ctx, p, err)
	}
	return r, nil
}

// sellUnguarded is sellNone's sale.
func (s *Seckill) sellUnguarded(ctx context.Context, st Strategy, p Purchase) (Receipt, error) {
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
	as, err := s.sell(ctx, st, []Purchase{p}, salestore.Read{Trusted: &prod.Stock})
	if err != nil {
		return Receipt{}, err
	}
	return as[0].R, as[0].Err
}
