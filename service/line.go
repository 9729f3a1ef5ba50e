package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/seckill/seckill/internal/combine"
	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

// The line: on each instance, the buyers of one product (under one strategy
// and fencing mode) wait in line in process, first come first served
// (package combine), and one goroutine at a time, the line's leader,
// contends for the lock on their behalf. Once it holds the lock it sells up
// to a batch of the purchases at the head of the line in one transaction,
// answers each, gives the lock back and starts again while anyone waits. A
// release on any instance wakes the leaders of every instance at once
// (locker.Releases); nobody polls in a retry storm. A batch never waits to
// fill: it takes who is there.

// lineKey names a line.
type lineKey struct {
	product  int64
	strategy string
	fenced   bool
}

// lines are an instance's lines: purchases in, one answer each out.
type lines = combine.Combiner[lineKey, Purchase, salestore.Answer]

// line is one line, as its leader sees it.
type line = combine.Queue[Purchase, salestore.Answer]

// newLines makes the instance's lines, each served by s.serveLine.
func (s *Seckill) newLines() *lines {
	return combine.New(s.serveLine)
}

// sellLined sells p in its line (sellInLine): decided in its hold, in line
// order, with the request IDs already used in view.
func (s *Seckill) sellLined(ctx context.Context, st Strategy, p Purchase) (Receipt, error) {
	r, err := s.sellInLine(ctx, st, p)
	if err != nil {
		return r, failure.Store(purchaseOp(p), err)
	}
	return r, nil
}

// sellInLine puts p in its line and waits for its answer. A buyer who hangs
// up, or whose lock wait runs out, before its purchase is taken into a hold
// leaves the line; once taken, its answer is the hold's.
func (s *Seckill) sellInLine(ctx context.Context, st Strategy, p Purchase) (Receipt, error) {
	key := lineKey{product: p.ProductID, strategy: st.Name, fenced: s.fencing(st, p)}
	a, err := s.lines.Do(ctx, key, p, s.cfg.LockWait)
	var gaveUp *combine.GaveUp
	switch {
	case errors.Is(err, combine.ErrClosed):
		return Receipt{}, failure.Errorf(failure.CodeUnavailable, "the instance is shutting down")
	case errors.As(err, &gaveUp) && errors.Is(err, combine.ErrWaitOver):
		if gaveUp.Stalled {
			// The line waited on a store, not on another holder.
			return Receipt{}, failure.ErrUnavailable.Because(errors.New("the line waited on a store that does not answer"))
		}
		s.metrics.LockWaited(st.Name, "timeout", gaveUp.Waited)
		s.metrics.LockFailed(st.Name, "timeout")
		return Receipt{}, failure.ErrLockTimeout.Because(nil)
	case errors.As(err, &gaveUp):
		return Receipt{}, gaveUp.Cause // the buyer hung up
	case err != nil:
		return Receipt{}, err
	}
	if !a.SoldOut {
		return a.R, a.Err
	}
	// Found sold out: sold out, unless its request ID made an order, looked
	// up on the buyer's own time, not the leader's.
	return s.answerSoldOut(ctx, p, a.Stock)
}

// serveLine is one round of a line's leader: it answers those the stock
// cache says are sold out, takes the lock, takes a batch and sells it.
func (s *Seckill) serveLine(key lineKey, l *line) {
	st, _ := LookupStrategy(key.strategy)
	ctx := context.Background()
	if !s.prune(ctx, key, l) {
		return
	}
	var lease locker.Lease
	if st.way.locked {
		var err error
		if lease, err = s.lockFor(ctx, st, key, l); err != nil {
			return // answered or timed out: the next round prunes again
		}
	}
	batch := l.Take(func(head Purchase) int {
		if head.Batch > 0 {
			return head.Batch
		}
		return s.cfg.Batch
	})
	if batch.Len() == 0 {
		if lease != nil {
			_ = s.unlock(ctx, st, key.product, lease, nil) // nothing sold: reported inside, nothing to join
		}
		return
	}
	s.runHold(ctx, st, key, l, batch, lease)
}

// prune answers the purchases of the line that can be answered without the
// lock: those of more than the stock the cache has seen (sold_out). It
// reads the product once when the cache has not seen it. It returns
// whether anyone still waits. (A purchase whose wait runs out leaves the
// line by itself, with lock_timeout.)
func (s *Seckill) prune(ctx context.Context, key lineKey, l *line) bool {
	if !s.cache.Knows(key.product) {
		// The read takes milliseconds: a buyer whose wait runs out during
		// it waited on the database, not on another holder (unavailable,
		// not lock_timeout).
		l.Stall(false, time.Now())
		rctx, cancel := s.dbCtx(ctx, 0)
		prod, err := s.product(rctx, s.db, key.product)
		cancel()
		l.Stall(failure.CodeOf(failure.Store("", err)) == failure.CodeUnavailable, time.Time{})
		if err == nil {
			s.cache.Saw(prod.ID, prod.Stock, stockcache.Of(prod))
		} else if errors.Is(err, failure.ErrNotFound) {
			return l.AnswerIf(func(Purchase, time.Time) (salestore.Answer, bool) { return salestore.Answer{Err: err}, true })
		}
		// A store error is left to the hold to meet and answer.
	}
	return l.AnswerIf(func(p Purchase, _ time.Time) (salestore.Answer, bool) {
		stock, out := s.cache.SoldOut(key.product, p.Quantity)
		return salestore.Answer{SoldOut: true, Stock: stock}, out // its buyer answers
	})
}

// lockFor takes the line's lock, waiting no longer than the oldest
// purchase in line may still wait. When too few nodes answer, everyone in
// line is answered unavailable.
func (s *Seckill) lockFor(ctx context.Context, st Strategy, key lineKey, l *line) (locker.Lease, error) {
	oldest, ok := l.Oldest()
	if !ok {
		return nil, errors.New("nobody waits")
	}
	// A purchase whose wait has just run out leaves the line by itself; the
	// floor keeps this loop from spinning until it has.
	until := oldest.Add(s.cfg.LockWait)
	if floor := time.Now().Add(10 * time.Millisecond); until.Before(floor) {
		until = floor
	}
	wctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	lease, err := s.lock(wctx, st, key.product)
	if err == nil {
		return lease, nil
	}
	if errors.Is(err, failure.ErrUnavailable) {
		l.AnswerIf(func(_ Purchase, queued time.Time) (salestore.Answer, bool) {
			s.metrics.LockWaited(st.Name, "unavailable", time.Since(queued))
			s.metrics.LockFailed(st.Name, "unavailable")
			return salestore.Answer{Err: err}, true
		})
	}
	return nil, err
}

// leaderBudget bounds a purchase, and one hold (PurchaseBudget).
func (s *Seckill) leaderBudget() time.Duration {
	return PurchaseBudget(s.cfg.LockWait, s.cfg.DBTimeout)
}

// PurchaseBudget is the longest a purchase can take, with a lock wait of
// lockWait and calls to the stores bounded by dbTimeout (0: the default):
// the wait, the longest work and pause, and the hold's calls (a read, the
// claim, the sale, which may try again a deadlock's victim; when another
// lock kind's holder moved the fence on, the check of the lease and the
// sale again; and the look-up that settles a COMMIT whose outcome is
// unknown). Servers size their write timeout and their
// drain on it; a hold's calls past it are cut short by its context.
func PurchaseBudget(lockWait, dbTimeout time.Duration) time.Duration {
	if dbTimeout <= 0 {
		dbTimeout = DefaultDBTimeout
	}
	return lockWait + 2*MaxHold + 7*dbTimeout
}

// runHold sells batch under the lease (nil for pessimistic, whose lock is
// the row's), answers every purchase and gives the lease back.
func (s *Seckill) runHold(ctx context.Context, st Strategy, key lineKey, l *line, batch *combine.Batch[Purchase, salestore.Answer], lease locker.Lease) {
	ctx, cancel := context.WithTimeout(ctx, s.leaderBudget())
	defer cancel()
	start := time.Now()
	h := hold{lease: lease}
	h.ps, h.arrived = batch.Requests()
	var busy time.Duration
	for i, p := range h.ps {
		busy = max(busy, p.Work+p.Pause)
		if lease != nil {
			s.metrics.LockWaited(st.Name, "acquired", start.Sub(h.arrived[i]))
		}
	}
	// Beyond its work and pause (and, for pessimistic, its wait for the
	// row), a hold takes milliseconds; one that takes longer than a
	// database call's bound is waiting on the database.
	due := busy + s.cfg.DBTimeout
	if !st.way.locked {
		due += s.cfg.LockWait
	}
	l.Stall(false, start.Add(due))
	if lease != nil && st.way.renewed && s.cfg.Watchdog {
		h.wd = locker.StartWatchdog(ctx, lease, s.cfg.LockTTL/3)
	}
	as, err := st.way.hold(s, ctx, st, h)
	h.wd.Stop()
	if err == nil {
		// What was sold is committed, and giving the lock back can no
		// longer change an answer (unlock reports its own failure): the
		// buyers are answered first, so that none waits for the release.
		batch.Answer(as)
	}
	if lease != nil {
		err = errors.Join(err, s.unlock(ctx, st, key.product, lease, err))
	}
	s.metrics.Held(st.Name, batch.Len(), time.Since(start))
	l.Stall(failure.CodeOf(failure.Store("", err)) == failure.CodeUnavailable, time.Time{})
	if err != nil {
		batch.AnswerAll(salestore.Answer{Err: failure.Store("sell a batch", err)})
	}
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
		return nil, failure.ErrUnavailable.Because(fmt.Errorf("strategy %s has no lock configured", st.Name))
	}
	lease, err := lk.Lock(ctx, s.lockKey(st.Name, productID))
	switch {
	case err == nil:
		return lease, nil
	case errors.Is(err, locker.ErrUnavailable):
		return nil, failure.Errorf(failure.CodeUnavailable, "too few Redis nodes answer for the strategy's lock").Because(err)
	}
	return nil, failure.ErrLockTimeout.Because(err)
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
		s.metrics.LockFailed(st.Name, "expired")
		s.log.WarnContext(ctx, "lease expired before unlock", "strategy", st.Name, "product", productID, "err", err)
		return nil
	case sold != nil:
		return err
	}
	s.metrics.LockFailed(st.Name, "unlock_error")
	s.log.ErrorContext(ctx, "unlock failed", "strategy", st.Name, "product", productID, "err", err)
	return nil
}

// expired says which of the purchases that joined the line at arrived
// have waited longer than their lock wait by now.
func (s *Seckill) expired(st Strategy, arrived []time.Time, now time.Time) []bool {
	out := make([]bool, len(arrived))
	for i, a := range arrived {
		out[i] = now.After(a.Add(s.cfg.LockWait))
		if out[i] {
			s.metrics.LockFailed(st.Name, "timeout")
		}
	}
	return out
}
