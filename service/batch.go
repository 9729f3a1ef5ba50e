package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

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
//     row lock to the commit, the held work included.
//   - A fenced hold claims the product's next fencing token the moment it
//     is granted the lock (one short statement: fence = fence + 1, read
//     back), which makes every earlier holder's token stale. Its write
//     applies only while the fence is still its token, and sells from the
//     stock it reads under the row lock: a holder overtaken by a later
//     holder's claim, or by a stock reset, writes nothing and gets
//     ErrLockLost, and no decrement can take the stock below zero whoever
//     else writes. A hold with nothing to do between its grant and its
//     write (no hold_ms, no pause_ms) folds the claim into the write: the
//     write's first statement moves the fence on, so claim and write are
//     one atomic step and a holder that read or claimed before is fenced
//     off all the same.
//   - An unfenced hold (local, setnx and the others with fencing off)
//     trusts its lock: it sells from the stock it read before the work and
//     writes the decrement unconditionally. Two holders at once oversell;
//     that is what the unsafe strategies are kept to show.
func (s *Seckill) sellBatch(ctx context.Context, st Strategy, ts []*ticket, wd *locker.Watchdog) error {
	id := ts[0].p.ProductID
	var work, pause time.Duration
	for _, t := range ts {
		work, pause = max(work, t.p.Hold), max(pause, t.p.Pause)
	}
	// The held work, once per hold, then the pause: the whole holder stops,
	// its watchdog included.
	worked := false
	hold := func() error {
		if worked {
			return nil // a transaction tried again does not work again
		}
		worked = true
		if err := doWork(ctx, work); err != nil {
			return err
		}
		wd.Freeze()
		defer wd.Thaw()
		return doWork(ctx, pause)
	}
	if st.RowLock {
		return s.sellRowLocked(ctx, st, ts, work+pause, hold)
	}
	fenced := s.fencing(st, ts[0].p)
	if fenced && work+pause == 0 {
		// Nothing happens between the grant and the write, so the claim is
		// folded into the write: its first statement moves the fence on
		// and holds the row until the commit, claim and write one atomic
		// step, with no commit of its own.
		if len(ts) == 1 {
			return s.sellOne(ctx, st, ts[0], fenceWrite{claim: true})
		}
		return s.writeBatch(ctx, st, ts, true, 0, func(tx *gorm.DB) (int64, error) {
			return s.claimInWrite(tx, id)
		})
	}
	var token int64
	if fenced {
		var err error
		if token, err = s.claim(ctx, id); err != nil {
			return err
		}
	}
	var stock int64
	if !fenced || work+pause > 0 {
		var enough bool
		var err error
		if stock, enough, err = s.stockAtStart(ctx, ts); err != nil || !enough {
			return err
		}
	}
	if err := hold(); err != nil {
		return err
	}
	if fenced && len(ts) == 1 {
		return s.sellOne(ctx, st, ts[0], fenceWrite{token: &token})
	}
	return s.writeBatch(ctx, st, ts, fenced, 0, func(tx *gorm.DB) (int64, error) {
		if fenced {
			return s.checkFence(ctx, tx, st, id, token)
		}
		// Unfenced: sell from the stock read before the work. The row lock
		// is taken first all the same, as every writer does, so that two
		// holders at once oversell rather than deadlock.
		if err := forUpdate(tx).Select("id").Take(&model.Product{}, id).Error; err != nil {
			return 0, fmt.Errorf("lock the row of product %d: %w", id, err)
		}
		return stock, nil
	})
}

// sellRowLocked is a pessimistic hold: it reads the stock under the
// product's row lock (SELECT ... FOR UPDATE) and keeps it to the commit, the
// held work (hold, held long) included. The row lock is part of each
// purchase's lock wait, which began when it joined the line: the hold waits
// as long as the youngest may, and those whose own wait ran out meanwhile
// answer lock_timeout.
func (s *Seckill) sellRowLocked(ctx context.Context, st Strategy, ts []*ticket, held time.Duration, hold func() error) error {
	id := ts[0].p.ProductID
	until := ts[len(ts)-1].arrived.Add(s.cfg.LockWait)
	return s.writeBatch(ctx, st, ts, true, s.cfg.LockWait+held, func(tx *gorm.DB) (int64, error) {
		stock, err := s.lockRow(ctx, tx, st, id, until)
		if err != nil {
			return 0, err
		}
		s.expire(st, ts, time.Now())
		return stock, hold()
	})
}

// stockAtStart reads the stock as a hold starts: what an unfenced hold
// sells from, and, before any work, a way to spare the work when nothing is
// left. enough is false when less is left than any ticket asks for: each is
// then sold out, and its buyer looks up its request ID.
func (s *Seckill) stockAtStart(ctx context.Context, ts []*ticket) (stock int64, enough bool, err error) {
	id := ts[0].p.ProductID
	rctx, cancel := s.dbCtx(ctx, 0)
	prod, err := s.product(rctx, s.db, id)
	cancel()
	if err != nil {
		return 0, false, err
	}
	s.sawStock(id, prod.Stock, prod.Generation)
	if least := leastQuantity(ts); prod.Stock < least {
		for _, t := range ts {
			t.soldOut, t.stock = true, prod.Stock // its buyer looks up its request ID
		}
		return 0, false, nil
	}
	return prod.Stock, true, nil
}

// leastQuantity is the smallest quantity the tickets ask for.
func leastQuantity(ts []*ticket) int64 {
	least := ts[0].p.Quantity
	for _, t := range ts[1:] {
		least = min(least, t.p.Quantity)
	}
	return least
}

// writeBatch decides every ticket in line order against the stock that
// stockFor returns inside the transaction (bounded by DBTimeout plus extra,
// for what stockFor waits or works) (having taken the product's row
// lock: every writer takes it first), the request IDs already used and the
// units each user holds, then writes what was sold: one decrement, the
// users' new units and the orders, in one statement each. exact says the
// stock was read under the row lock; otherwise the decrement is written
// whatever the stock is now (the unsafe strategies' flaw). A request ID
// that another purchase wrote meanwhile (a duplicate key), or a deadlock,
// makes it decide again.
func (s *Seckill) writeBatch(ctx context.Context, st Strategy, ts []*ticket, exact bool, extra time.Duration, stockFor func(tx *gorm.DB) (int64, error)) error {
	const attempts = 3
	id := ts[0].p.ProductID
	gen := s.memory.generation(id)
	for attempt := 1; ; attempt++ {
		var left int64
		tctx, cancel := s.dbCtx(ctx, extra)
		err := s.transaction(tctx, func(tx *gorm.DB) error {
			stock, err := stockFor(tx)
			if err != nil {
				return err
			}
			left, err = s.decideAndWrite(tx, st, ts, stock, exact)
			return err
		})
		cancel()
		if uncommitted(err) {
			return s.settleBatch(ctx, ts, err)
		}
		if err == nil {
			s.wrote(id, left, gen)
		}
		if !retryable(err) || attempt == attempts {
			return err
		}
	}
}

// settleBatch answers the tickets of a batch whose COMMIT failed with
// cause (see settle). Committed: every answer stands as decided. Rolled
// back: nothing was written, and the whole hold fails (unavailable), its
// sold-out answers too, which may have counted on its own sales. Not
// known: the purchases it was to sell, and those replaying them, answer
// outcome_unknown; those that replayed an earlier order keep that answer;
// the rest were decided on a stock nobody can vouch for and wrote nothing:
// unavailable.
func (s *Seckill) settleBatch(ctx context.Context, ts []*ticket, cause error) error {
	var ids []string
	for _, t := range ts {
		if t.order != nil {
			ids = append(ids, t.p.RequestID)
		}
	}
	if len(ids) == 0 {
		// No order to write: every answer was decided on the stock read
		// under the row lock, whatever became of the COMMIT.
		return nil
	}
	_, committed, err := s.settle(ctx, ids, cause)
	switch {
	case err == nil && committed:
		return nil
	case err == nil:
		return storeErr(fmt.Sprintf("commit %d orders of product %d (rolled back)", len(ids), ts[0].p.ProductID), cause)
	}
	for _, t := range ts {
		switch {
		case t.order != nil || t.first != nil:
			t.r, t.err = Receipt{}, outcomeUnknown(t.p, errors.Join(cause, err))
		case t.r.Replayed:
		default:
			t.r, t.err = Receipt{}, ErrUnavailable.because(cause)
		}
	}
	return nil
}

// retryable says a batch's transaction failed for a reason that deciding
// again fixes: another purchase wrote one of its request IDs meanwhile, or
// the database chose it as a deadlock's victim.
func retryable(err error) bool {
	return errors.Is(err, gorm.ErrDuplicatedKey) || isDeadlock(err)
}

// isDeadlock says the database chose the transaction as a deadlock's
// victim: trying it again is the cure.
func isDeadlock(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == 1213
}

// decideAndWrite is writeBatch's transaction once the stock is known. It
// returns the stock it leaves.
func (s *Seckill) decideAndWrite(tx *gorm.DB, st Strategy, ts []*ticket, stock int64, exact bool) (int64, error) {
	used, err := usedRequestIDs(tx, ts)
	if err != nil {
		return 0, err
	}
	units, err := s.unitsHeld(tx, ts)
	if err != nil {
		return 0, err
	}
	sl := s.decide(st, ts, stock, used, units)
	if len(sl.orders) == 0 {
		return stock, nil
	}
	return s.writeSale(tx, ts, sl, units, exact)
}

// sale is what a batch decided to sell: orders[i] is sold[i]'s, total is
// their quantity and left the stock they leave.
type sale struct {
	orders      []model.Order
	sold        []*ticket
	left, total int64
}

// decide answers the tickets one by one in line order, against stock, the
// request IDs already used and the units each user holds (which it raises
// by what it sells): a replay, a refusal, or a place in the sale.
func (s *Seckill) decide(st Strategy, ts []*ticket, stock int64, used map[string]model.Order, units map[string]int64) sale {
	id := ts[0].p.ProductID
	accepted := map[string]*ticket{} // by request ID
	sl := sale{left: stock}
	for _, t := range ts {
		t.r, t.err, t.order, t.first = Receipt{}, nil, nil, nil
		if t.expired {
			t.err = ErrLockTimeout.because(fmt.Errorf("row lock of product %d: its wait ran out", id))
			continue
		}
		p := t.p
		if p.RequestID != "" {
			if o, ok := used[p.RequestID]; ok {
				t.r, t.err = replayOf(p, o)
				continue
			}
			if first, ok := accepted[p.RequestID]; ok {
				t.first = first
				if _, err := replayOf(p, newOrder(first.p, st.Name, 0)); err != nil {
					t.err, t.first = err, nil
				}
				continue
			}
		}
		if p.Quantity > sl.left {
			t.err = soldOut(id, sl.left)
			continue
		}
		if limit := s.cfg.PerUserLimit; limit > 0 && units[p.UserID]+p.Quantity > limit {
			t.err = errorf(CodeLimitExceeded, "user %s has %d of product %d, the limit is %d", p.UserID, units[p.UserID], id, limit)
			continue
		}
		sl.left -= p.Quantity
		sl.total += p.Quantity
		units[p.UserID] += p.Quantity
		sl.orders = append(sl.orders, newOrder(p, st.Name, sl.left))
		sl.sold = append(sl.sold, t)
		if p.RequestID != "" {
			accepted[p.RequestID] = t
		}
	}
	return sl
}

// writeSale writes what decide sold: one decrement (conditional on the
// stock when exact), the users' new units and the orders; then it answers
// the tickets sold and those replaying them. It returns the stock it
// leaves.
func (s *Seckill) writeSale(tx *gorm.DB, ts []*ticket, sl sale, units map[string]int64, exact bool) (int64, error) {
	id := ts[0].p.ProductID
	orders, left, total := sl.orders, sl.left, sl.total
	q := tx.Model(&model.Product{}).Where("id = ?", id)
	if exact {
		q = q.Where("stock >= ?", total)
	}
	res := q.Update("stock", exprDecrement(total))
	if res.Error != nil {
		return 0, fmt.Errorf("decrement the stock of product %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return 0, fmt.Errorf("decrement the stock of product %d by %d: the row changed under its lock", id, total)
	}
	if !exact {
		// Unfenced: another holder may have written since the stock was
		// read; the orders say what the stock really became.
		var after int64
		if err := tx.Model(&model.Product{}).Where("id = ?", id).Select("stock").Scan(&after).Error; err != nil {
			return 0, fmt.Errorf("read the stock of product %d: %w", id, err)
		}
		for i := range orders {
			orders[i].RemainingStock += after - left
		}
		left = after
	}
	if err := s.setUnits(tx, id, sl.sold, units); err != nil {
		return 0, err
	}
	if err := tx.Create(&orders).Error; err != nil {
		return 0, fmt.Errorf("write %d orders: %w", len(orders), err)
	}
	// The orders are final now, their IDs included.
	for i, t := range sl.sold {
		t.order = &orders[i]
	}
	for _, t := range ts {
		switch {
		case t.order != nil:
			t.r = Receipt{Order: *t.order}
		case t.first != nil:
			t.r = Receipt{Order: *t.first.order, Replayed: true}
		}
	}
	return left, nil
}

// usedRequestIDs returns the orders already made with the tickets' request
// IDs, by request ID.
func usedRequestIDs(tx *gorm.DB, ts []*ticket) (map[string]model.Order, error) {
	var ids []string
	for _, t := range ts {
		if t.p.RequestID != "" && !t.p.serverRequestID {
			ids = append(ids, t.p.RequestID)
		}
	}
	used := map[string]model.Order{}
	if len(ids) == 0 {
		return used, nil
	}
	var orders []model.Order
	if err := tx.Where("request_id IN ?", ids).Find(&orders).Error; err != nil {
		return nil, fmt.Errorf("look up request IDs: %w", err)
	}
	for _, o := range orders {
		used[string(*o.RequestID)] = o
	}
	return used, nil
}

// unitsHeld returns the units of the product that the tickets' users
// already hold, under those rows' locks (an empty map when there is no
// limit).
func (s *Seckill) unitsHeld(tx *gorm.DB, ts []*ticket) (map[string]int64, error) {
	units := map[string]int64{}
	if s.cfg.PerUserLimit <= 0 {
		return units, nil
	}
	var users []string
	for _, t := range ts {
		users = append(users, t.p.UserID)
	}
	var rows []model.UserUnits
	err := forUpdate(tx).
		Where("product_id = ? AND user_id IN ?", ts[0].p.ProductID, users).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read the units users hold: %w", err)
	}
	for _, r := range rows {
		units[string(r.UserID)] = r.Units
	}
	return units, nil
}

// setUnits writes the new units of the users sold to.
func (s *Seckill) setUnits(tx *gorm.DB, productID int64, sold []*ticket, units map[string]int64) error {
	if s.cfg.PerUserLimit <= 0 {
		return nil
	}
	var rows []model.UserUnits
	seen := map[string]bool{}
	for _, t := range sold {
		if !seen[t.p.UserID] {
			seen[t.p.UserID] = true
			rows = append(rows, model.UserUnits{ProductID: productID, UserID: model.BinaryString(t.p.UserID), Units: units[t.p.UserID]})
		}
	}
	err := tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "product_id"}, {Name: "user_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"units"}),
	}).Create(&rows).Error
	if err != nil {
		return fmt.Errorf("write the units users hold: %w", err)
	}
	return nil
}
