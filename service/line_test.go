package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// oneByOne is the reference: what purchases answer when sold one at a
// time, in order, from stock units with a per-user limit.
type oneByOne struct {
	stock, limit int64
	units        map[string]int64
	orders       map[string]service.Purchase // by request ID
	left         map[string]int64            // the stock each request's order left
}

// outcome is one purchase's answer, as the reference or the service gave
// it: "ok left N", "replayed left N", or an error code.
func (m *oneByOne) apply(p service.Purchase) string {
	if p.RequestID != "" {
		if first, ok := m.orders[p.RequestID]; ok {
			if first.UserID != p.UserID || first.Quantity != p.Quantity || first.ProductID != p.ProductID {
				return string(failure.CodeRequestIDReused)
			}
			return fmt.Sprintf("replayed left %d", m.left[p.RequestID])
		}
	}
	if p.Quantity > m.stock {
		return string(failure.CodeSoldOut)
	}
	if m.units[p.UserID]+p.Quantity > m.limit {
		return string(failure.CodeLimitExceeded)
	}
	m.stock -= p.Quantity
	m.units[p.UserID] += p.Quantity
	if p.RequestID != "" {
		m.orders[p.RequestID] = p
		m.left[p.RequestID] = m.stock
	}
	return fmt.Sprintf("ok left %d", m.stock)
}

func outcomeOf(r service.Receipt, err error) string {
	switch {
	case err != nil:
		return string(failure.CodeOf(err))
	case r.Replayed:
		return fmt.Sprintf("replayed left %d", r.Order.RemainingStock)
	}
	return fmt.Sprintf("ok left %d", r.Order.RemainingStock)
}

// expected runs the reference over the purchases in order.
func expected(stock, limit int64, ps []service.Purchase) []string {
	m := &oneByOne{stock: stock, limit: limit, units: map[string]int64{}, orders: map[string]service.Purchase{}, left: map[string]int64{}}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = m.apply(p)
	}
	return out
}

// batchPurchases are a sale that meets every answer: sales, a user at the
// limit, a quantity over it, request IDs replayed and reused, and the stock
// running out midway, with a purchase of less than what is left after one
// that asked too much.
func batchPurchases(product int64) []service.Purchase {
	p := func(user string, q int64, rid string) service.Purchase {
		return service.Purchase{ProductID: product, UserID: user, Quantity: q, RequestID: rid}
	}
	return []service.Purchase{
		p("u1", 1, "r-a"), p("u1", 1, ""), p("u1", 1, ""), p("u2", 3, "r-b"), p("u2", 2, "r-b"),
		p("u3", 1, "r-a"), p("u1", 1, "r-a"), p("u4", 2, "r-c"), p("u5", 2, "r-d"), p("u5", 1, "r-d"),
		p("u6", 1, "r-e"), p("u4", 2, "r-c"), p("u7", 1, ""),
	}
}

// blockLine holds the product's lock (or, for pessimistic, its row) until
// release is called, so that purchases gather in line.
func blockLine(t *testing.T, in *instance, strategy string, product int64) (release func()) {
	t.Helper()
	if strategy == "pessimistic" {
		tx := in.db.Begin()
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&model.Product{}, product).Error; err != nil {
			t.Fatalf("lock the row of product %d: %v", product, err)
		}
		return func() { tx.Rollback() }
	}
	lease, err := in.lockers[strategy].Lock(t.Context(), in.lockKey(strategy, product))
	if err != nil {
		t.Fatalf("Lock(%s) = %v; want nil", in.lockKey(strategy, product), err)
	}
	return func() {
		if err := lease.Unlock(context.Background()); err != nil {
			t.Errorf("Unlock(%s) = %v; want nil", in.lockKey(strategy, product), err)
		}
	}
}

// enqueue starts each purchase through its instance (all on db) in turn,
// each once the one before is in line, and returns a function that waits
// for every answer, in the purchases' order. It checks the orders the
// answers carry: a new order has an ID of its own, a replay the ID of an
// order made before.
func enqueue(t *testing.T, db *gorm.DB, attempts []attempt, strategy string) func() []string {
	t.Helper()
	wait := enqueueReceipts(t, db, attempts, strategy, map[int64]bool{})
	return func() []string {
		out, _ := wait()
		return out
	}
}

// enqueueReceipts is enqueue, whose wait returns the receipts too; made
// holds the IDs of the orders made before, which a replay may carry, and
// gains those of the new orders.
func enqueueReceipts(t *testing.T, db *gorm.DB, attempts []attempt, strategy string, made map[int64]bool) func() ([]string, []service.Receipt) {
	t.Helper()
	out := make([]string, len(attempts))
	receipts := make([]service.Receipt, len(attempts))
	var wg sync.WaitGroup
	inLine := map[*service.Seckill]int{}
	for i, a := range attempts {
		wg.Go(func() {
			r, err := a.svc.Purchase(t.Context(), a.p)
			out[i], receipts[i] = outcomeOf(r, err), r
		})
		inLine[a.svc]++
		want := inLine[a.svc]
		if strategy == "pessimistic" {
			// The first of each instance is taken into a hold at once and
			// waits there for the row: the database shows its locking read
			// running. Until then it may still be in line, where the next
			// purchase would count it as itself.
			if want--; want == 0 {
				testenv.Eventually(t, 10*time.Second, fmt.Sprintf("purchase %d (%s) waiting for the row in its hold", i, show(a.p)),
					func() bool { return lockingReads(t, db) == 1 })
				continue
			}
		}
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("purchase %d (%s) to join the line", i, show(a.p)),
			func() bool { return a.svc.Waiting(a.p.ProductID) >= want })
	}
	return func() ([]string, []service.Receipt) {
		wg.Wait()
		for i, r := range receipts {
			if strings.HasPrefix(out[i], "ok ") {
				if r.Order.ID == 0 || made[r.Order.ID] {
					t.Errorf("purchase %d (%s) made order %d; want a new ID of its own", i, show(attempts[i].p), r.Order.ID)
				}
				made[r.Order.ID] = true
			}
		}
		for i, r := range receipts {
			if strings.HasPrefix(out[i], "replayed ") && !made[r.Order.ID] {
				t.Errorf("purchase %d (%s) replayed order %d; want one of the orders made", i, show(attempts[i].p), r.Order.ID)
			}
		}
		return out, receipts
	}
}

// TestBatchSellsAsOneByOne: purchases that gather in line while the lock is
// held are sold in one hold, and each gets exactly the answer it would have
// got sold one by one in line order: stock, limit, replays, reuses, and
// the stock running out midway. On two instances, each instance's line is
// sold in its order, one after the other.
func TestBatchSellsAsOneByOne(t *testing.T) {
	const stock, limit = 7, 2
	for _, strategy := range []string{"redlock", "token", "local", "pessimistic"} {
		t.Run(strategy+"/one instance", func(t *testing.T) {
			t.Parallel()
			in := newFixture(t, nil).instance(settings{Strategy: strategy, PerUserLimit: limit, Fencing: true})
			prod := in.product(t, stock)
			ps := batchPurchases(prod.ID)
			attempts := make([]attempt, len(ps))
			for i, p := range ps {
				attempts[i] = attempt{svc: in.svc, p: p}
			}
			release := blockLine(t, in, strategy, prod.ID)
			wait := enqueue(t, in.db, attempts, strategy)
			release()
			got, want := wait(), expected(stock, limit, ps)
			for i := range ps {
				if got[i] != want[i] {
					t.Errorf("purchase %d, Purchase(%s) = %s; one by one: %s", i, show(ps[i]), got[i], want[i])
				}
			}
			wantSoldOut(t, in, prod.ID, stock, got)
			if strategy != "pessimistic" {
				// A hold answers its buyers before it gives the lock back
				// and counts itself: wait for the count.
				testenv.Eventually(t, 10*time.Second, "the hold to be counted", func() bool {
					return in.metrics(t).Sum("seckill_batch_size", "strategy", strategy) >= 1
				})
				if holds := in.metrics(t).Sum("seckill_batch_size", "strategy", strategy); holds != 1 {
					t.Errorf("seckill_batch_size{strategy=%q} counted %v holds; want the line sold in 1", strategy, holds)
				}
			}
		})
	}
	for _, strategy := range []string{"redlock", "token"} {
		t.Run(strategy+"/two instances", func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			a := f.instance(settings{Strategy: strategy, PerUserLimit: limit, Fencing: true})
			b := f.instance(settings{Strategy: strategy, PerUserLimit: limit, Fencing: true})
			prod := a.product(t, stock)
			ps := batchPurchases(prod.ID)
			var onA, onB []service.Purchase
			attempts := make([]attempt, len(ps))
			for i, p := range ps {
				in := a
				if i%2 == 1 {
					in = b
					onB = append(onB, p)
				} else {
					onA = append(onA, p)
				}
				attempts[i] = attempt{svc: in.svc, p: p}
			}
			release := blockLine(t, a, strategy, prod.ID)
			wait := enqueue(t, a.db, attempts, strategy)
			release()
			got := wait()
			gotA, gotB := make([]string, 0, len(onA)), make([]string, 0, len(onB))
			for i := range got {
				if i%2 == 1 {
					gotB = append(gotB, got[i])
				} else {
					gotA = append(gotA, got[i])
				}
			}
			aFirst := expected(stock, limit, append(append([]service.Purchase{}, onA...), onB...))
			bFirst := expected(stock, limit, append(append([]service.Purchase{}, onB...), onA...))
			matches := func(want []string, first, second []string) bool {
				return fmt.Sprint(want) == fmt.Sprint(append(append([]string{}, first...), second...))
			}
			if !matches(aFirst, gotA, gotB) && !matches(bFirst, gotB, gotA) {
				t.Errorf("answers on A %q, on B %q; want A's line then B's (%q) or B's then A's (%q), one by one", gotA, gotB, aFirst, bFirst)
			}
			wantSoldOut(t, a, prod.ID, stock, got)
		})
	}
}

// lockingReads returns how many connections on db are in a locking read
// (testenv.LockingReads).
func lockingReads(t *testing.T, db *gorm.DB) int {
	t.Helper()
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatalf("the database/sql pool of the fixture: %v", err)
	}
	return testenv.LockingReads(t, sqlDB)
}

// wantSoldOut fails t unless the product's audit says it sold all its
// stock, consistently, in as many orders as answers were new orders.
func wantSoldOut(t *testing.T, in *instance, id, stock int64, answers []string) {
	t.Helper()
	orders := int64(0)
	for _, a := range answers {
		if strings.HasPrefix(a, "ok ") {
			orders++
		}
	}
	in.wantAudit(t, service.Audit{ProductID: id, InitialStock: stock, Stock: 0, Orders: orders, UnitsSold: stock, Consistent: true})
}

// TestReleaseWakesOtherInstance: a buyer waiting on one instance for a lock
// held on another is woken by the release, not by its fallback: with a
// fallback of 10 s (it would sleep 5 to 10 s), it buys within a second or
// two of the release.
func TestReleaseWakesOtherInstance(t *testing.T) {
	eachStrategy(t, []string{"setnx", "token", "redlock"}, func(t *testing.T, strategy string) {
		f := newFixture(t, nil)
		s := settings{Strategy: strategy, Fencing: true, Wait: 30 * time.Second, Fallback: 10 * time.Second}
		a, b := f.instance(s), f.instance(s)
		prod := a.product(t, 2)
		doneA := make(chan time.Time, 1)
		go func() {
			if _, err := a.svc.Purchase(t.Context(), service.Purchase{ProductID: prod.ID, UserID: "a", Quantity: 1, Work: 300 * time.Millisecond}); err != nil {
				t.Errorf("A's Purchase = %v; want nil", err)
			}
			doneA <- time.Now()
		}()
		// Once granted, A holds the lock for its 300 ms of work. The
		// grant is counted, and a count stays: no poll can miss it, as
		// one can miss A's lock key, which lives only as long as A's hold.
		testenv.Eventually(t, 10*time.Second, "A to be granted the "+strategy+" lock", func() bool {
			return a.lockWaits(t, strategy, "acquired") == 1
		})
		if _, err := b.svc.Purchase(t.Context(), service.Purchase{ProductID: prod.ID, UserID: "b", Quantity: 1}); err != nil {
			t.Fatalf("B's Purchase = %v; want nil", err)
		}
		doneB := time.Now()
		if wake := doneB.Sub(<-doneA); wake > 2*time.Second {
			t.Errorf("B bought %v after A released; want well within its fallback (5 to 10 s): woken by the release", wake)
		}
		a.wantAudit(t, consistentAudit(prod.ID, 2, 2))
	})
}

// TestResetReopensEveryInstance: once an instance has seen a product sold
// out it answers from memory; a stock reset on another instance reopens the
// sale on it within 1 s.
func TestResetReopensEveryInstance(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a, b := f.instance(settings{Strategy: "redlock", Fencing: true}), f.instance(settings{Strategy: "redlock", Fencing: true})
	prod := a.product(t, 1)
	if _, err := a.svc.Purchase(t.Context(), service.Purchase{ProductID: prod.ID, UserID: "first", Quantity: 1}); err != nil {
		t.Fatalf("Purchase on A = %v; want nil", err)
	}
	if _, err := b.svc.Purchase(t.Context(), service.Purchase{ProductID: prod.ID, UserID: "late", Quantity: 1}); !errors.Is(err, failure.ErrSoldOut) {
		t.Fatalf("Purchase on B = %v; want %v", err, failure.ErrSoldOut)
	}
	reset := time.Now()
	if _, err := a.svc.SetStock(t.Context(), prod.ID, 3); err != nil {
		t.Fatalf("SetStock on A = %v; want nil", err)
	}
	tries := 0
	sold := testenv.Until(time.Second-time.Since(reset), func() bool {
		tries++
		_, err := b.svc.Purchase(t.Context(), service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("again-%d", tries), Quantity: 1})
		if err != nil && !errors.Is(err, failure.ErrSoldOut) {
			t.Fatalf("Purchase on B after the reset = %v; want nil or %v", err, failure.ErrSoldOut)
		}
		return err == nil
	})
	if !sold {
		t.Fatalf("B still answers %v %v after a reset on A (%d tries); want it to sell again within 1 s", failure.ErrSoldOut, time.Since(reset), tries)
	}
	a.wantAudit(t, consistentAudit(prod.ID, 3, 1))
}

// countingLocker counts Lock calls.
type countingLocker struct {
	locker.Locker
	calls *atomic.Int64
}

func (l countingLocker) Lock(ctx context.Context, key string) (locker.Lease, error) {
	l.calls.Add(1)
	return l.Locker.Lock(ctx, key)
}

// TestSoldOutCostsNothing: once an instance has seen a product sold out,
// 200 more purchases, half with request IDs, answer sold_out without
// taking a lock, and with one database query in all (the request IDs of the
// product's orders, read once so that a replay still answers with its
// order, which the last purchase checks).
func TestSoldOutCostsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	in := f.instance(settings{Strategy: "redlock", Fencing: true})
	prod := in.product(t, 2)
	// Two units sold, then the third buyer finds it sold out: now the
	// instance has seen it.
	for i, u := range []string{"a", "b", "c"} {
		_, err := in.svc.Purchase(t.Context(), service.Purchase{ProductID: prod.ID, UserID: u, Quantity: 1, RequestID: "r-" + u})
		switch {
		case i < 2 && err != nil:
			t.Fatalf("purchase %d by %s = %v; want nil", i+1, u, err)
		case i == 2 && failure.CodeOf(err) != failure.CodeSoldOut:
			t.Fatalf("purchase %d by %s = %v; want sold_out", i+1, u, err)
		}
	}
	var locks, queries atomic.Int64
	in.lockers["redlock"] = countingLocker{Locker: in.lockers["redlock"], calls: &locks}
	count := func(*gorm.DB) { queries.Add(1) }
	cb := f.db.Callback()
	for _, err := range []error{
		cb.Query().Before("gorm:query").Register("test:count", count),
		cb.Raw().Before("gorm:raw").Register("test:count", count),
		cb.Row().Before("gorm:row").Register("test:count", count),
		cb.Create().Before("gorm:create").Register("test:count", count),
		cb.Update().Before("gorm:update").Register("test:count", count),
	} {
		if err != nil {
			t.Fatalf("register a query counter: %v", err)
		}
	}
	for i := range 200 {
		p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("late-%d", i), Quantity: 1}
		if i%2 == 0 {
			p.RequestID = fmt.Sprintf("late-%d", i)
		}
		if _, err := in.svc.Purchase(t.Context(), p); !errors.Is(err, failure.ErrSoldOut) {
			t.Fatalf("Purchase(%s) = %v; want %v", show(p), err, failure.ErrSoldOut)
		}
	}
	if n := locks.Load(); n != 0 {
		t.Errorf("200 sold-out purchases took the lock %d times; want 0", n)
	}
	if n := queries.Load(); n > 1 {
		t.Errorf("200 sold-out purchases made %d database queries; want at most 1", n)
	}
	replay := service.Purchase{ProductID: prod.ID, UserID: "a", Quantity: 1, RequestID: "r-a"}
	if r, err := in.svc.Purchase(t.Context(), replay); err != nil || !r.Replayed {
		t.Errorf("Purchase(%s) of a sold-out product = %+v, %v; want its order, replayed", show(replay), r, err)
	}
}

// TestPessimisticBatchKeepsEachDeadline: under batching, pessimistic's wait
// for the product's row lock is each purchase's own. Buyers A and B queue
// (1.2 s apart) behind a purchase that waits on a row lock held outside;
// when it gives up, A and B are sold in one hold, whose row lock comes
// after A's wait ran out but well within B's: A answers lock_timeout, B
// gets its order.
func TestPessimisticBatchKeepsEachDeadline(t *testing.T) {
	const wait = 2 * time.Second
	f := newFixture(t, nil)
	in := f.instance(settings{Strategy: "pessimistic", Wait: wait})
	prod := in.product(t, 10)
	tx := f.db.Begin()
	if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&model.Product{}, prod.ID).Error; err != nil {
		t.Fatalf("lock the row: %v", err)
	}
	defer tx.Rollback()

	buy := func(user string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := in.svc.Purchase(context.Background(), service.Purchase{ProductID: prod.ID, UserID: user, Quantity: 1})
			done <- err
		}()
		return done
	}
	x := buy("x") // the hold that gives up
	testenv.Eventually(t, 10*time.Second, "x's hold waiting on the row", func() bool {
		select {
		case err := <-x:
			t.Fatalf("x's Purchase = %v before the test saw it wait on the row (for %v at most)", err, wait)
		default:
		}
		return lockingReads(t, f.db) == 1
	})
	// The sleeps below are the scenario, each from a point the test saw:
	// A comes 300 ms after x began to wait, so that A is still in line
	// when x gives up; B 1.2 s after A.
	time.Sleep(300 * time.Millisecond)
	aSent := time.Now()
	a := buy("a")
	time.Sleep(1200 * time.Millisecond)
	b := buy("b")
	testenv.Eventually(t, 10*time.Second, "a and b in line", func() bool { return in.svc.Waiting(prod.ID) == 2 || len(x) == 1 })
	// Past A's wait (it began no earlier than aSent), 0.9 s before B's ends.
	time.Sleep(time.Until(aSent.Add(wait + 300*time.Millisecond)))
	if err := tx.Rollback().Error; err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]chan error{"x": x, "a": a} {
		if err := <-c; !errors.Is(err, failure.ErrLockTimeout) {
			t.Errorf("%s's Purchase = %v; want %v", name, err, failure.ErrLockTimeout)
		}
	}
	if err := <-b; err != nil {
		t.Errorf("b's Purchase = %v; want an order: its own wait had time left", err)
	}
	in.wantAudit(t, consistentAudit(prod.ID, 10, 1))
}
