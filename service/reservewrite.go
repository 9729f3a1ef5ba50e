package service

import (
	"context"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/reservewriter"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

// The writers' side of the reserve strategy in the service: what they
// write through the sale store, and what the stock cache learns of it.

// writeReservations writes reservations of one product, taken in
// generation gen, in line order, in one transaction of the sale store: the
// rule decides each against the database's stock, the buyers' units and
// the request IDs already used, so that the database never goes below 0
// whatever Redis says, and writing one again writes nothing more (its
// answer is its order, replayed). Each answer is the reservation's order,
// or the reason the database refused it (sold_out, limit_exceeded,
// request_id_reused). A *salestore.GenerationGone error says a reset
// discarded them all: nothing is written.
func (s *Seckill) writeReservations(ctx context.Context, gen int64, rs []Reservation) ([]salestore.Answer, error) {
	ps := reservePurchases(rs)
	id := ps[0].ProductID
	cacheAt := s.cache.At(id)
	d, err := s.sales.Sell(ctx, ps, salestore.Read{ReserveGen: &gen}, s.decideReservations(ps, rs))
	if err != nil {
		return nil, err
	}
	if d.Final {
		s.wroteSale(id, d, cacheAt)
	}
	return d.Answers, nil
}

// writeManyReservations writes the reservations of many products, a
// batch of each, in one transaction of the sale store (SellMany), each
// decided as writeReservations decides them; a batch's own refusal (a
// *salestore.GenerationGone) is its Written's error. An error is the
// whole transaction's.
func (s *Seckill) writeManyReservations(ctx context.Context, bs []reservewriter.Batch) ([]reservewriter.Written, error) {
	parts := make([]salestore.Part, len(bs))
	cacheAt := make([]stockcache.Version, len(bs))
	for i, b := range bs {
		ps := reservePurchases(b.Reservations)
		parts[i] = salestore.Part{Purchases: ps, Gen: b.Gen, Decide: s.decideReservations(ps, b.Reservations)}
		cacheAt[i] = s.cache.At(ps[0].ProductID)
	}
	sales, errs, err := s.sales.SellMany(ctx, parts)
	if err != nil {
		return nil, err
	}
	out := make([]reservewriter.Written, len(bs))
	for i, d := range sales {
		switch {
		case errs[i] != nil:
			out[i].Err = errs[i]
			continue
		case d.Final:
			s.wroteSale(parts[i].Purchases[0].ProductID, d, cacheAt[i])
		}
		out[i].Answers = d.Answers
	}
	return out, nil
}

// reservePurchases are the purchases of reservations rs, under reserve.
func reservePurchases(rs []Reservation) []Purchase {
	ps := make([]Purchase, len(rs))
	for i, r := range rs {
		ps[i] = r.Purchase
		ps[i].Strategy = reserveStrategy
	}
	return ps
}

// decideReservations is the rule over reservations rs (purchases ps): as
// any sale's, each order carrying the stock its reservation left in
// Redis, which its buyer was answered.
func (s *Seckill) decideReservations(ps []Purchase, rs []Reservation) salestore.DecideFunc {
	st := Strategy{Name: reserveStrategy}
	return func(stock int64, expired []bool, used map[string]model.Order, units map[string]int64) salestore.Sale {
		d := s.decide(st, ps, expired, stock, used, units)
		for k, i := range d.Sold {
			d.Orders[k].RemainingStock = rs[i].Left
		}
		return d
	}
}
