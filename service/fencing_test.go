package service_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// TestPurchaseFencing is the lease overrun: with a 300 ms lease, buyer A
// takes the lock on one instance and is paused 1200 ms (a stop-the-world
// pause: its watchdog stops too); the lease runs out, and buyer B, who
// arrives at 600 ms on another instance (on A's own instance B would wait
// in line behind A's hold), takes the lock and buys the last unit while A
// is frozen. Without fencing A's write lands too and the unit is sold
// twice (the flaw, asserted); with fencing A's write is refused with
// failure.ErrLockLost and the stock stays whole (the fix).
func TestPurchaseFencing(t *testing.T) {
	const (
		ttl     = 300 * time.Millisecond
		pauseA  = 1200 * time.Millisecond
		arriveB = 600 * time.Millisecond
	)
	for _, strategy := range []string{"setnx", "token", "redlock"} {
		for _, fencing := range []bool{false, true} {
			name := strategy + "/without fencing"
			if fencing {
				name = strategy + "/with fencing"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// The service default is the opposite of what each
				// purchase asks for, so that the override is what counts.
				f := newFixture(t, nil)
				in := f.instance(settings{Strategy: strategy, Fencing: !fencing, TTL: ttl, Wait: 5 * time.Second})
				other := f.instance(settings{Strategy: strategy, Fencing: !fencing, TTL: ttl, Wait: 5 * time.Second})
				prod := in.product(t, 1)
				a := service.Purchase{ProductID: prod.ID, UserID: "u-a", Quantity: 1, Pause: pauseA, Fencing: ptr(fencing)}
				b := service.Purchase{ProductID: prod.ID, UserID: "u-b", Quantity: 1, Fencing: ptr(fencing)}

				errA, errB := overlap(t, strategy, in, a, other, b, arriveB)

				if errB != nil {
					t.Errorf("Purchase(%s) at %v = %v; want nil", show(b), arriveB, errB)
				}
				if !fencing {
					if errA != nil {
						t.Errorf("Purchase(%s) = %v; want nil (the overrun write lands)", show(a), errA)
					}
					in.wantAudit(t, service.Audit{ProductID: prod.ID, InitialStock: 1, Stock: -1,
						Orders: 2, UnitsSold: 2, OversoldUnits: 1, Consistent: false})
					return
				}
				if !errors.Is(errA, failure.ErrLockLost) {
					t.Errorf("Purchase(%s) = %v; want %v", show(a), errA, failure.ErrLockLost)
				}
				in.wantAudit(t, consistentAudit(prod.ID, 1, 1))
				if got := in.counter(t, strategy, "lock_lost"); got != 1 {
					t.Errorf("seckill_purchases_total{strategy=%q,outcome=\"lock_lost\"} = %v; want 1", strategy, got)
				}
			})
		}
	}
}

// TestWatchdogKeepsLongHold: with a 300 ms lease, buyer A works 1200 ms
// (hold_ms, not a pause) while buyer B arrives at 600 ms on another
// instance. With the watchdog on, A's lease is renewed every 100 ms, so B
// waits for A's release: A buys the last unit and B finds it sold out,
// nobody is fenced off. Without the watchdog the lease runs out under A's
// work, B takes the lock and buys, and fencing turns A away (lock_lost):
// the watchdog is what kept A's lock.
func TestWatchdogKeepsLongHold(t *testing.T) {
	const (
		ttl     = 300 * time.Millisecond
		workA   = 1200 * time.Millisecond
		arriveB = 600 * time.Millisecond
	)
	for _, strategy := range []string{"token", "redlock"} {
		for _, watchdog := range []bool{true, false} {
			name := strategy + "/watchdog on"
			if !watchdog {
				name = strategy + "/watchdog off"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				s := settings{Strategy: strategy, Fencing: true, TTL: ttl, Wait: 5 * time.Second, NoWatchdog: !watchdog}
				in, other := f.instance(s), f.instance(s)
				prod := in.product(t, 1)
				a := service.Purchase{ProductID: prod.ID, UserID: "u-a", Quantity: 1, Work: workA}
				b := service.Purchase{ProductID: prod.ID, UserID: "u-b", Quantity: 1}
				errA, errB := overlap(t, strategy, in, a, other, b, arriveB)
				if watchdog {
					if errA != nil || !errors.Is(errB, failure.ErrSoldOut) {
						t.Errorf("with the watchdog: A = %v, B = %v; want A nil (it kept its lock), B %v", errA, errB, failure.ErrSoldOut)
					}
				} else if !errors.Is(errA, failure.ErrLockLost) || errB != nil {
					t.Errorf("without the watchdog: A = %v, B = %v; want A %v (its lease ran out), B nil", errA, errB, failure.ErrLockLost)
				}
				in.wantAudit(t, consistentAudit(prod.ID, 1, 1))
			})
		}
	}
}

// overlap buys a through in and, arriveB after a was granted strategy's
// lock, b through other, and returns what each got.
func overlap(t *testing.T, strategy string, in *instance, a service.Purchase, other *instance, b service.Purchase, arriveB time.Duration) (errA, errB error) {
	var g errgroup.Group
	g.Go(func() error {
		_, errA = in.svc.Purchase(t.Context(), a)
		return nil
	})
	testenv.Eventually(t, 10*time.Second, "A to be granted the "+strategy+" lock", func() bool {
		return in.lockWaits(t, strategy, "acquired") == 1
	})
	// The sleep is the scenario: B comes this long into A's hold.
	time.Sleep(arriveB)
	_, errB = other.svc.Purchase(t.Context(), b)
	_ = g.Wait() // the goroutine reports through errA
	return errA, errB
}

// TestOvertakenHolderLosesToLaterHolder: buyer A takes the lock on one
// instance and is paused 1200 ms; its 300 ms lease runs out and buyer B
// takes the lock on another instance at 600 ms, and is paused too. A
// wakes first, but B holds the later token: A's write is refused
// (lock_lost) and B's, later, lands. The token is taken when the lock is
// granted, not when the holder first writes.
func TestOvertakenHolderLosesToLaterHolder(t *testing.T) {
	eachStrategy(t, []string{"token", "redlock"}, func(t *testing.T, strategy string) {
		f := newFixture(t, nil)
		s := settings{Strategy: strategy, Fencing: true, TTL: 300 * time.Millisecond, Wait: 5 * time.Second}
		in, other := f.instance(s), f.instance(s)
		prod := in.product(t, 1)
		a := service.Purchase{ProductID: prod.ID, UserID: "u-a", Quantity: 1, Pause: 1200 * time.Millisecond}
		b := service.Purchase{ProductID: prod.ID, UserID: "u-b", Quantity: 1, Pause: 1200 * time.Millisecond}
		errA, errB := overlap(t, strategy, in, a, other, b, 600*time.Millisecond)
		if !errors.Is(errA, failure.ErrLockLost) || errB != nil {
			t.Errorf("A (overtaken) = %v, B (the later holder) = %v; want A %v, B nil", errA, errB, failure.ErrLockLost)
		}
		in.wantAudit(t, consistentAudit(prod.ID, 1, 1))
	})
}
