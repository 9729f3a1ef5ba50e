package locker_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
)

// slack is how much later than its bound a timed step may finish on a busy
// machine before a test calls it a failure.
const slack = 2 * time.Second

// newLockerFunc returns a locker of one kind. All lockers a newLockerFunc
// returns share their store: one Local, or the same Redis nodes, as if they
// were clients in different processes of one deployment. now is the
// client's clock for the kinds that read one (setnx); the others ignore it.
type newLockerFunc func(now func() time.Time) locker.Locker

// kind is one kind of lock and what the conformance suite expects of it.
type kind struct {
	name string
	// setup prepares the store for one test and returns how to make
	// lockers with opts.
	setup func(t testing.TB, addrs []string, opts locker.Options) newLockerFunc
	// ctxErrInChain: Lock's error wraps the context's error, not only
	// ErrNotAcquired.
	ctxErrInChain bool
	// unlockAfterTakeoverDeletesForeign: a holder whose lease was taken
	// over while it still believes it holds deletes the new holder's lock
	// when it unlocks (the flaw of setnx).
	unlockAfterTakeoverDeletesForeign bool
}

var kinds = []kind{
	{
		name: "local",
		setup: func(t testing.TB, _ []string, opts locker.Options) newLockerFunc {
			l := locker.NewLocal(opts) // one process: every "client" shares it
			return func(func() time.Time) locker.Locker { return l }
		},
		ctxErrInChain: true,
	},
	{
		name: "setnx",
		setup: func(t testing.TB, addrs []string, opts locker.Options) newLockerFunc {
			c := testenv.Clients(t, addrs[:1])[0]
			return func(now func() time.Time) locker.Locker { return locker.NewSetNX(c, opts, now) }
		},
		ctxErrInChain:                     true,
		unlockAfterTakeoverDeletesForeign: true,
	},
	{
		name: "token",
		setup: func(t testing.TB, addrs []string, opts locker.Options) newLockerFunc {
			c := testenv.Clients(t, addrs[:1])[0]
			return func(func() time.Time) locker.Locker { return locker.NewToken(c, opts) }
		},
		ctxErrInChain: true,
	},
	{
		name: "redlock",
		setup: func(t testing.TB, addrs []string, opts locker.Options) newLockerFunc {
			cs := testenv.Clients(t, addrs)
			return func(func() time.Time) locker.Locker { return locker.NewRedlock(cs, opts) }
		},
		ctxErrInChain: true,
	},
}

// conformanceCase is one behaviour every kind is held to.
type conformanceCase struct {
	name string
	opts locker.Options
	run  func(t *testing.T, k kind, newLocker newLockerFunc, key string, opts locker.Options)
}

var conformanceCases = []conformanceCase{
	{"MutualExclusion", locker.Options{TTL: 20 * time.Second, Wait: 60 * time.Second}, testMutualExclusion},
	{"CancelWhileWaiting", locker.Options{TTL: 20 * time.Second, Wait: 20 * time.Second}, testCancelWhileWaiting},
	{"WaitRunsOut", locker.Options{TTL: 20 * time.Second, Wait: 400 * time.Millisecond}, testWaitRunsOut},
	{"HolderNeverUnlocks", locker.Options{TTL: 300 * time.Millisecond, Wait: 10 * time.Second}, testHolderNeverUnlocks},
	{"UnlockAfterTakeover", locker.Options{TTL: 2 * time.Second, Wait: 10 * time.Second}, testUnlockAfterTakeover},
	{"UnlockTwice", locker.Options{TTL: 20 * time.Second, Wait: time.Second}, testUnlockTwice},
	{"TryLock", locker.Options{TTL: 20 * time.Second, Wait: 20 * time.Second}, testTryLock},
	{"GiveUpMidAttempt", locker.Options{TTL: time.Minute, Wait: 20 * time.Second}, testGiveUpMidAttempt},
	{"Held", locker.Options{TTL: 500 * time.Millisecond, Wait: 10 * time.Second}, testHeld},
}

// TestConformance runs every case against every kind of lock on real
// redis-server processes.
func TestConformance(t *testing.T) {
	addrs := testenv.RedisAddrs(t)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			for _, c := range conformanceCases {
				t.Run(c.name, func(t *testing.T) {
					key := testenv.KeyPrefix(t, addrs) + "lock:product:1"
					c.run(t, k, k.setup(t, addrs, c.opts), key, c.opts)
				})
			}
		})
	}
}

// testMutualExclusion: 50 goroutines, each a client of its own, lock,
// read a plain counter, yield, write it back plus one and unlock. A lock
// that lets two in loses an increment, is seen by the holder count, and
// trips the race detector.
func testMutualExclusion(t *testing.T, _ kind, newLocker newLockerFunc, key string, _ locker.Options) {
	const n = 50
	var (
		counter int // guarded by the lock under test only
		inside  atomic.Int32
	)
	var g errgroup.Group
	for i := range n {
		l := newLocker(time.Now)
		g.Go(func() error {
			ctx := context.Background()
			lease, err := l.Lock(ctx, key)
			if err != nil {
				return fmt.Errorf("goroutine %d: Lock(%q) = %v; want nil", i, key, err)
			}
			if in := inside.Add(1); in != 1 {
				err = fmt.Errorf("goroutine %d: %d holders at once; want 1", i, in)
			}
			v := counter
			time.Sleep(time.Millisecond) // let a broken lock let someone in
			counter = v + 1
			inside.Add(-1)
			if uerr := lease.Unlock(ctx); uerr != nil {
				err = errors.Join(err, fmt.Errorf("goroutine %d: Unlock() = %v; want nil", i, uerr))
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if counter != n {
		t.Errorf("counter = %d after %d locked increments; want %d", counter, n, n)
	}
}

// testCancelWhileWaiting: cancelling the context of a waiting Lock ends it
// promptly, long before the wait, without taking or breaking the lock.
func testCancelWhileWaiting(t *testing.T, k kind, newLocker newLockerFunc, key string, opts locker.Options) {
	holder := mustLock(t, newLocker(time.Now), key)

	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(100*time.Millisecond, cancel)
	defer stop.Stop()
	start := time.Now()
	lease, err := newLocker(time.Now).Lock(ctx, key)
	elapsed := time.Since(start)
	if !errors.Is(err, locker.ErrNotAcquired) {
		t.Errorf("Lock(cancelled ctx) = %v, %v; want an error wrapping %v", lease, err, locker.ErrNotAcquired)
	}
	if k.ctxErrInChain && !errors.Is(err, context.Canceled) {
		t.Errorf("Lock(cancelled ctx) = %v; want it to wrap %v too", err, context.Canceled)
	}
	if limit := 100*time.Millisecond + slack; elapsed > limit {
		t.Errorf("Lock(cancelled ctx) returned after %v; want within %v of the cancel (wait is %v)", elapsed, limit, opts.Wait)
	}

	// The cancelled waiter neither took nor broke the lock.
	if err := holder.Unlock(context.Background()); err != nil {
		t.Errorf("holder Unlock() = %v; want nil", err)
	}
	next := mustLock(t, newLocker(time.Now), key)
	if err := next.Unlock(context.Background()); err != nil {
		t.Errorf("next Unlock() = %v; want nil", err)
	}
}

// testWaitRunsOut: a Lock that waits for a held key gives up with
// ErrNotAcquired once the wait runs out, not before.
func testWaitRunsOut(t *testing.T, k kind, newLocker newLockerFunc, key string, opts locker.Options) {
	holder := mustLock(t, newLocker(time.Now), key)
	defer holder.Unlock(context.Background())

	start := time.Now()
	lease, err := newLocker(time.Now).Lock(context.Background(), key)
	elapsed := time.Since(start)
	if !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("Lock(held key) = %v, %v; want an error wrapping %v", lease, err, locker.ErrNotAcquired)
	}
	if k.ctxErrInChain && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock(held key) = %v; want it to wrap %v too", err, context.DeadlineExceeded)
	}
	if low, high := opts.Wait*9/10, opts.Wait+slack; elapsed < low || elapsed > high {
		t.Errorf("Lock(held key) gave up after %v; want between %v and %v (wait %v)", elapsed, low, high, opts.Wait)
	}
}

// testHolderNeverUnlocks: a holder that never unlocks blocks the next one
// until its TTL, and no longer (give or take slack); its late Unlock then
// reports that it no longer held anything.
func testHolderNeverUnlocks(t *testing.T, _ kind, newLocker newLockerFunc, key string, opts locker.Options) {
	stuck := mustLock(t, newLocker(time.Now), key)

	start := time.Now()
	next, err := newLocker(time.Now).Lock(context.Background(), key)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Lock(key whose holder never unlocks) = %v; want nil within TTL %v", err, opts.TTL)
	}
	if low, high := opts.TTL/2, opts.TTL+slack; elapsed < low || elapsed > high {
		t.Errorf("Lock(key whose holder never unlocks) took %v; want between %v and %v (TTL %v)", elapsed, low, high, opts.TTL)
	}
	if err := next.Unlock(context.Background()); err != nil {
		t.Errorf("next Unlock() = %v; want nil", err)
	}
	if err := stuck.Unlock(context.Background()); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("expired holder Unlock() = %v; want an error wrapping %v", err, locker.ErrNotHeld)
	}
}

// testUnlockAfterTakeover: A holds; A's clock stalls at the moment it locks
// (as if A had checked its lease just before a long pause, or its clock
// lags); A's lease runs out and B takes the lock; then A unlocks. The kinds
// that trust no client clock leave B's lock alone and tell A ErrNotHeld.
// setnx asserts its flaw instead: A still believes it holds, its unlock
// deletes B's lock, and a third client C gets in while B works.
func testUnlockAfterTakeover(t *testing.T, k kind, newLocker newLockerFunc, key string, opts locker.Options) {
	stalled := time.Now()
	a := mustLock(t, newLocker(func() time.Time { return stalled }), key)
	b := mustLock(t, newLocker(time.Now), key) // waits out A's lease

	errA := a.Unlock(context.Background())

	// Probe whether B still holds: C may try for a short while, far less
	// than what is left of B's lease.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, errC := newLocker(time.Now).Lock(ctx, key)

	if k.unlockAfterTakeoverDeletesForeign {
		if errA != nil {
			t.Errorf("A Unlock() after takeover = %v; want nil (the flaw: A believes it still holds)", errA)
		}
		if errC != nil {
			t.Errorf("C Lock() while B holds = %v; want nil (the flaw: A's unlock deleted B's lock)", errC)
		}
		return
	}
	if !errors.Is(errA, locker.ErrNotHeld) {
		t.Errorf("A Unlock() after takeover = %v; want an error wrapping %v", errA, locker.ErrNotHeld)
	}
	if !errors.Is(errC, locker.ErrNotAcquired) {
		t.Errorf("C Lock() while B holds = %v, %v; want an error wrapping %v", c, errC, locker.ErrNotAcquired)
	}
	if err := b.Unlock(context.Background()); err != nil {
		t.Errorf("B Unlock() = %v; want nil (A's unlock must leave B's lock alone)", err)
	}
}

// testHeld: a lease says it is held while it is, and not once it ran out
// and another holder took the key, nor once given back.
func testHeld(t *testing.T, _ kind, newLocker newLockerFunc, key string, _ locker.Options) {
	ctx := context.Background()
	a := mustLock(t, newLocker(time.Now), key)
	if held, err := a.Held(ctx); !held || err != nil {
		t.Errorf("A Held() just after Lock = %t, %v; want true, nil", held, err)
	}
	b := mustLock(t, newLocker(time.Now), key) // waits out A's lease
	if held, err := a.Held(ctx); held || err != nil {
		t.Errorf("A Held() after its lease ran out and B took the key = %t, %v; want false, nil", held, err)
	}
	if held, err := b.Held(ctx); !held || err != nil {
		t.Errorf("B Held() = %t, %v; want true, nil", held, err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatalf("B Unlock() = %v; want nil", err)
	}
	if held, err := b.Held(ctx); held || err != nil {
		t.Errorf("B Held() after Unlock = %t, %v; want false, nil", held, err)
	}
}

// testUnlockTwice: the second Unlock of a lease releases nothing.
func testUnlockTwice(t *testing.T, _ kind, newLocker newLockerFunc, key string, _ locker.Options) {
	lease := mustLock(t, newLocker(time.Now), key)
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatalf("first Unlock() = %v; want nil", err)
	}
	if err := lease.Unlock(context.Background()); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("second Unlock() = %v; want an error wrapping %v", err, locker.ErrNotHeld)
	}
}

// testTryLock: TryLock takes a free key at once, refuses a held one at once
// (wrapping ErrNotAcquired, not ErrUnavailable: the nodes answered), and
// takes it again once it is released.
func testTryLock(t *testing.T, _ kind, newLocker newLockerFunc, key string, opts locker.Options) {
	ctx := context.Background()
	a, err := newLocker(time.Now).TryLock(ctx, key)
	if err != nil {
		t.Fatalf("TryLock(free key) = %v; want nil", err)
	}
	start := time.Now()
	b, err := newLocker(time.Now).TryLock(ctx, key)
	if !errors.Is(err, locker.ErrNotAcquired) || errors.Is(err, locker.ErrUnavailable) {
		t.Errorf("TryLock(held key) = %v, %v; want an error wrapping %v and not %v", b, err, locker.ErrNotAcquired, locker.ErrUnavailable)
	}
	if elapsed := time.Since(start); elapsed > slack {
		t.Errorf("TryLock(held key) returned after %v; want at once (the wait is %v)", elapsed, opts.Wait)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Unlock() = %v; want nil", err)
	}
	c, err := newLocker(time.Now).TryLock(ctx, key)
	if err != nil {
		t.Fatalf("TryLock(released key) = %v; want nil", err)
	}
	if err := c.Unlock(ctx); err != nil {
		t.Errorf("Unlock() = %v; want nil", err)
	}
}

// testGiveUpMidAttempt: callers whose context ends a few hundred
// microseconds into Lock (while the SET is on the wire, its answer lost to
// the deadline, or just after the grant) never leave the lock behind: after
// each one, with nothing else in flight, the key can be taken at once. The
// TTL is a minute, so that a leaked lock would show.
func testGiveUpMidAttempt(t *testing.T, _ kind, newLocker newLockerFunc, key string, _ locker.Options) {
	const callers = 200
	gotLock, gaveUp := 0, 0
	for i := range callers {
		l := newLocker(time.Now)
		// Deadlines from 0 to 2 ms, spread over an attempt's round trip.
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%40)*50*time.Microsecond)
		lease, err := l.Lock(ctx, key)
		cancel()
		if err == nil {
			gotLock++
			if err := lease.Unlock(context.Background()); err != nil {
				t.Fatalf("caller %d: Unlock() = %v; want nil", i, err)
			}
		} else {
			gaveUp++
		}
		probe, err := newLocker(time.Now).TryLock(context.Background(), key)
		if err != nil {
			t.Fatalf("caller %d (deadline %v) left the lock behind: TryLock() = %v; want nil", i, time.Duration(i%40)*50*time.Microsecond, err)
		}
		if err := probe.Unlock(context.Background()); err != nil {
			t.Fatalf("probe Unlock() = %v; want nil", err)
		}
	}
	t.Logf("%d callers: %d got the lock in time, %d gave up", callers, gotLock, gaveUp)
	if gaveUp == 0 {
		t.Errorf("no caller gave up mid-attempt: the deadlines did not test anything")
	}
}

// mustLock locks key with l or ends the test.
func mustLock(t testing.TB, l locker.Locker, key string) locker.Lease {
	t.Helper()
	lease, err := l.Lock(context.Background(), key)
	if err != nil {
		t.Fatalf("Lock(%q) = %v; want nil", key, err)
	}
	return lease
}

// onNode returns a client of the Redis node at addr and a lock key of the
// test's own on it.
func onNode(t testing.TB, addr string) (redis.UniversalClient, string) {
	t.Helper()
	addrs := []string{addr}
	return testenv.Clients(t, addrs)[0], testenv.KeyPrefix(t, addrs) + "lock"
}

// BenchmarkLock measures an uncontended Lock and Unlock of every kind.
func BenchmarkLock(b *testing.B) {
	addrs := testenv.RedisAddrs(b)
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			key := testenv.KeyPrefix(b, addrs) + "lock:bench"
			l := k.setup(b, addrs, locker.Options{})(time.Now)
			ctx := context.Background()
			for b.Loop() {
				lease, err := l.Lock(ctx, key)
				if err != nil {
					b.Fatalf("Lock(%q) = %v; want nil", key, err)
				}
				if err := lease.Unlock(ctx); err != nil {
					b.Fatalf("Unlock() = %v; want nil", err)
				}
			}
		})
	}
}

// eachRenewable runs test once per kind whose lease the watchdog renews,
// each a subtest named after it: newLocker makes another client of that
// kind with a 300 ms lease on the test nodes, and key is a key of the
// subtest's own.
func eachRenewable(t *testing.T, test func(t *testing.T, newLocker func() locker.Locker, key string)) {
	addrs := testenv.RedisAddrs(t)
	opts := locker.Options{TTL: 300 * time.Millisecond, Wait: 5 * time.Second}
	node := testenv.Clients(t, addrs[:1])[0]
	all := testenv.Clients(t, addrs)
	for name, newLocker := range map[string]func() locker.Locker{
		"token":   func() locker.Locker { return locker.NewToken(node, opts) },
		"redlock": func() locker.Locker { return locker.NewRedlock(all, opts) },
	} {
		t.Run(name, func(t *testing.T) { test(t, newLocker, testenv.KeyPrefix(t, addrs)+"lock") })
	}
}

// TestWatchdogKeepsLease: a 300 ms lease held 1.2 s under a watchdog that
// renews it every 100 ms is never free for another client; once the
// watchdog stops and the holder unlocks, the other gets it at once.
func TestWatchdogKeepsLease(t *testing.T) {
	eachRenewable(t, func(t *testing.T, newLocker func() locker.Locker, key string) {
		ctx := context.Background()
		holder := mustLock(t, newLocker(), key)
		wd := locker.StartWatchdog(ctx, holder, 100*time.Millisecond)
		// Not a wait for a condition: the 1.2 s (four leases) is the
		// scenario, and another client tries the lock all along it.
		for deadline := time.Now().Add(1200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if other, err := newLocker().TryLock(ctx, key); err == nil {
				other.Unlock(ctx)
				t.Fatalf("another client took the lock while the watchdog renewed it")
			}
		}
		select {
		case <-wd.Lost():
			t.Errorf("the watchdog lost a lease it was renewing")
		default:
		}
		wd.Stop()
		if err := holder.Unlock(ctx); err != nil {
			t.Errorf("Unlock() after 1.2 s under the watchdog = %v; want nil (the lease was kept)", err)
		}
		other, err := newLocker().TryLock(ctx, key)
		if err != nil {
			t.Fatalf("TryLock() after the holder unlocked = %v; want nil", err)
		}
		other.Unlock(ctx)
	})
}

// TestWatchdogFrozenLosesLease: a holder frozen longer than its lease (a
// stop-the-world pause: the watchdog stops too) loses it: another client
// takes the lock, and the watchdog's first renewal after the thaw finds it
// gone.
func TestWatchdogFrozenLosesLease(t *testing.T) {
	eachRenewable(t, func(t *testing.T, newLocker func() locker.Locker, key string) {
		ctx := context.Background()
		holder := mustLock(t, newLocker(), key)
		wd := locker.StartWatchdog(ctx, holder, 100*time.Millisecond)
		defer wd.Stop()
		wd.Freeze()
		other := mustLock(t, newLocker(), key) // waits out the unrenewed lease
		wd.Thaw()
		select {
		case <-wd.Lost():
		case <-time.After(2 * time.Second):
			t.Errorf("the watchdog did not find its lease gone within 2 s of the thaw")
		}
		if err := holder.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
			t.Errorf("frozen holder Unlock() = %v; want %v", err, locker.ErrNotHeld)
		}
		if err := other.Unlock(ctx); err != nil {
			t.Errorf("other Unlock() = %v; want nil (the frozen holder's renewal must leave it alone)", err)
		}
	})
}

// TestWatchdogLeavesSetNXAlone: setnx keeps the classic recipe: a watchdog
// started on its lease renews nothing, and the lease runs out at its TTL.
func TestWatchdogLeavesSetNXAlone(t *testing.T) {
	c, key := onNode(t, testenv.RedisAddrs(t)[0])
	opts := locker.Options{TTL: 300 * time.Millisecond, Wait: 5 * time.Second}
	ctx := context.Background()
	holder := mustLock(t, locker.NewSetNX(c, opts, time.Now), key)
	wd := locker.StartWatchdog(ctx, holder, 100*time.Millisecond)
	defer wd.Stop()
	start := time.Now()
	other := mustLock(t, locker.NewSetNX(c, opts, time.Now), key)
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("another client took the setnx lock after %v; want it to wait out the 300 ms lease", waited)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Errorf("Unlock() = %v; want nil", err)
	}
}
