package service_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// TestMixedStrategiesSellExactlyStock is a rolling change of SECKILL_LOCK
// seen from the database: buyers of one product under every safe strategy,
// spread over two instances, the lock holders working 30 ms between their
// read and their write while optimistic and pessimistic buyers sell around
// them. Exactly the stock is sold, every unit once, and nobody is told
// lock_lost: no lease runs out here.
func TestMixedStrategiesSellExactlyStock(t *testing.T) {
	t.Parallel()
	const rounds, stock, buyersN = 4, 10, 80
	f := newFixture(t, nil)
	ins := []*instance{
		f.instance(settings{Strategy: "redlock", Fencing: true}),
		f.instance(settings{Strategy: "token", Fencing: true}),
	}
	prod := ins[0].product(t, stock)
	// A sale can only oversell at its end, when a holder read the last
	// units: a few sales in a row give the flaw its chances.
	for round := range rounds {
		if _, err := ins[0].svc.SetStock(t.Context(), prod.ID, stock); err != nil {
			t.Fatalf("SetStock(%d, %d) = %v; want nil", prod.ID, stock, err)
		}
		attempts := make([]attempt, buyersN)
		for i := range attempts {
			st := safeStrategies[i%len(safeStrategies)]
			p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-%d-%d", round, i), Quantity: 1, Strategy: st}
			if st == "token" || st == "redlock" {
				p.Work = 30 * time.Millisecond
			}
			attempts[i] = attempt{svc: ins[(i/len(safeStrategies))%2].svc, p: p}
		}
		sold, remaining := 0, map[int64]bool{}
		for _, res := range purchaseAll(t.Context(), attempts) {
			switch {
			case res.err == nil:
				sold++
				if remaining[res.r.Order.RemainingStock] {
					t.Errorf("round %d: Purchase(%s) left stock %d, as an earlier order did", round, show(res.p), res.r.Order.RemainingStock)
				}
				remaining[res.r.Order.RemainingStock] = true
			case !errors.Is(res.err, failure.ErrSoldOut):
				t.Errorf("round %d: Purchase(%s) = %v; want nil or %v", round, show(res.p), res.err, failure.ErrSoldOut)
			}
		}
		if sold != stock {
			t.Errorf("round %d: %d of %d purchases succeeded; want %d", round, sold, buyersN, stock)
		}
		ins[0].wantAudit(t, consistentAudit(prod.ID, stock, stock))
	}
}

// TestRollingChangeOfLockKind is a rolling change between token and
// redlock: two instances, the purchases alternating the two kinds, each
// holder working 30 ms inside its lock. A lock of one kind does not exclude
// a holder of the other, so their fence claims collide; a hold whose write
// lost only that race sells all the same (lock_lost is for a lease that ran
// out, and none does here). First 80 distinct buyers and stock to spare:
// every one is sold. Then 10 users trying 8 times each, both kinds, under a
// limit of one unit: each gets exactly one, every other answer is
// limit_exceeded.
func TestRollingChangeOfLockKind(t *testing.T) {
	t.Parallel()
	const stock = 1000
	kinds := []string{"redlock", "token"}
	f := newFixture(t, nil)
	ins := []*instance{
		f.instance(settings{Strategy: "redlock", Fencing: true, PerUserLimit: 1}),
		f.instance(settings{Strategy: "token", Fencing: true, PerUserLimit: 1}),
	}
	prod := ins[0].product(t, stock)
	for _, run := range []struct {
		name         string
		users, tries int
	}{{"80 buyers", 80, 1}, {"10 users, 8 tries each", 10, 8}} {
		if _, err := ins[0].svc.SetStock(t.Context(), prod.ID, stock); err != nil {
			t.Fatalf("SetStock(%d, %d) = %v; want nil", prod.ID, stock, err)
		}
		var attempts []attempt
		for i := range run.users * run.tries {
			p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-%d", i%run.users), Quantity: 1,
				Strategy: kinds[(i+i/run.users)%2], Work: 30 * time.Millisecond}
			attempts = append(attempts, attempt{svc: ins[(i/3)%2].svc, p: p})
		}
		bought := map[string]int{}
		for _, res := range purchaseAll(t.Context(), attempts) {
			switch {
			case res.err == nil:
				bought[res.p.UserID]++
			case !errors.Is(res.err, failure.ErrLimitExceeded):
				t.Errorf("%s: Purchase(%s) = %v; want nil or %v", run.name, show(res.p), res.err, failure.ErrLimitExceeded)
			}
		}
		for u := range run.users {
			if got := bought[fmt.Sprintf("u-%d", u)]; got != 1 {
				t.Errorf("%s: u-%d bought %d units; want 1", run.name, u, got)
			}
		}
		ins[0].wantAudit(t, consistentAudit(prod.ID, stock, int64(run.users)))
	}
}

// TestPerUserLimitRace: users try many purchases at once, spread over every
// safe strategy and two instances, with a limit of two units: every user
// ends with exactly two, whatever sold them. The lock holders work 20 ms
// between their read and their write, and the other buyers arrive spread
// over that time, so that a limit checked by a read outside the write would
// be passed. A few sales in a row give the race its chances.
func TestPerUserLimitRace(t *testing.T) {
	t.Parallel()
	const rounds, users, tries, limit = 3, 8, 6, 2
	f := newFixture(t, nil)
	ins := []*instance{
		f.instance(settings{Strategy: "redlock", Fencing: true, PerUserLimit: limit}),
		f.instance(settings{Strategy: "redlock", Fencing: true, PerUserLimit: limit}),
	}
	prod := ins[0].product(t, 1000)
	for round := range rounds {
		if _, err := ins[0].svc.SetStock(t.Context(), prod.ID, 1000); err != nil {
			t.Fatalf("SetStock(%d, 1000) = %v; want nil", prod.ID, err)
		}
		var attempts []attempt
		for u := range users {
			for i := range tries {
				p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("user-%d", u), Quantity: 1,
					Strategy: safeStrategies[(u+i)%len(safeStrategies)]}
				switch p.Strategy {
				case "token", "redlock":
					p.Work = 20 * time.Millisecond
				case "optimistic":
					p.Work = time.Duration(rand.N(100)) * time.Millisecond
				}
				attempts = append(attempts, attempt{svc: ins[i%2].svc, p: p})
			}
		}
		rand.Shuffle(len(attempts), func(i, j int) { attempts[i], attempts[j] = attempts[j], attempts[i] })
		bought := map[string]int64{}
		for _, res := range purchaseAll(t.Context(), attempts) {
			switch {
			case res.err == nil:
				bought[res.p.UserID] += res.p.Quantity
			case !errors.Is(res.err, failure.ErrLimitExceeded):
				t.Errorf("round %d: Purchase(%s) = %v; want nil or %v", round, show(res.p), res.err, failure.ErrLimitExceeded)
			}
		}
		for u := range users {
			if got := bought[fmt.Sprintf("user-%d", u)]; got != limit {
				t.Errorf("round %d: user-%d bought %d units; want exactly the limit, %d", round, u, got, limit)
			}
		}
		ins[0].wantAudit(t, consistentAudit(prod.ID, 1000, users*limit))
	}
}

// TestIDsCompareByteForByte: user and request IDs that a case-, accent- or
// pad-insensitive collation would take for one another are different IDs,
// under every strategy: each makes an order of its own (the limit is one
// unit per user, so a user taken for another would be refused).
func TestIDsCompareByteForByte(t *testing.T) {
	eachStrategy(t, strategies, func(t *testing.T, strategy string) {
		ctx := t.Context()
		in := newFixture(t, nil).instance(settings{Strategy: strategy, PerUserLimit: 1, Fencing: true})
		prod := in.product(t, 100)
		twoUnits := newFixture(t, nil).instance(settings{Strategy: strategy, PerUserLimit: 2, Fencing: true})
		other := twoUnits.product(t, 100)
		for _, pair := range []struct {
			in         *instance
			product    int64
			first, too service.Purchase
		}{
			{in, prod.ID, service.Purchase{UserID: "carol"}, service.Purchase{UserID: "Carol"}},
			{in, prod.ID, service.Purchase{UserID: "😀"}, service.Purchase{UserID: "🎉"}},
			{in, prod.ID, service.Purchase{UserID: "élan"}, service.Purchase{UserID: "elan"}},
			{in, prod.ID, service.Purchase{UserID: "pad"}, service.Purchase{UserID: "pad "}},
			{in, prod.ID, service.Purchase{UserID: "r-1", RequestID: "Req-aB"}, service.Purchase{UserID: "r-2", RequestID: "req-Ab"}},
			{in, prod.ID, service.Purchase{UserID: "r-3", RequestID: "y1"}, service.Purchase{UserID: "r-4", RequestID: "y1 "}},
			{in, prod.ID, service.Purchase{UserID: "r-5", RequestID: "😀"}, service.Purchase{UserID: "r-6", RequestID: "🎉"}},
			// One user, two request IDs that differ in case only: two orders.
			{twoUnits, other.ID, service.Purchase{UserID: "u-1", RequestID: "ord-1"}, service.Purchase{UserID: "u-1", RequestID: "Ord-1"}},
		} {
			first, too := pair.first, pair.too
			first.ProductID, first.Quantity = pair.product, 1
			too.ProductID, too.Quantity = pair.product, 1
			a, err := pair.in.svc.Purchase(ctx, first)
			if err != nil || a.Replayed {
				t.Fatalf("Purchase(%s) = %+v, %v; want a new order", show(first), a, err)
			}
			b, err := pair.in.svc.Purchase(ctx, too)
			if err != nil || b.Replayed || b.Order.ID == a.Order.ID {
				t.Errorf("Purchase(%s) after Purchase(%s) = %+v, %v; want a new order of its own", show(too), show(first), b, err)
			}
			if err == nil && string(b.Order.UserID) != too.UserID {
				t.Errorf("Purchase(%s) made an order for user %q", show(too), b.Order.UserID)
			}
		}
		// The same bytes still replay and still count against the limit.
		again := service.Purchase{ProductID: prod.ID, UserID: "r-2", Quantity: 1, RequestID: "req-Ab"}
		if r, err := in.svc.Purchase(ctx, again); err != nil || !r.Replayed {
			t.Errorf("Purchase(%s) again = %+v, %v; want the replayed order", show(again), r, err)
		}
		carol := service.Purchase{ProductID: prod.ID, UserID: "Carol", Quantity: 1}
		if _, err := in.svc.Purchase(ctx, carol); !errors.Is(err, failure.ErrLimitExceeded) {
			t.Errorf("Purchase(%s) again = %v; want %v", show(carol), err, failure.ErrLimitExceeded)
		}
		in.wantAudit(t, consistentAudit(prod.ID, 100, 14))
		twoUnits.wantAudit(t, consistentAudit(other.ID, 100, 2))
	})
}

// TestHungUpBuyersLeaveNoLock: 300 buyers, 30 at a time, hang up 1 to 30 ms
// into their purchase (while waiting for the lock, while its SET is in
// flight, while holding it). With a lease of a minute, a lock left behind
// would block the product: afterwards no node holds its key and the next
// purchase gets the lock at once.
func TestHungUpBuyersLeaveNoLock(t *testing.T) {
	eachStrategy(t, []string{"setnx", "token", "redlock"}, func(t *testing.T, strategy string) {
		f := newFixture(t, nil)
		in := f.instance(settings{Strategy: strategy, Fencing: true, TTL: time.Minute})
		prod := in.product(t, 1000)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 30)
		for i := range 300 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rand.N(30))*time.Millisecond)
				defer cancel()
				p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-%d", i), Quantity: 1, Work: time.Duration(rand.N(5)) * time.Millisecond}
				_, _ = in.svc.Purchase(ctx, p) // most give up; what they got is not the point
			})
		}
		wg.Wait()
		// A hold answers its buyers before it gives the lock back: the
		// last one may still be releasing. A key left behind would stay
		// for the lease's minute.
		for i, c := range f.clients {
			testenv.Eventually(t, 10*time.Second, fmt.Sprintf("node %d to forget the lock key after the buyers hung up", i), func() bool {
				n, err := c.Exists(context.Background(), in.lockKey(strategy, prod.ID)).Result()
				return err == nil && n == 0
			})
		}
		quick := f.instance(settings{Strategy: strategy, Fencing: true, TTL: time.Minute, Wait: time.Second})
		p := service.Purchase{ProductID: prod.ID, UserID: "next", Quantity: 1}
		if _, err := quick.svc.Purchase(t.Context(), p); err != nil {
			t.Errorf("Purchase(%s) after the hung-up buyers = %v; want nil at once (a 1 s wait, a 1 min lease)", show(p), err)
		}
		a := in.audit(t, prod.ID)
		if !a.Consistent {
			t.Errorf("Audit(%d) = %+v; want consistent", prod.ID, a)
		}
	})
}

// TestResetFencesOffHolder: a holder that read the product before a stock
// reset writes nothing after it: it answers failure.ErrLockLost and the new sale
// starts whole.
func TestResetFencesOffHolder(t *testing.T) {
	eachStrategy(t, []string{"token", "redlock"}, func(t *testing.T, strategy string) {
		f := newFixture(t, nil)
		in := f.instance(settings{Strategy: strategy, Fencing: true})
		prod := in.product(t, 5)
		p := service.Purchase{ProductID: prod.ID, UserID: "before", Quantity: 1, Work: time.Second}
		done := make(chan error, 1)
		go func() {
			_, err := in.svc.Purchase(t.Context(), p)
			done <- err
		}()
		// The holder has claimed its fencing token (it does so once it
		// holds the lock, before it reads the product and works 1 s).
		testenv.Eventually(t, 10*time.Second, "the holder to claim the fence of product "+fmt.Sprint(prod.ID), func() bool {
			return fenceOf(t, f, prod.ID) > prod.Fence
		})
		if _, err := in.svc.SetStock(t.Context(), prod.ID, 10); err != nil {
			t.Fatalf("SetStock(%d, 10) = %v; want nil", prod.ID, err)
		}
		if err := <-done; !errors.Is(err, failure.ErrLockLost) {
			t.Errorf("Purchase(%s) across a reset = %v; want %v", show(p), err, failure.ErrLockLost)
		}
		in.wantAudit(t, consistentAudit(prod.ID, 10, 0))
	})
}

// fenceOf reads the product's fencing token from the database.
func fenceOf(t *testing.T, f *fixture, id int64) int64 {
	t.Helper()
	var p model.Product
	if err := f.db.Select("fence").Take(&p, id).Error; err != nil {
		t.Fatalf("read the fence of product %d: %v", id, err)
	}
	return p.Fence
}

// TestResetsUnderLoad: stock resets every 10 ms while 16 buyers of every safe
// strategy buy from two instances: a reset takes the product's row first,
// as every purchase does, so nobody deadlocks: no purchase and no reset
// answers unavailable, and the audit adds up after each round.
func TestResetsUnderLoad(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ins := []*instance{f.instance(settings{Strategy: "redlock", Fencing: true}), f.instance(settings{Strategy: "redlock", Fencing: true})}
	prod := ins[0].product(t, 50)
	ctx := t.Context()
	var (
		stop atomic.Bool
		n    atomic.Int64
		wg   sync.WaitGroup
	)
	for w := range 16 {
		wg.Go(func() {
			for !stop.Load() {
				i := n.Add(1)
				// Half of them optimistic: its transactions are the most,
				// and the shortest.
				st := "optimistic"
				if w%2 == 1 {
					st = safeStrategies[(w/2)%len(safeStrategies)]
				}
				p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-%d", i), Quantity: 1, Strategy: st}
				_, err := ins[w%2].svc.Purchase(ctx, p)
				if errors.Is(err, failure.ErrUnavailable) {
					t.Errorf("Purchase(%s) during resets = %v; want no outage", show(p), err)
				}
			}
		})
	}
	for range 150 {
		if _, err := ins[0].svc.SetStock(ctx, prod.ID, 50); err != nil {
			t.Errorf("SetStock(%d, 50) under load = %v; want nil", prod.ID, err)
		}
		time.Sleep(10 * time.Millisecond) // the scenario: a reset every 10 ms
	}
	stop.Store(true)
	wg.Wait()
	if a := ins[0].audit(t, prod.ID); !a.Consistent {
		t.Errorf("Audit(%d) after the resets = %+v; want consistent", prod.ID, a)
	}
}
