package service

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/locker"
)

// The line: on each instance, the buyers of one product (under one strategy
// and fencing mode) wait in line in process, first come first served, and
// one goroutine at a time, the line's leader, contends for the lock on
// their behalf. Once it holds the lock it sells up to a batch of the
// purchases at the head of the line in one transaction, gives the lock
// back and starts again while anyone waits. A release on any instance
// wakes the leaders of every instance at once (locker.Releases); nobody
// polls in a retry storm. A batch never waits to fill: it takes who is
// there.

// ticket is one purchase waiting in line, then in a hold: what it asked
// for and when it joined the line (its lock wait runs from there); once
// done is closed, a is its answer, which the line alone writes.
type ticket struct {
	p       Purchase
	arrived time.Time
	// taken says it left the line for a hold or an answer (guarded by
	// lines.mu).
	taken bool
	done  chan struct{}
	a     answer
}

// lineKey names a line.
type lineKey struct {
	product  int64
	strategy string
	fenced   bool
}

// line is the purchases waiting in one line, oldest first.
type line struct {
	waiting []*ticket
	// outage says the line's last hold failed for a store that did not
	// answer; overdue is when the hold under way should have ended (zero:
	// none). A purchase whose wait runs out while either says so was kept
	// waiting by a store, not by another holder: it answers unavailable.
	outage  bool
	overdue time.Time
}

// lines are an instance's lines, and their leaders.
type lines struct {
	mu sync.Mutex
	m  map[lineKey]*line
	wg sync.WaitGroup
	// closed says Close has begun: no new line, no new leader.
	closed bool
}

// sellInLine puts p in its line and waits for its answer. A buyer who hangs
// up before its purchase is taken into a hold leaves the line; once taken,
// its answer is the hold's.
func (s *Seckill) sellInLine(ctx context.Context, st Strategy, p Purchase) (Receipt, error) {
	t := &ticket{p: p, done: make(chan struct{}), arrived: time.Now()}
	key := lineKey{product: p.ProductID, strategy: st.Name, fenced: s.fencing(st, p)}
	s.lines.mu.Lock()
	if s.lines.closed {
		s.lines.mu.Unlock()
		return Receipt{}, errorf(CodeUnavailable, "the instance is shutting down")
	}
	l, ok := s.lines.m[key]
	if !ok {
		l = &line{}
		s.lines.m[key] = l
		s.lines.wg.Add(1)
		go s.lead(key, l)
	}
	l.waiting = append(l.waiting, t)
	s.lines.mu.Unlock()

	wait := time.NewTimer(s.cfg.LockWait)
	defer wait.Stop()
	var why error
	select {
	case <-t.done:
		return s.answered(ctx, t)
	case <-ctx.Done():
		why = ctx.Err()
	case <-wait.C:
		why = ErrLockTimeout.because(nil)
	}
	s.lines.mu.Lock()
	stuck := l.outage || (!l.overdue.IsZero() && time.Now().After(l.overdue))
	if stuck && errors.Is(why, ErrLockTimeout) {
		why = ErrUnavailable.because(errors.New("the line waited on a store that does not answer"))
	}
	if !t.taken {
		l.remove(t)
		s.lines.mu.Unlock()
		if errors.Is(why, ErrLockTimeout) {
			s.metrics.lockWaited(st.Name, "timeout", time.Since(t.arrived))
			s.metrics.lockFailed(st.Name, "timeout")
		}
		return Receipt{}, why
	}
	s.lines.mu.Unlock()
	<-t.done // taken into a hold: its answer is the hold's
	return s.answered(ctx, t)
}

// answered is the answer of a ticket that is done: the hold's, or, for one
// found sold out, sold out unless its request ID made an order (looked up
// on the buyer's own time, not the leader's).
func (s *Seckill) answered(ctx context.Context, t *ticket) (Receipt, error) {
	if !t.a.soldOut {
		return t.a.r, t.a.err
	}
	return s.answerSoldOut(ctx, t.p, t.a.stock)
}

// remove takes t out of the line. The caller holds lines.mu.
func (l *line) remove(t *ticket) {
	for i, w := range l.waiting {
		if w == t {
			l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
			return
		}
	}
}

// leaderBudget bounds a purchase, and one hold (PurchaseBudget).
func (s *Seckill) leaderBudget() time.Duration {
	return PurchaseBudget(s.cfg.LockWait, s.cfg.DBTimeout)
}

// PurchaseBudget is the longest a purchase can take, with a lock wait of
// lockWait and calls to the stores bounded by dbTimeout (0: the default):
// the wait, the longest work and pause, and the hold's calls (a read, the
// claim, the transaction; when another lock kind's holder moved the fence
// on, the check of the lease and the transaction again; and the look-up
// that settles a COMMIT whose outcome is unknown). Servers size their
// write timeout and their drain on it.
func PurchaseBudget(lockWait, dbTimeout time.Duration) time.Duration {
	if dbTimeout <= 0 {
		dbTimeout = config.DefaultDBTimeout
	}
	return lockWait + 2*MaxHold + 6*dbTimeout
}

// lead serves line l until nobody waits in it.
func (s *Seckill) lead(key lineKey, l *line) {
	defer s.lines.wg.Done()
	st, _ := LookupStrategy(key.strategy)
	ctx := context.Background()
	for {
		waiting := s.prune(ctx, key, l)
		if !waiting {
			return
		}
		var lease locker.Lease
		if st.Locked {
			var err error
			if lease, err = s.lockFor(ctx, st, key, l); err != nil {
				continue // answered or timed out: prune again
			}
		}
		batch := s.nextBatch(key, l, st, lease != nil)
		if len(batch) == 0 {
			if lease != nil {
				_ = s.unlock(ctx, st, key.product, lease, nil) // nothing sold: reported inside, nothing to join
			}
			continue
		}
		s.runHold(ctx, st, key, l, batch, lease)
	}
}

// prune answers the purchases of the line that can be answered without the
// lock: those of more than the stock the memory has seen (sold_out). It
// reads the product once when the memory has not seen it. It returns
// whether anyone still waits; when nobody does, the line is gone and its
// leader must stop. (A purchase whose wait runs out leaves the line by
// itself, with lock_timeout.)
func (s *Seckill) prune(ctx context.Context, key lineKey, l *line) bool {
	if !s.memory.knows(key.product) {
		rctx, cancel := s.dbCtx(ctx, 0)
		prod, err := s.product(rctx, s.db, key.product)
		cancel()
		if err == nil {
			s.sawStock(prod.ID, prod.Stock, prod.Generation)
		} else if errors.Is(err, ErrNotFound) {
			s.answerAll(l, err, nil)
		}
		// A store error is left to the hold to meet and answer.
	}
	var soldOut []*ticket
	var stocks []int64
	s.lines.mu.Lock()
	kept := l.waiting[:0]
	for _, t := range l.waiting {
		if stock, out := s.memory.soldOut(key.product, t.p.Quantity); out {
			t.taken = true
			soldOut, stocks = append(soldOut, t), append(stocks, stock)
			continue
		}
		kept = append(kept, t)
	}
	clear(l.waiting[len(kept):])
	l.waiting = kept
	empty := len(l.waiting) == 0
	if empty {
		delete(s.lines.m, key)
	}
	s.lines.mu.Unlock()

	for i, t := range soldOut {
		t.answer(answer{soldOut: true, stock: stocks[i]}) // its buyer answers
	}
	return !empty
}

// answerAll answers everyone waiting in l with err, calling each first
// (when not nil) for what else an answer of theirs records.
func (s *Seckill) answerAll(l *line, err error, each func(*ticket)) {
	s.lines.mu.Lock()
	all := l.waiting
	l.waiting = nil
	for _, t := range all {
		t.taken = true
	}
	s.lines.mu.Unlock()
	for _, t := range all {
		if each != nil {
			each(t)
		}
		t.answer(answer{err: err})
	}
}

// lockFor takes the line's lock, waiting no longer than the oldest
// purchase in line may still wait. When too few nodes answer, everyone in
// line is answered unavailable.
func (s *Seckill) lockFor(ctx context.Context, st Strategy, key lineKey, l *line) (locker.Lease, error) {
	s.lines.mu.Lock()
	if len(l.waiting) == 0 {
		s.lines.mu.Unlock()
		return nil, errors.New("nobody waits")
	}
	// A purchase whose wait has just run out leaves the line by itself; the
	// floor keeps this loop from spinning until it has.
	until := l.waiting[0].arrived.Add(s.cfg.LockWait)
	s.lines.mu.Unlock()
	if floor := time.Now().Add(10 * time.Millisecond); until.Before(floor) {
		until = floor
	}
	wctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	lease, err := s.lock(wctx, st, key.product)
	if err == nil {
		return lease, nil
	}
	if errors.Is(err, ErrUnavailable) {
		s.answerAll(l, err, func(t *ticket) {
			s.metrics.lockWaited(st.Name, "unavailable", time.Since(t.arrived))
			s.metrics.lockFailed(st.Name, "unavailable")
		})
	}
	return nil, err
}

// nextBatch takes the batch the next hold sells: up to the head's batch size of
// the purchases at the head of the line.
func (s *Seckill) nextBatch(key lineKey, l *line, st Strategy, locked bool) []*ticket {
	s.lines.mu.Lock()
	defer s.lines.mu.Unlock()
	if len(l.waiting) == 0 {
		return nil
	}
	n := s.cfg.Batch
	if b := l.waiting[0].p.Batch; b > 0 {
		n = b
	}
	n = min(n, len(l.waiting))
	batch := make([]*ticket, n)
	copy(batch, l.waiting)
	clear(l.waiting[:n])
	l.waiting = l.waiting[n:]
	for _, t := range batch {
		t.taken = true
		if locked {
			s.metrics.lockWaited(st.Name, "acquired", time.Since(t.arrived))
		}
	}
	return batch
}

// runHold sells batch under the lease (nil for pessimistic, whose lock is
// the row's), gives the lease back and answers every purchase.
func (s *Seckill) runHold(ctx context.Context, st Strategy, key lineKey, l *line, batch []*ticket, lease locker.Lease) {
	ctx, cancel := context.WithTimeout(ctx, s.leaderBudget())
	defer cancel()
	start := time.Now()
	var busy time.Duration
	for _, t := range batch {
		busy = max(busy, t.p.Work+t.p.Pause)
	}
	// Beyond its work and pause (and, for pessimistic, its wait for the
	// row), a hold takes milliseconds; one that takes longer than a
	// database call's bound is waiting on the database.
	due := busy + s.cfg.DBTimeout
	if !st.Locked {
		due += s.cfg.LockWait
	}
	s.lines.mu.Lock()
	l.overdue = start.Add(due)
	s.lines.mu.Unlock()
	h := hold{ps: make([]Purchase, len(batch)), arrived: make([]time.Time, len(batch)), lease: lease}
	for i, t := range batch {
		h.ps[i], h.arrived[i] = t.p, t.arrived
	}
	if lease != nil && st.Watchdog && s.cfg.Watchdog {
		h.wd = locker.StartWatchdog(ctx, lease, s.cfg.LockTTL/3)
	}
	as, err := s.sellBatch(ctx, st, h)
	h.wd.Stop()
	if err == nil {
		// What was sold is committed, and giving the lock back can no
		// longer change an answer (unlock reports its own failure): the
		// buyers are answered first, so that none waits for the release.
		for i, t := range batch {
			t.answer(as[i])
		}
	}
	if lease != nil {
		err = errors.Join(err, s.unlock(ctx, st, key.product, lease, err))
	}
	s.metrics.held(st.Name, len(batch), time.Since(start))
	s.lines.mu.Lock()
	l.outage = ErrorCode(storeErr("", err)) == CodeUnavailable
	l.overdue = time.Time{}
	s.lines.mu.Unlock()
	if err != nil {
		err = storeErr("sell a batch", err)
		for _, t := range batch {
			t.answer(answer{err: err})
		}
	}
}

// answer gives t its answer; its buyer is waiting for it (or has gone).
func (t *ticket) answer(a answer) {
	t.a = a
	close(t.done)
}
