package locker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
)

// TestRedlockQuorum: over three nodes, Redlock still grants the lock with
// one node down (two of three is a majority) and refuses it with two down,
// as unavailable (an outage, not contention), within the wait.
func TestRedlockQuorum(t *testing.T) {
	nodes, addrs := testenv.StartRedisNodes(t, 3)
	key := testenv.KeyPrefix(t, addrs) + "lock"
	opts := locker.Options{TTL: 10 * time.Second, Wait: time.Second}
	l := locker.NewRedlock(testenv.Clients(t, addrs), opts)
	ctx := context.Background()

	nodes[0].Stop()
	lease, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock() with 1 of 3 nodes down = %v; want nil", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Errorf("Unlock() with 1 of 3 nodes down = %v; want nil", err)
	}

	nodes[1].Stop()
	start := time.Now()
	lease, err = l.Lock(ctx, key)
	elapsed := time.Since(start)
	if !errors.Is(err, locker.ErrNotAcquired) || !errors.Is(err, locker.ErrUnavailable) {
		t.Errorf("Lock() with 2 of 3 nodes down = %v, %v; want an error wrapping %v and %v", lease, err, locker.ErrNotAcquired, locker.ErrUnavailable)
	}
	if limit := opts.Wait + slack; elapsed > limit {
		t.Errorf("Lock() with 2 of 3 nodes down gave up after %v; want within %v", elapsed, limit)
	}
}

// TestRedlockTakenIsNotUnavailable: with one node down and the lock held on
// the other two, a round is refused as contention (ErrNotAcquired without
// ErrUnavailable): enough nodes answered to say the lock is taken.
func TestRedlockTakenIsNotUnavailable(t *testing.T) {
	nodes, addrs := testenv.StartRedisNodes(t, 3)
	key := testenv.KeyPrefix(t, addrs) + "lock"
	l := locker.NewRedlock(testenv.Clients(t, addrs), locker.Options{TTL: 10 * time.Second, Wait: time.Second})
	ctx := context.Background()
	nodes[2].Stop()
	holder, err := l.TryLock(ctx, key)
	if err != nil {
		t.Fatalf("TryLock() with 1 of 3 nodes down = %v; want nil", err)
	}
	defer holder.Unlock(ctx)
	lease, err := l.TryLock(ctx, key)
	if !errors.Is(err, locker.ErrNotAcquired) || errors.Is(err, locker.ErrUnavailable) {
		t.Errorf("TryLock(held key) with 1 of 3 nodes down = %v, %v; want %v without %v", lease, err, locker.ErrNotAcquired, locker.ErrUnavailable)
	}
}

// TestRedlockHeldWhileRenewed: a holder asks Held while its watchdog
// renews the lease, as a hold whose fence moved does (the race detector
// watches the lease's validity time); the lease stays held past its first
// TTL, and not once given back.
func TestRedlockHeldWhileRenewed(t *testing.T) {
	addrs := testenv.RedisAddrs(t)
	key := testenv.KeyPrefix(t, addrs) + "lock"
	const ttl = 300 * time.Millisecond
	l := locker.NewRedlock(testenv.Clients(t, addrs), locker.Options{TTL: ttl, Wait: time.Second})
	ctx := context.Background()
	lease, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock() = %v; want nil", err)
	}
	wd := locker.StartWatchdog(ctx, lease, 10*time.Millisecond)
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); {
		if held, err := lease.Held(ctx); !held || err != nil {
			t.Fatalf("Held() while the watchdog renews = %t, %v; want true, nil", held, err)
		}
	}
	wd.Stop()
	if err := lease.Unlock(ctx); err != nil {
		t.Errorf("Unlock() = %v; want nil", err)
	}
	if held, err := lease.Held(ctx); held || err != nil {
		t.Errorf("Held() after Unlock = %t, %v; want false, nil", held, err)
	}
}
