package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/sale"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

// sellLocked is the critical section of a hold of a strategy's lock of
// package locker (its way.hold; pessimistic's is sellRowLocked): it sells
// the hold's purchases, all of one product and strategy, in line order, as
// if one by one, in one transaction, and returns one answer per purchase
// (an error is the whole hold's).
//
//   - A fenced hold with work to do reads the product (its stock and
//     generation), then claims the product's next fencing token (one short
//     statement: fence = fence + 1, read back), which makes every earlier
//     holder's token stale. Its sale writes only while the fence is still
//     its token, read under the row lock with the stock it sells from: a
//     hold overtaken by a later holder of its lock, or by a stock reset,
//     writes nothing and gets failure.ErrLockLost; one whose fence another lock
//     kind's holder moved sells again (overtaken). No decrement can
//     take the stock below zero whoever else writes. A hold with nothing
//     to do between its grant and its write (no Work, no Pause) folds the
//     claim into the write, under the row lock its sale read the stock
//     under: claim and write are one atomic step, and a holder that read
//     or claimed before is fenced off all the same.
//   - An unfenced hold (local, setnx and the others with fencing off)
//     trusts its lock: it sells from the stock it read before the work and
//     writes the decrement unconditionally. Two holders at once oversell;
//     that is what the unsafe strategies are kept to show.
func (s *Seckill) sellLocked(ctx context.Context, st Strategy, h hold) ([]salestore.Answer, error) {
	ps := h.ps
	busy, work := batchWork(ctx, ps, h.wd)
	fenced := s.fencing(st, ps[0])
	if fenced && busy == 0 {
		return s.sellClaiming(ctx, st, ps)
	}
	// What the hold sells from (unfenced), or, before any work, a way to
	// spare the work when nothing is left; and the generation it began in.
	start, err := s.stockAtStart(ctx, ps)
	if err != nil {
		return nil, err
	}
	if least := leastQuantity(ps); start.Stock < least {
		return soldOutAt(len(ps), start.Stock), nil
	}
	if !fenced {
		if err := work(); err != nil {
			return nil, err
		}
		// Unfenced: sell from the stock read before the work. The row
		// lock is taken first all the same, as every writer does, so that
		// two holders at once oversell rather than deadlock.
		return s.sell(ctx, st, ps, salestore.Read{Trusted: &start.Stock})
	}
	token, err := s.sales.Claim(ctx, ps[0].ProductID)
	if err != nil {
		return nil, err
	}
	if err := work(); err != nil {
		return nil, err
	}
	as, err := s.sell(ctx, st, ps, salestore.Read{Token: &token})
	if moved, ok := errors.AsType[*salestore.FenceMoved](err); ok {
		return s.overtaken(ctx, st, ps, h.lease, token, start.Generation, moved)
	}
	return as, err
}

// sell has the sale store sell ps, deciding with the rule, and tells the
// stock cache what the sale left.
func (s *Seckill) sell(ctx context.Context, st Strategy, ps []Purchase, r salestore.Read) ([]salestore.Answer, error) {
	id := ps[0].ProductID
	v := s.cache.At(id)
	d, err := s.sales.Sell(ctx, ps, r, func(stock int64, expired []bool, used map[string]model.Order, units map[string]int64) salestore.Sale {
		return s.decide(st, ps, expired, stock, used, units)
	})
	if errors.Is(err, failure.ErrStrategyConflict) {
		return s.conflicted(ctx, ps, err), nil
	}
	if err != nil {
		return nil, err
	}
	if d.Final {
		s.wroteSale(id, d, v)
	}
	return d.Answers, nil
}

// wroteSale tells the stock cache what sale d left of the product, whose
// version the cache held at the sale's start (at): in the version the
// sale read under the row lock, when that is older. On a Galera Cluster
// the row lock is the node's own: a sale does not wait for a return of
// units on another node, nor the return for it, and the cache may have
// heard of the return's newer version before the sale reports.
func (s *Seckill) wroteSale(id int64, d salestore.Sale, at stockcache.Version) {
	if d.Read.Before(at) {
		at = d.Read
	}
	s.wrote(id, d.Left, at)
}

// conflicted answers purchases of a product that sells under another
// strategy now (conflict): each its request ID's order, made before the
// product changed hands, or the conflict.
func (s *Seckill) conflicted(ctx context.Context, ps []Purchase, conflict error) []salestore.Answer {
	as := make([]salestore.Answer, len(ps))
	rctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	for i, p := range ps {
		as[i].Err = conflict
		if p.RequestID == "" || p.ServerRequestID {
			continue
		}
		if r, ok, err := s.replay(rctx, s.db, p); ok || err != nil {
			as[i] = salestore.Answer{R: r, Err: err}
		}
	}
	return as
}

// hold is one tenure of a product's lock: the purchases it sells, in line
// order, and when each joined the line (its lock wait runs from there);
// the lease (nil for pessimistic, whose lock is the row's) and the
// watchdog that renews it (nil: none).
type hold struct {
	ps      []Purchase
	arrived []time.Time
	lease   locker.Lease
	wd      *locker.Watchdog
}

// soldOutAt is the answer of n purchases that found only stock units left.
func soldOutAt(n int, stock int64) []salestore.Answer {
	as := make([]salestore.Answer, n)
	for i := range as {
		as[i] = salestore.Answer{SoldOut: true, Stock: stock}
	}
	return as
}

// sellClaiming is a fenced hold with nothing to do between its grant and
// its write: the claim is folded into the write, which moves the fence on
// under the row lock it read the stock under, claim and sale one atomic
// step, with no commit of its own. A hold of one purchase tries the store's
// cheapest form first.
func (s *Seckill) sellClaiming(ctx context.Context, st Strategy, ps []Purchase) ([]salestore.Answer, error) {
	if len(ps) == 1 {
		a, err := s.sellOne(ctx, st, ps[0], true)
		return []salestore.Answer{a}, err
	}
	return s.sell(ctx, st, ps, salestore.Read{Claim: true})
}

// overtaken answers a fenced hold whose write found the product's fence
// moved on from its token (moved). Three things move it: a holder of the
// same lock kind that took the lock after this hold's lease ran out, a
// stock reset, and a holder of another kind, which this hold's lock does
// not exclude (kinds keep keys of their own: a rolling change of
// SECKILL_LOCK mixes them). Only the last leaves the generation the hold
// began in and its lease still held: the hold then sells with the claim
// folded into the write, one atomic step that needs no lease, from the
// stock it reads under the row lock. Otherwise, or when the lock's nodes
// cannot tell, it is lock_lost: nothing was written.
func (s *Seckill) overtaken(ctx context.Context, st Strategy, ps []Purchase, lease locker.Lease, token, gen int64, moved *salestore.FenceMoved) ([]salestore.Answer, error) {
	id := ps[0].ProductID
	if moved.Generation != gen || lease == nil {
		return nil, s.lockLost(st, id, token)
	}
	hctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	held, err := lease.Held(hctx)
	cancel()
	if err != nil {
		s.log.WarnContext(ctx, "fence moved on and the lease could not be checked", "strategy", st.Name, "product", id, "err", err)
	}
	if !held {
		return nil, s.lockLost(st, id, token)
	}
	s.log.DebugContext(ctx, "fence moved on by another lock kind's holder: selling with the claim in the write", "strategy", st.Name, "product", id)
	return s.sellClaiming(ctx, st, ps)
}

// batchWork is what a hold does between its grant and its write, and how
// long that lasts (busy): the longest Work of the batch, then its longest
// Pause, during which the whole holder stops, its watchdog included. work
// does it once per hold: a transaction tried again does not work again.
func batchWork(ctx context.Context, ps []Purchase, wd *locker.Watchdog) (busy time.Duration, work func() error) {
	var longest, pause time.Duration
	for _, p := range ps {
		longest, pause = max(longest, p.Work), max(pause, p.Pause)
	}
	worked := false
	return longest + pause, func() error {
		if worked {
			return nil // a transaction tried again does not work again
		}
		worked = true
		if err := doWork(ctx, longest); err != nil {
			return err
		}
		wd.Freeze()
		defer wd.Thaw()
		return doWork(ctx, pause)
	}
}

// sellRowLocked is a pessimistic hold: it reads the stock under the
// product's row lock (SELECT ... FOR UPDATE) and keeps it to the commit, the
// batch's work included. The row lock is part of
// each purchase's lock wait, which began when it joined the line: the hold
// waits as long as the youngest may, and those whose own wait ran out
// meanwhile answer lock_timeout.
func (s *Seckill) sellRowLocked(ctx context.Context, st Strategy, h hold) ([]salestore.Answer, error) {
	busy, work := batchWork(ctx, h.ps, h.wd)
	as, err := s.sell(ctx, st, h.ps, salestore.Read{
		LockUntil: h.arrived[len(h.arrived)-1].Add(s.cfg.LockWait),
		Extra:     s.cfg.LockWait + busy,
		UnderLock: func(waited time.Duration) ([]bool, error) {
			s.metrics.LockWaited(st.Name, "acquired", waited)
			return s.expired(st, h.arrived, time.Now()), work()
		},
	})
	if timeout, ok := errors.AsType[*salestore.RowLockTimeout](err); ok {
		s.metrics.LockWaited(st.Name, "timeout", timeout.Waited)
		s.metrics.LockFailed(st.Name, "timeout")
		return nil, failure.ErrLockTimeout.Because(timeout)
	}
	return as, err
}

// stockAtStart reads the product as a hold starts: the stock an unfenced
// hold sells from, the generation a fenced one begins in, and, before any
// work, a way to spare the work when nothing is left.
func (s *Seckill) stockAtStart(ctx context.Context, ps []Purchase) (model.Product, error) {
	id := ps[0].ProductID
	rctx, cancel := s.dbCtx(ctx, 0)
	prod, err := s.product(rctx, s.db, id)
	cancel()
	if err != nil {
		return model.Product{}, err
	}
	s.cache.Saw(id, prod.Stock, stockcache.Of(prod))
	return prod, nil
}

// leastQuantity is the smallest quantity the purchases ask for.
func leastQuantity(ps []Purchase) int64 {
	least := ps[0].Quantity
	for _, p := range ps[1:] {
		least = min(least, p.Quantity)
	}
	return least
}

// decide asks the sale rule (package sale) to answer the purchases in line
// order, against stock, the orders already made with their request IDs
// (used) and the units each user holds, and answers those it does not
// sell: a replay, a refusal. The stores read what it needs under the
// product's row lock, call it, and write what it sold. A purchase whose own lock wait ran out before
// the hold got the row lock (expired[i]) answers lock_timeout and is left
// out.
func (s *Seckill) decide(st Strategy, ps []Purchase, expired []bool, stock int64, used map[string]model.Order, units map[string]int64) salestore.Sale {
	id := ps[0].ProductID
	state := sale.State{Product: id, Stock: stock, Limit: s.cfg.PerUserLimit, Units: units}
	if len(used) > 0 {
		state.Used = make(map[string]sale.Prior, len(used))
		for rid, o := range used {
			state.Used[rid] = sale.Prior{Product: o.ProductID, User: string(o.UserID), Quantity: o.Quantity}
		}
	}
	d := salestore.Sale{Answers: make([]salestore.Answer, len(ps))}
	rule := make([]sale.Purchase, 0, len(ps))
	in := make([]int, 0, len(ps)) // in[k] is rule[k]'s index in ps
	for i, p := range ps {
		if expired != nil && expired[i] {
			d.Answers[i].Err = failure.ErrLockTimeout.Because(fmt.Errorf("row lock of product %d: its wait ran out", id))
			continue
		}
		rule = append(rule, sale.Purchase{RequestID: p.RequestID, User: p.UserID, Quantity: p.Quantity})
		in = append(in, i)
	}
	out := sale.Decide(state, rule)
	d.Left, d.Total, d.Units = out.Left, out.Sold, out.Units
	for k, v := range out.Decisions {
		i := in[k]
		switch v.Verdict {
		case sale.Sold:
			d.Orders = append(d.Orders, salestore.NewOrder(ps[i], st.Name, v.Left))
			d.Sold = append(d.Sold, i)
		case sale.ReplayOf:
			if d.FirstOf == nil {
				d.FirstOf = map[int]int{}
			}
			d.FirstOf[i] = in[v.Of]
		default:
			d.Answers[i].R, d.Answers[i].Err = s.refusal(ps[i], v, used[ps[i].RequestID])
		}
	}
	return d
}

// refusal is the answer to a purchase the sale rule did not sell (d): a
// replay of prior, the order its request ID made, or an error.
func (s *Seckill) refusal(p Purchase, d sale.Decision, prior model.Order) (Receipt, error) {
	switch d.Verdict {
	case sale.Replay:
		return Receipt{Order: prior, Replayed: true}, nil
	case sale.SoldOut:
		return Receipt{}, soldOut(p.ProductID, d.Left)
	case sale.OverLimit:
		return Receipt{}, failure.Errorf(failure.CodeLimitExceeded, "user %s has %d of product %d, the limit is %d", p.UserID, d.Units, p.ProductID, s.cfg.PerUserLimit)
	case sale.Reused:
		return Receipt{}, requestIDReused(p)
	}
	return Receipt{}, fmt.Errorf("purchase of product %d: the sale rule answered %v", p.ProductID, d.Verdict)
}
