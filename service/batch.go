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

// ticket is one purchase in line and in a hold: what it asked for and what
// it got.
type ticket struct {
	p   Purchase
	r   Receipt
	err error
	// done is closed once r and err are its answer.
	done chan struct{}
	// arrived is when it joined the line: its lock wait runs from there.
	arrived time.Time
	// taken says it left the line for a hold or an answer (guarded by
	// lines.mu).
	taken bool
	// soldOut says the hold, or the memory, found less than its quantity
	// left (stock): its buyer answers sold out, after looking up its
	// request ID on its own time.
	soldOut bool
	stock   int64
	// order is the order the purchase made, once written.
	order *model.Order
	// first is the ticket of this hold with the same request ID that was
	// accepted before this one: this one replays its order.
	first *ticket
	// expired says its own lock wait ran out before the hold got the
	// product's row lock (pessimistic): it answers lock_timeout.
	expired bool
}

// sellBatch is the critical section of a hold: it sells the tickets, all
// of one product and strategy, in line order, as if one by one, in one
// transaction.
//
//   - pessimistic reads the stock with SELECT ... FOR UPDATE and keeps the
//     row lock to the commit, the batch's work included.
//   - A fenced hold claims the product's next fencing token the moment it
//     is granted the lock (one short statement: fence = fence + 1, read
//     back), which makes every earlier holder's token stale. Its write
//     applies only while the fence is still its token, and sells from the
//     stock it reads under the row lock: a holder overtaken by a later
//     holder's claim, or by a stock reset, writes nothing and gets
//     ErrLockLost, and no decrement can take the stock below zero whoever
//     else writes. A hold with nothing to do between its grant and its
//     write (no Work, no Pause) folds the claim into the write: the
//     write's first statement moves the fence on, so claim and write are
//     one atomic step and a holder that read or claimed before is fenced
//     off all the same.
//   - An unfenced hold (local, setnx and the others with fencing off)
//     trusts its lock: it sells from the stock it read before the work and
//     writes the decrement unconditionally. Two holders at once oversell;
//     that is what the unsafe strategies are kept to show.
func (s *Seckill) sellBatch(ctx context.Context, st Strategy, ts []*ticket, lease locker.Lease, wd *locker.Watchdog) error {
	id := ts[0].p.ProductID
	busy, work := batchWork(ctx, ts, wd)
	if st.RowLock {
		return s.sellRowLocked(ctx, st, ts, busy, work)
	}
	fenced := s.fencing(st, ts[0].p)
	if fenced && busy == 0 {
		return s.sellClaiming(ctx, st, ts)
	}
	// What the hold sells from (unfenced), or, before any work, a way to
	// spare the work when nothing is left; and the generation it began in.
	start, enough, err := s.stockAtStart(ctx, ts)
	if err != nil || !enough {
		return err
	}
	if !fenced {
		if err := work(); err != nil {
			return err
		}
		return s.writeBatch(ctx, st, ts, false, 0, func(tx *gorm.DB) (int64, error) {
			// Unfenced: sell from the stock read before the work. The row
			// lock is taken first all the same, as every writer does, so
			// that two holders at once oversell rather than deadlock.
			if err := forUpdate(tx).Select("id").Take(&model.Product{}, id).Error; err != nil {
				return 0, fmt.Errorf("lock the row of product %d: %w", id, err)
			}
			return start.Stock, nil
		})
	}
	token, err := s.claim(ctx, id)
	if err != nil {
		return err
	}
	if err := work(); err != nil {
		return err
	}
	if len(ts) == 1 {
		err = s.sellOne(ctx, st, ts[0], fenceWrite{token: &token})
	} else {
		err = s.writeBatch(ctx, st, ts, true, 0, func(tx *gorm.DB) (int64, error) {
			return s.checkFence(tx, id, token)
		})
	}
	if moved, ok := errors.AsType[*fenceMoved](err); ok {
		return s.overtaken(ctx, st, ts, lease, token, start.Generation, moved)
	}
	return err
}

// sellClaiming is a fenced hold with nothing to do between its grant and
// its write: the claim is folded into the write, whose first statement
// moves the fence on and holds the row until the commit, claim and write
// one atomic step, with no commit of its own.
func (s *Seckill) sellClaiming(ctx context.Context, st Strategy, ts []*ticket) error {
	if len(ts) == 1 {
		return s.sellOne(ctx, st, ts[0], fenceWrite{claim: true})
	}
	if done, err := s.sellInTrips(ctx, st, ts); done {
		return err
	}
	id := ts[0].p.ProductID
	return s.writeBatch(ctx, st, ts, true, 0, func(tx *gorm.DB) (int64, error) {
		return s.claimInWrite(tx, id)
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
func (s *Seckill) overtaken(ctx context.Context, st Strategy, ts []*ticket, lease locker.Lease, token, gen int64, moved *fenceMoved) error {
	id := ts[0].p.ProductID
	if moved.generation != gen || lease == nil {
		return s.lockLost(st, id, token)
	}
	hctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	held, err := lease.Held(hctx)
	cancel()
	if err != nil {
		s.log.WarnContext(ctx, "fence moved on and the lease could not be checked", "strategy", st.Name, "product", id, "err", err)
	}
	if !held {
		return s.lockLost(st, id, token)
	}
	s.log.DebugContext(ctx, "fence moved on by another lock kind's holder: selling with the claim in the write", "strategy", st.Name, "product", id)
	return s.sellClaiming(ctx, st, ts)
}

// batchWork is what a hold does between its grant and its write, and how
// long that lasts (busy): the longest Work of the batch, then its longest
// Pause, during which the whole holder stops, its watchdog included. work
// does it once per hold: a transaction tried again does not work again.
func batchWork(ctx context.Context, ts []*ticket, wd *locker.Watchdog) (busy time.Duration, work func() error) {
	var longest, pause time.Duration
	for _, t := range ts {
		longest, pause = max(longest, t.p.Work), max(pause, t.p.Pause)
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
func (s *Seckill) sellRowLocked(ctx context.Context, st Strategy, ts []*ticket, busy time.Duration, work func() error) error {
	id := ts[0].p.ProductID
	until := ts[len(ts)-1].arrived.Add(s.cfg.LockWait)
	return s.writeBatch(ctx, st, ts, true, s.cfg.LockWait+busy, func(tx *gorm.DB) (int64, error) {
		stock, err := s.lockRow(ctx, tx, st, id, until)
		if err != nil {
			return 0, err
		}
		s.expire(st, ts, time.Now())
		return stock, work()
	})
}

// stockAtStart reads the product as a hold starts: the stock an unfenced
// hold sells from, the generation a fenced one begins in, and, before any
// work, a way to spare the work when nothing is left. enough is false when
// less is left than any ticket asks for: each is then sold out, and its
// buyer looks up its request ID.
func (s *Seckill) stockAtStart(ctx context.Context, ts []*ticket) (prod model.Product, enough bool, err error) {
	id := ts[0].p.ProductID
	rctx, cancel := s.dbCtx(ctx, 0)
	prod, err = s.product(rctx, s.db, id)
	cancel()
	if err != nil {
		return model.Product{}, false, err
	}
	s.sawStock(id, prod.Stock, prod.Generation)
	if least := leastQuantity(ts); prod.Stock < least {
		for _, t := range ts {
			t.soldOut, t.stock = true, prod.Stock // its buyer looks up its request ID
		}
		return prod, false, nil
	}
	return prod, true, nil
}

// leastQuantity is the smallest quantity the tickets ask for.
func leastQuantity(ts []*ticket) int64 {
	least := ts[0].p.Quantity
	for _, t := range ts[1:] {
		least = min(least, t.p.Quantity)
	}
	return least
}
