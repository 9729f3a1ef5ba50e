package locker_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
)

// TestSetNXStoresExpiryInValue: the recipe as published: the value is
// now + ttl + 1 in unix ms, and the key has no Redis expiry.
func TestSetNXStoresExpiryInValue(t *testing.T) {
	c, key := onNode(t, testenv.RedisAddrs(t)[0])
	now := time.UnixMilli(1_700_000_000_000)
	ttl := 8 * time.Second
	s := locker.NewSetNX(c, locker.Options{TTL: ttl}, func() time.Time { return now })

	lease := mustLock(t, s, key)
	ctx := context.Background()
	want := strconv.FormatInt(now.Add(ttl).UnixMilli()+1, 10)
	if got, err := c.Get(ctx, key).Result(); err != nil || got != want {
		t.Errorf("GET %s = %q, %v; want %q", key, got, err, want)
	}
	if got, err := c.PTTL(ctx, key).Result(); err != nil || got != -1 {
		t.Errorf("PTTL %s = %v, %v; want -1 (no Redis expiry)", key, got, err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Errorf("Unlock() = %v; want nil", err)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %s after Unlock = %d, %v; want 0", key, n, err)
	}
}

// TestSetNXUnlockDeletesForeignLock asserts the flaw: client B's clock runs
// an hour ahead, so B takes over A's live lock; A's expiry has not passed by
// A's clock, so A's unlock deletes B's lock, and C gets in while B holds.
func TestSetNXUnlockDeletesForeignLock(t *testing.T) {
	c, key := onNode(t, testenv.RedisAddrs(t)[0])
	opts := locker.Options{TTL: 10 * time.Second, Wait: 2 * time.Second}
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	ctx := context.Background()

	a := mustLock(t, locker.NewSetNX(c, opts, nil), key)
	b := mustLock(t, locker.NewSetNX(c, opts, ahead), key) // two holders already
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("A Unlock() = %v; want nil (A believes it holds)", err)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %s after A's unlock = %d, %v; want 0: A deleted B's lock", key, n, err)
	}
	quick := locker.NewSetNX(c, locker.Options{TTL: opts.TTL, Wait: 100 * time.Millisecond}, nil)
	third, err := quick.Lock(ctx, key)
	if err != nil {
		t.Fatalf("C Lock() while B holds = %v; want nil (the flaw)", err)
	}
	if err := third.Unlock(ctx); err != nil {
		t.Errorf("C Unlock() = %v; want nil", err)
	}
	if err := b.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("B Unlock() = %v; want an error wrapping %v", err, locker.ErrNotHeld)
	}
}

// getsetHook runs before, once, just ahead of the first GETSET of the
// client it is added to.
type getsetHook struct{ before func() }

func (h *getsetHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *getsetHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *getsetHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "getset" && h.before != nil {
			f := h.before
			h.before = nil
			f()
		}
		return next(ctx, cmd)
	}
}

// TestSetNXLosingGetSetOverwritesWinnersExpiry asserts the flaw the
// articles call negligible: a crashed holder left an expired lock; B and C
// both read it as expired; C's GETSET runs first and wins; B's GETSET then
// loses, but has already written its own expiry over C's, so C's lock ends
// a minute after C believes it does (B's clock runs a minute ahead).
func TestSetNXLosingGetSetOverwritesWinnersExpiry(t *testing.T) {
	addrs := testenv.RedisAddrs(t)[:1]
	key := testenv.KeyPrefix(t, addrs) + "lock"
	ctx := context.Background()
	cs := testenv.Clients(t, []string{addrs[0], addrs[0]})
	clientB, clientC := cs[0], cs[1]
	if err := clientC.Set(ctx, key, "1", 0).Err(); err != nil { // expired in 1970
		t.Fatal(err)
	}
	ttl := 10 * time.Second
	nowC := time.Now()
	nowB := nowC.Add(time.Minute)
	c := locker.NewSetNX(clientC, locker.Options{TTL: ttl}, func() time.Time { return nowC })
	b := locker.NewSetNX(clientB, locker.Options{TTL: ttl, Wait: 300 * time.Millisecond}, func() time.Time { return nowB })

	var leaseC locker.Lease
	var errC error
	clientB.AddHook(&getsetHook{before: func() { leaseC, errC = c.Lock(ctx, key) }})
	leaseB, errB := b.Lock(ctx, key)

	if errC != nil {
		t.Fatalf("C Lock() between B's GET and GETSET = %v; want nil", errC)
	}
	if !errors.Is(errB, locker.ErrNotAcquired) {
		t.Errorf("B Lock() = %v, %v; want an error wrapping %v (C won)", leaseB, errB, locker.ErrNotAcquired)
	}
	expiryC := strconv.FormatInt(nowC.Add(ttl).UnixMilli()+1, 10)
	expiryB := strconv.FormatInt(nowB.Add(ttl).UnixMilli()+1, 10)
	if got, err := clientC.Get(ctx, key).Result(); err != nil || got != expiryB {
		t.Errorf("GET %s = %q, %v; want B's expiry %q over winner C's %q (the flaw)", key, got, err, expiryB, expiryC)
	}
	if err := leaseC.Unlock(ctx); err != nil {
		t.Errorf("C Unlock() = %v; want nil", err)
	}
}
