package service

import (
	"context"

	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

// sellOne sells one purchase: in the store's cheapest form when it has one
// (MySQL's two round trips), moving the fence on when claim; otherwise, or
// when that form wrote nothing (sold out, over the limit, a request ID
// already used, a deadlock), as a sale of one, which the rule decides.
// An error is the hold's.
func (s *Seckill) sellOne(ctx context.Context, st Strategy, p Purchase, claim bool) (salestore.Answer, error) {
	v := s.cache.At(p.ProductID)
	o, ok, err := s.sales.Buy(ctx, p, claim)
	switch {
	case err != nil:
		return salestore.Answer{}, err
	case ok:
		s.wrote(p.ProductID, o.RemainingStock, v)
		return salestore.Answer{R: Receipt{Order: o}}, nil
	}
	as, err := s.sell(ctx, st, []Purchase{p}, salestore.Read{Claim: claim})
	if err != nil {
		return salestore.Answer{}, err
	}
	return as[0], nil
}

// wrote records the stock a committed write left, in version v: the
// stock cache's when the write began (stockcache.Cache.At).
func (s *Seckill) wrote(product, left int64, v stockcache.Version) {
	if h := s.cfg.hooks.committed; h != nil {
		h(product)
	}
	s.cache.Saw(product, left, v)
}
