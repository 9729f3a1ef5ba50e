package locker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/locker"
)

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
