package locker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
)

// TestTokenUnlockLeavesForeignLock is the fix beside
// TestSetNXUnlockDeletesForeignLock: token reads no client clock, so the
// only way to lose its lease is for Redis to expire it. A holds, A's lease
// expires, B takes the lock; A's unlock returns ErrNotHeld and B's key, with
// B's token, is still there.
func TestTokenUnlockLeavesForeignLock(t *testing.T) {
	c, key := onNode(t, testenv.RedisAddrs(t)[0])
	ctx := context.Background()

	a := mustLock(t, locker.NewToken(c, locker.Options{TTL: 300 * time.Millisecond}), key)
	tokenA := c.Get(ctx, key).Val()
	b := mustLock(t, locker.NewToken(c, locker.Options{TTL: 20 * time.Second}), key) // waits out A's lease
	tokenB, err := c.Get(ctx, key).Result()
	if err != nil || tokenB == "" || tokenB == tokenA {
		t.Fatalf("GET %s after B's Lock = %q, %v; want B's own token, not A's %q", key, tokenB, err, tokenA)
	}

	if err := a.Unlock(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("A Unlock() after takeover = %v; want an error wrapping %v", err, locker.ErrNotHeld)
	}
	if got, err := c.Get(ctx, key).Result(); err != nil || got != tokenB {
		t.Errorf("GET %s after A's unlock = %q, %v; want B's token %q", key, got, err, tokenB)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Errorf("B Unlock() = %v; want nil", err)
	}
}

// TestTokenSetsExpiryAndRandomToken: the key carries a Redis expiry of at
// most the TTL, and every acquisition writes a token of its own.
func TestTokenSetsExpiryAndRandomToken(t *testing.T) {
	c, key := onNode(t, testenv.RedisAddrs(t)[0])
	ctx := context.Background()
	ttl := 20 * time.Second
	l := locker.NewToken(c, locker.Options{TTL: ttl})

	seen := make(map[string]bool)
	for range 3 {
		lease := mustLock(t, l, key)
		if got, err := c.PTTL(ctx, key).Result(); err != nil || got <= 0 || got > ttl {
			t.Errorf("PTTL %s = %v, %v; want in (0, %v]", key, got, err, ttl)
		}
		token := c.Get(ctx, key).Val()
		if len(token) < 16 || seen[token] {
			t.Errorf("GET %s = %q; want a fresh random token (seen before: %v)", key, token, seen[token])
		}
		seen[token] = true
		if err := lease.Unlock(ctx); err != nil {
			t.Errorf("Unlock() = %v; want nil", err)
		}
	}
}

// TestTokenUnlockUsesScript: after SCRIPT FLUSH the node no longer has
// unlock.lua cached; Unlock still works (EVALSHA fails with NOSCRIPT and
// falls back to EVAL, which caches the script again).
func TestTokenUnlockUsesScript(t *testing.T) {
	c, key := onNode(t, testenv.StartRedis(t).Addr) // SCRIPT FLUSH on a node of its own
	ctx := context.Background()
	l := locker.NewToken(c, locker.Options{TTL: 20 * time.Second})

	lease := mustLock(t, l, key)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock() after SCRIPT FLUSH = %v; want nil", err)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %s after Unlock = %d, %v; want 0", key, n, err)
	}
	if got, err := c.ScriptExists(ctx, locker.UnlockScriptSHA).Result(); err != nil || len(got) != 1 || !got[0] {
		t.Errorf("SCRIPT EXISTS %s = %v, %v; want [true]: Unlock ran unlock.lua", locker.UnlockScriptSHA, got, err)
	}
}

// TestTokenNodeDownIsUnavailable: with its one node down, token answers at
// once with ErrUnavailable (beside ErrNotAcquired), not after the wait, and
// takes the lock again once the node is back.
func TestTokenNodeDownIsUnavailable(t *testing.T) {
	node := testenv.StartRedis(t)
	c, key := onNode(t, node.Addr)
	opts := locker.Options{TTL: 10 * time.Second, Wait: 20 * time.Second}
	l := locker.NewToken(c, opts)
	ctx := context.Background()

	node.Stop()
	start := time.Now()
	lease, err := l.Lock(ctx, key)
	if !errors.Is(err, locker.ErrNotAcquired) || !errors.Is(err, locker.ErrUnavailable) {
		t.Errorf("Lock() with the node down = %v, %v; want an error wrapping %v and %v", lease, err, locker.ErrNotAcquired, locker.ErrUnavailable)
	}
	if elapsed := time.Since(start); elapsed > slack {
		t.Errorf("Lock() with the node down gave up after %v; want at once, not after the %v wait", elapsed, opts.Wait)
	}

	node.Restart(t)
	lease, err = l.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock() with the node back = %v; want nil", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Errorf("Unlock() = %v; want nil", err)
	}
}
