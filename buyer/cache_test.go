package buyer

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// TestCacheBounded: 100,000 distinct tokens leave at most the cache's size
// in memory, and the latest are remembered.
func TestCacheBounded(t *testing.T) {
	c := newCache(DefaultCacheSize)
	now := time.Now()
	exp := Claims{Subject: "s", Expiry: now.Add(time.Hour)}
	for i := range 100_000 {
		c.put("token-"+strconv.Itoa(i), exp, 1)
	}
	if n := c.len(); n > DefaultCacheSize {
		t.Errorf("the cache holds %d tokens; want at most %d", n, DefaultCacheSize)
	}
	if _, ok := c.get("token-99999", now, 1); !ok {
		t.Error("the last token put is not remembered")
	}
	if _, ok := c.get("token-0", now, 1); ok {
		t.Error("the first of 100,000 tokens is still remembered")
	}
	if _, ok := c.get("token-99999", now, 2); ok {
		t.Error("a token verified under an earlier reading of the key set is answered")
	}
	if _, ok := c.get("token-99998", exp.Expiry, 1); ok {
		t.Error("a token is answered at its exp")
	}
}

// TestVerifyCachedTokens: a token verified is verified again from memory
// until its exp, and not once the key set read again lacks its key.
func TestVerifyCachedTokens(t *testing.T) {
	p, c, signers, v := verifying(t, "RS256")
	rs := signers[0]
	ctx := context.Background()
	cl := claims("alice", c.now())
	tok := sign(t, rs, cl)
	for range 3 {
		if got, err := v.Verify(ctx, tok); err != nil || got.Subject != "alice" {
			t.Fatalf("Verify = %+v, %v; want alice", got, err)
		}
	}
	if n := v.cache.len(); n != 1 {
		t.Errorf("the cache holds %d tokens after one token verified thrice; want 1", n)
	}
	c.add(cl.Expiry.Time().Sub(c.now()) + Leeway + time.Second)
	if _, err := v.Verify(ctx, tok); ReasonOf(err) != ReasonExpired {
		t.Errorf("the cached token past its exp and the leeway: %v; want expired", err)
	}

	c.t = time.Now()
	fresh := sign(t, rs, claims("bob", c.now()))
	if _, err := v.Verify(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	// The set read again without change keeps the cache.
	if err := v.keys.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if n := v.cache.len(); n == 0 {
		t.Error("an unchanged set's reading emptied the cache of verified tokens")
	}
	if _, err := v.Verify(ctx, fresh); err != nil {
		t.Fatalf("after an unchanged reading: %v; want valid", err)
	}
	// Every key removed: the set is read, holds none, and the cached token
	// is refused.
	p.remove(rs.KeyID())
	if err := v.keys.Read(ctx); !errors.Is(err, ErrNoUsableKey) {
		t.Fatalf("a set without keys read: %v; want ErrNoUsableKey", err)
	}
	if _, err := v.Verify(ctx, fresh); ReasonOf(err) != ReasonKey {
		t.Errorf("a cached token once the set holds no key: %v; want unknown_key", err)
	}
	p.add(t, "ES256") // the set's one key now
	if err := v.keys.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, fresh); ReasonOf(err) != ReasonKey {
		t.Errorf("a cached token whose key the set no longer holds: %v; want unknown_key", err)
	}
}
