package locker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
)

// TestLocalTwoInstancesBothHold asserts the flaw of local: two instances
// of the service each have their own Local, and both grant the same key.
func TestLocalTwoInstancesBothHold(t *testing.T) {
	opts := locker.Options{TTL: 10 * time.Second, Wait: 100 * time.Millisecond}
	one, two := locker.NewLocal(opts), locker.NewLocal(opts)
	a := mustLock(t, one, "product:1")
	b, err := two.Lock(context.Background(), "product:1")
	if err != nil {
		t.Fatalf("second instance Lock() while the first holds = %v; want nil (the flaw)", err)
	}
	for name, l := range map[string]locker.Lease{"first": a, "second": b} {
		if err := l.Unlock(context.Background()); err != nil {
			t.Errorf("%s instance Unlock() = %v; want nil", name, err)
		}
	}
}

// TestLocalHandsOverInOrder: a released key goes to the longest waiter.
func TestLocalHandsOverInOrder(t *testing.T) {
	l := locker.NewLocal(locker.Options{TTL: 10 * time.Second, Wait: 10 * time.Second})
	const key = "product:1"
	ctx := context.Background()
	holder := mustLock(t, l, key)

	const n = 5
	got := make(chan int, n)
	leases := make(chan locker.Lease, n)
	for i := range n {
		go func() {
			lease, err := l.Lock(ctx, key)
			if err != nil {
				got <- -1
				return
			}
			got <- i
			leases <- lease
		}()
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d waiters", i+1), func() bool { return l.Waiters(key) == i+1 })
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("holder Unlock() = %v; want nil", err)
	}
	for want := range n {
		if g := <-got; g != want {
			t.Fatalf("waiter %d got the lock; want waiter %d (first come, first served)", g, want)
		}
		if err := (<-leases).Unlock(ctx); err != nil {
			t.Fatalf("waiter %d Unlock() = %v; want nil", want, err)
		}
	}
}

// TestLocalForgetsFreeKeys: a key that nobody holds or waits for leaves no
// state behind, however its last lease ended.
func TestLocalForgetsFreeKeys(t *testing.T) {
	l := locker.NewLocal(locker.Options{TTL: 300 * time.Millisecond, Wait: 20 * time.Millisecond})
	ctx := context.Background()
	for i := range 1000 {
		if err := mustLock(t, l, fmt.Sprint("unlocked:", i)).Unlock(ctx); err != nil {
			t.Fatalf("Unlock() = %v; want nil", err)
		}
	}
	// A waiter that gives up, and a holder that lets its lease run out.
	held := mustLock(t, l, "expired")
	if _, err := l.Lock(ctx, "expired"); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("Lock(held key) = %v; want an error wrapping %v", err, locker.ErrNotAcquired)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Lock(cancelled, "cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock(cancelled ctx) = %v; want an error wrapping %v", err, context.Canceled)
	}
	testenv.Eventually(t, 10*time.Second, "no keys left", func() bool { return l.Keys() == 0 })
	if err := held.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("expired lease Unlock() = %v; want an error wrapping %v", err, locker.ErrNotHeld)
	}
	if got := l.Keys(); got != 0 {
		t.Errorf("Keys() = %d after every lease ended; want 0", got)
	}
}
