package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// fencing says whether p's stock write is fenced under st.
func (s *Seckill) fencing(st Strategy, p Purchase) bool {
	on := s.cfg.Fencing
	if p.Fencing != nil {
		on = *p.Fencing
	}
	return on && st.Fenced
}

// lockKey is the Redis key (or local key) of a product's lock under a
// strategy's lock kind. Each kind keeps keys of its own, so that one never
// blocks another: a setnx holder that died leaves its key without expiry,
// by the classic recipe, and token and redlock must not wait on it. (The
// fence they write under is shared: it is what keeps them exact together.)
func (s *Seckill) lockKey(kind string, productID int64) string {
	return s.cfg.KeyPrefix + "lock:" + kind + ":product:" + strconv.FormatInt(productID, 10)
}

// lock takes st's lock for the product, waiting until ctx ends.
func (s *Seckill) lock(ctx context.Context, st Strategy, productID int64) (locker.Lease, error) {
	lk, ok := s.lockers[st.Name]
	if !ok {
		return nil, ErrUnavailable.because(fmt.Errorf("strategy %s has no lock configured", st.Name))
	}
	lease, err := lk.Lock(ctx, s.lockKey(st.Name, productID))
	switch {
	case err == nil:
		return lease, nil
	case errors.Is(err, locker.ErrUnavailable):
		return nil, errorf(CodeUnavailable, "too few Redis nodes answer for the strategy's lock").because(err)
	}
	return nil, ErrLockTimeout.because(err)
}

// unlockBudget bounds giving a lock back.
const unlockBudget = 2 * time.Second

// unlock gives the lease back on a context the buyer hanging up cannot
// cancel. An error matters only when the hold failed too (sold is the
// hold's error): once orders are committed, a lock that could not be given
// back still expires at its TTL, so it is reported, not returned.
func (s *Seckill) unlock(ctx context.Context, st Strategy, productID int64, lease locker.Lease, sold error) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockBudget)
	defer cancel()
	err := lease.Unlock(uctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, locker.ErrNotHeld):
		// The lease ran out while we worked: someone else may have held
		// the lock too. Fencing decided whether our write counted.
		s.metrics.lockFailed(st.Name, "expired")
		s.log.WarnContext(ctx, "lease expired before unlock", "strategy", st.Name, "product", productID, "err", err)
		return nil
	case sold != nil:
		return err
	}
	s.metrics.lockFailed(st.Name, "unlock_error")
	s.log.ErrorContext(ctx, "unlock failed", "strategy", st.Name, "product", productID, "err", err)
	return nil
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
		// The row lock is part of each purchase's lock wait, which began
		// when it joined the line: the hold waits as long as the youngest
		// may, and those whose own wait ran out meanwhile answer
		// lock_timeout.
		until := ts[len(ts)-1].arrived.Add(s.cfg.LockWait)
		return s.writeBatch(ctx, st, ts, true, s.cfg.LockWait+work+pause, func(tx *gorm.DB) (int64, error) {
			stock, err := s.lockRow(ctx, tx, st, id, until)
			if err != nil {
				return 0, err
			}
			s.expire(st, ts, time.Now())
			return stock, hold()
		})
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
		// The stock as the hold starts: what an unfenced hold sells from,
		// and, before any work, a way to spare the work when nothing is
		// left.
		rctx, cancel := s.dbCtx(ctx, 0)
		prod, err := s.product(rctx, s.db, id)
		cancel()
		if err != nil {
			return err
		}
		s.sawStock(id, prod.Stock, prod.Generation)
		if least := leastQuantity(ts); prod.Stock < least {
			for _, t := range ts {
				t.soldOut, t.stock = true, prod.Stock // its buyer looks up its request ID
			}
			return nil
		}
		stock = prod.Stock
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
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Select("id").Take(&model.Product{}, id).Error; err != nil {
			return 0, fmt.Errorf("lock the row of product %d: %w", id, err)
		}
		return stock, nil
	})
}

// claim issues the product's next fencing token, in one short statement of
// its own: fence = fence + 1, read back from the write itself (MySQL's
// LAST_INSERT_ID(expr), SQLite's RETURNING). The token comes from the
// database that holds the stock, so it grows per product whatever happens
// to the Redis nodes, and it makes every earlier holder's token stale.
func (s *Seckill) claim(ctx context.Context, id int64) (int64, error) {
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	if !s.mysql {
		var fences []int64
		if err := s.db.WithContext(ctx).Raw("UPDATE products SET fence = fence + 1 WHERE id = ? RETURNING fence", id).Scan(&fences).Error; err != nil {
			return 0, storeErr(fmt.Sprintf("claim the fence of product %d", id), err)
		}
		if len(fences) == 0 {
			return 0, notFound(id)
		}
		return fences[0], nil
	}
	res, err := s.db.WithContext(ctx).ConnPool.ExecContext(ctx, "UPDATE products SET fence = LAST_INSERT_ID(fence + 1) WHERE id = ?", id)
	if err != nil {
		return 0, storeErr(fmt.Sprintf("claim the fence of product %d", id), err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, errors.Join(notFound(id), err)
	}
	token, err := res.LastInsertId()
	if err != nil {
		return 0, storeErr(fmt.Sprintf("read the fence of product %d", id), err)
	}
	return token, nil
}

// claimInWrite is the claim folded into a write: the transaction's first
// statement moves the fence on, taking the row lock until the commit, and
// the stock is read under it.
func (s *Seckill) claimInWrite(tx *gorm.DB, id int64) (int64, error) {
	res := tx.Model(&model.Product{}).Where("id = ?", id).Update("fence", gorm.Expr("fence + 1"))
	if res.Error != nil {
		return 0, fmt.Errorf("claim the fence of product %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return 0, notFound(id)
	}
	var stock int64
	err := tx.Model(&model.Product{}).Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id).Select("stock").Scan(&stock).Error
	if err != nil {
		return 0, fmt.Errorf("read the stock of product %d: %w", id, err)
	}
	return stock, nil
}

// fenceWrite is what a one-purchase write does with the fence: move it on
// itself (claim, the claim folded into the write), or apply only while it
// is still token (a claim made at the grant), or neither (nil token, no
// claim: optimistic).
type fenceWrite struct {
	claim bool
	token *int64
}

// lockLost is the answer of a hold whose token went stale.
func (s *Seckill) lockLost(st Strategy, id, token int64) error {
	s.metrics.lockFailed(st.Name, "lost")
	return ErrLockLost.because(
		fmt.Errorf("product %d: a later holder claimed its fence, or its stock was reset, after token %d", id, token))
}

// sellOne is a fenced hold of one purchase: one transaction of three
// statements, as few as a purchase can take. The decrement is conditional
// on the stock and either claims the fence itself or applies only while the
// fence is still the hold's token (fw), and says what it left; then the
// user's units are raised within the limit and the order written. A purchase it refuses, or whose request ID was used, is answered
// as one by one would: its request ID's order first.
func (s *Seckill) sellOne(ctx context.Context, st Strategy, t *ticket, fw fenceWrite) error {
	o, err := s.buyOne(ctx, st, t.p, fw)
	if err == nil {
		t.r = Receipt{Order: o}
		return nil
	}
	switch ErrorCode(err) {
	case CodeSoldOut, CodeLimitExceeded, CodeRequestIDReused, CodeNotFound:
		// The purchase's own answer (after its request ID's order, if any).
	default:
		if !errors.Is(err, gorm.ErrDuplicatedKey) {
			return err // the hold's: the lock lost, the store down
		}
	}
	rctx, rcancel := s.dbCtx(ctx, 0)
	defer rcancel()
	t.r, t.err = s.replayRaced(rctx, t.p, err)
	if errors.Is(t.err, gorm.ErrDuplicatedKey) {
		return t.err
	}
	return nil
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
				prod, err := s.product(ctx, tx, p.ProductID)
				if err != nil {
					return err
				}
				if fw.token != nil && prod.Fence != *fw.token {
					return s.lockLost(st, p.ProductID, *fw.token)
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
		if err := tx.Raw(query+" RETURNING stock", args...).Scan(&stocks).Error; err != nil {
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

// decrementSQL is takeStock's statement: the stock of product id
// decremented by q if at least q is left, the fence moved on (fw.claim) or
// checked (fw.token), the stock left in LAST_INSERT_ID on MySQL.
func (s *Seckill) decrementSQL(id, q int64, fw fenceWrite) (string, []any) {
	set := "stock = stock - ?"
	if s.mysql {
		set = "stock = LAST_INSERT_ID(stock - ?)"
	}
	if fw.claim {
		set += ", fence = fence + 1"
	}
	query := "UPDATE products SET " + set + ", updated_at = ? WHERE id = ? AND stock >= ?"
	args := []any{q, time.Now(), id, q}
	if fw.token != nil {
		query += " AND fence = ?"
		args = append(args, *fw.token)
	}
	return query, args
}

// expire marks the tickets whose own lock wait ran out before now.
func (s *Seckill) expire(st Strategy, ts []*ticket, now time.Time) {
	for _, t := range ts {
		t.expired = now.After(t.arrived.Add(s.cfg.LockWait))
		if t.expired {
			s.metrics.lockFailed(st.Name, "timeout")
		}
	}
}

// leastQuantity is the smallest quantity the tickets ask for.
func leastQuantity(ts []*ticket) int64 {
	least := ts[0].p.Quantity
	for _, t := range ts[1:] {
		least = min(least, t.p.Quantity)
	}
	return least
}

// lockRow reads the product's stock with SELECT ... FOR UPDATE, waiting
// for the row lock until until at the most.
func (s *Seckill) lockRow(ctx context.Context, tx *gorm.DB, st Strategy, id int64, until time.Time) (int64, error) {
	lockCtx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	start := time.Now()
	var prod model.Product
	err := tx.WithContext(lockCtx).Clauses(clause.Locking{Strength: "UPDATE"}).Take(&prod, id).Error
	switch {
	case lockCtx.Err() != nil && ctx.Err() == nil:
		s.metrics.lockWaited(st.Name, "timeout", time.Since(start))
		s.metrics.lockFailed(st.Name, "timeout")
		return 0, ErrLockTimeout.because(fmt.Errorf("row lock of product %d: %w", id, lockCtx.Err()))
	case errors.Is(err, gorm.ErrRecordNotFound):
		return 0, notFound(id)
	case err != nil:
		return 0, fmt.Errorf("lock the row of product %d: %w", id, err)
	}
	s.metrics.lockWaited(st.Name, "acquired", time.Since(start))
	return prod.Stock, nil
}

// checkFence reads the product's stock and fence under its row lock
// (SELECT ... FOR UPDATE): a fence that is no longer token means a later
// holder claimed it, or the stock was reset, after this hold's claim:
// ErrLockLost, nothing written.
func (s *Seckill) checkFence(ctx context.Context, tx *gorm.DB, st Strategy, id, token int64) (int64, error) {
	var prod model.Product
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Select("id", "stock", "fence").Take(&prod, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, notFound(id)
	}
	if err != nil {
		return 0, fmt.Errorf("read the stock of product %d: %w", id, err)
	}
	if prod.Fence != token {
		return 0, s.lockLost(st, id, token)
	}
	return prod.Stock, nil
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

// wrote records the stock a committed write left, in generation gen: the
// memory's when the write began (stockMemory.generation).
func (s *Seckill) wrote(product, left, gen int64) {
	if h := s.cfg.hooks.committed; h != nil {
		h(product)
	}
	s.sawStock(product, left, gen)
}

// decideAndWrite is writeBatch's transaction once the stock is known. It
// returns the stock it leaves.
func (s *Seckill) decideAndWrite(tx *gorm.DB, st Strategy, ts []*ticket, stock int64, exact bool) (int64, error) {
	id := ts[0].p.ProductID
	used, err := usedRequestIDs(tx, ts)
	if err != nil {
		return 0, err
	}
	units, err := s.unitsHeld(tx, ts)
	if err != nil {
		return 0, err
	}
	// Decide, one by one in line order.
	accepted := map[string]*ticket{} // by request ID
	var (
		orders []model.Order
		sold   []*ticket // orders[i] is sold[i]'s
	)
	left, total := stock, int64(0)
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
		if p.Quantity > left {
			t.err = soldOut(id, left)
			continue
		}
		if limit := s.cfg.PerUserLimit; limit > 0 && units[p.UserID]+p.Quantity > limit {
			t.err = errorf(CodeLimitExceeded, "user %s has %d of product %d, the limit is %d", p.UserID, units[p.UserID], id, limit)
			continue
		}
		left -= p.Quantity
		total += p.Quantity
		units[p.UserID] += p.Quantity
		orders = append(orders, newOrder(p, st.Name, left))
		sold = append(sold, t)
		if p.RequestID != "" {
			accepted[p.RequestID] = t
		}
	}
	if len(orders) == 0 {
		return stock, nil
	}
	// Write.
	q := tx.Model(&model.Product{}).Where("id = ?", id)
	if exact {
		q = q.Where("stock >= ?", total)
	}
	res := q.Update("stock", gorm.Expr("stock - ?", total))
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
	if err := s.setUnits(tx, id, sold, units); err != nil {
		return 0, err
	}
	if err := tx.Create(&orders).Error; err != nil {
		return 0, fmt.Errorf("write %d orders: %w", len(orders), err)
	}
	// The orders are final now, their IDs included.
	for i, t := range sold {
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
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).
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

// sellOptimistic does the held work, then, without reading the stock
// first, lets one conditional UPDATE decide: stock = stock - q WHERE
// stock >= q. The
// per-user limit is raised after that UPDATE, under the row lock it took,
// by one conditional upsert of the user's units.
func (s *Seckill) sellOptimistic(ctx context.Context, p Purchase) (Receipt, error) {
	if err := doWork(ctx, p.Hold+p.Pause); err != nil {
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
	if err := doWork(ctx, p.Hold+p.Pause); err != nil {
		return Receipt{}, err
	}
	var o model.Order
	tctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	err = s.transaction(tctx, func(tx *gorm.DB) error {
		res := tx.Model(&model.Product{}).Where("id = ?", p.ProductID).Update("stock", gorm.Expr("stock - ?", p.Quantity))
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

// raiseUnitsMySQL raises a user's units (product, user, units, limit) in
// one conditional upsert; it changes no row when the sum would pass the
// limit (the pool counts rows changed, not rows matched).
const raiseUnitsMySQL = "INSERT INTO user_units (product_id, user_id, units) VALUES (?, ?, ?) " +
	"ON DUPLICATE KEY UPDATE units = IF(units + VALUES(units) <= ?, units + VALUES(units), units)"

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
	q := "INSERT INTO user_units (product_id, user_id, units) VALUES (?, ?, ?) " +
		"ON CONFLICT (product_id, user_id) DO UPDATE SET units = units + excluded.units WHERE units + excluded.units <= ?"
	if s.mysql {
		q = raiseUnitsMySQL
	}
	res := tx.Exec(q, p.ProductID, p.UserID, p.Quantity, limit)
	if res.Error != nil {
		return fmt.Errorf("raise the units of user %s: %w", p.UserID, res.Error)
	}
	if res.RowsAffected == 0 {
		return exceeded
	}
	return nil
}
