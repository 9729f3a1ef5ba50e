package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/model"
)

// sellBatch is the critical section of a hold: it sells the hold's
// purchases, all of one product and strategy, in line order, as if one by
// one, in one transaction, and returns one answer per purchase (an error
// is the whole hold's).
//
//   - pessimistic reads the stock with SELECT ... FOR UPDATE and keeps the
//     row lock to the commit, the batch's work included.
//   - A fenced hold with work to do reads the product (its stock and
//     generation), then claims the product's next fencing token (one short
//     statement: fence = fence + 1, read back), which makes every earlier
//     holder's token stale. Its write applies only while the fence is
//     still its token, and sells from the stock it reads under the row
//     lock: a hold overtaken by a later holder of its lock, or by a stock
//     reset, writes nothing and gets ErrLockLost; one whose fence another
//     lock kind's holder moved sells again (overtaken). No decrement can
//     take the stock below zero whoever else writes. A hold with nothing to do between its grant and its
//     write (no Work, no Pause) folds the claim into the write: the
//     write's first statement moves the fence on, so claim and write are
//     one atomic step and a holder that read or claimed before is fenced
//     off all the same.
//   - An unfenced hold (local, setnx and the others with fencing off)
//     trusts its lock: it sells from the stock it read before the work and
//     writes the decrement unconditionally. Two holders at once oversell;
//     that is what the unsafe strategies are kept to show.
func (s *Seckill) sellBatch(ctx context.Context, st Strategy, h hold) ([]answer, error) {
	ps := h.ps
	id := ps[0].ProductID
	busy, work := batchWork(ctx, ps, h.wd)
	if st.RowLock {
		return s.sellRowLocked(ctx, st, h, busy, work)
	}
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
		return s.writeBatch(ctx, st, ps, false, 0, func(tx *gorm.DB) (int64, []bool, error) {
			// Unfenced: sell from the stock read before the work. The row
			// lock is taken first all the same, as every writer does, so
			// that two holders at once oversell rather than deadlock.
			if err := forUpdate(tx).Select("id").Take(&model.Product{}, id).Error; err != nil {
				return 0, nil, fmt.Errorf("lock the row of product %d: %w", id, err)
			}
			return start.Stock, nil, nil
		})
	}
	token, err := s.claim(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := work(); err != nil {
		return nil, err
	}
	var as []answer
	if len(ps) == 1 {
		var a answer
		a, err = s.sellOne(ctx, st, ps[0], fenceWrite{token: &token})
		as = []answer{a}
	} else {
		as, err = s.writeBatch(ctx, st, ps, true, 0, func(tx *gorm.DB) (int64, []bool, error) {
			stock, err := s.checkFence(tx, id, token)
			return stock, nil, err
		})
	}
	if moved, ok := errors.AsType[*fenceMoved](err); ok {
		return s.overtaken(ctx, st, ps, h.lease, token, start.Generation, moved)
	}
	return as, err
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

// answer is what one purchase of a hold is answered: a receipt or an
// error; or, when soldOut, that only stock units were left, too few: its
// buyer then answers sold out after looking up its request ID, on its own
// time rather than the hold's.
type answer struct {
	r       Receipt
	err     error
	soldOut bool
	stock   int64
}

// soldOutAt is the answer of n purchases that found only stock units left.
func soldOutAt(n int, stock int64) []answer {
	as := make([]answer, n)
	for i := range as {
		as[i] = answer{soldOut: true, stock: stock}
	}
	return as
}

// sellClaiming is a fenced hold with nothing to do between its grant and
// its write: the claim is folded into the write, whose first statement
// moves the fence on and holds the row until the commit, claim and write
// one atomic step, with no commit of its own.
func (s *Seckill) sellClaiming(ctx context.Context, st Strategy, ps []Purchase) ([]answer, error) {
	if len(ps) == 1 {
		a, err := s.sellOne(ctx, st, ps[0], fenceWrite{claim: true})
		return []answer{a}, err
	}
	if as, done, err := s.sellInTrips(ctx, st, ps); done {
		return as, err
	}
	id := ps[0].ProductID
	return s.writeBatch(ctx, st, ps, true, 0, func(tx *gorm.DB) (int64, []bool, error) {
		stock, err := s.claimInWrite(tx, id)
		return stock, nil, err
	})
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
func (s *Seckill) overtaken(ctx context.Context, st Strategy, ps []Purchase, lease locker.Lease, token, gen int64, moved *fenceMoved) ([]answer, error) {
	id := ps[0].ProductID
	if moved.generation != gen || lease == nil {
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
// batch's work included (work, which lasts busy). The row lock is part of
// each purchase's lock wait, which began when it joined the line: the hold
// waits as long as the youngest may, and those whose own wait ran out
// meanwhile answer lock_timeout.
func (s *Seckill) sellRowLocked(ctx context.Context, st Strategy, h hold, busy time.Duration, work func() error) ([]answer, error) {
	id := h.ps[0].ProductID
	until := h.arrived[len(h.arrived)-1].Add(s.cfg.LockWait)
	return s.writeBatch(ctx, st, h.ps, true, s.cfg.LockWait+busy, func(tx *gorm.DB) (int64, []bool, error) {
		stock, err := s.lockRow(ctx, tx, st, id, until)
		if err != nil {
			return 0, nil, err
		}
		return stock, s.expired(st, h.arrived, time.Now()), work()
	})
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
	s.sawStock(id, prod.Stock, prod.Generation)
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
