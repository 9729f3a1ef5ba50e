package buyer

import (
	"context"
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
	p := newProvider(t)
	c := &clock{t: time.Now()}
	rs := p.add(t, "RS256")
	v := newVerifier(t, p, c)
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
	p.remove(rs.KeyID())
	if err := v.keys.Read(ctx); err == nil {
		t.Fatal("a set without keys was read; want ErrNoUsableKey")
	}
	// The set kept its keys (a failed read changes nothing): the token
	// still verifies.
	if _, err := v.Verify(ctx, fresh); err != nil {
		t.Errorf("after a failed read of the set: %v; want the token still valid", err)
	}
	p.add(t, "ES256") // the set's one key now
	if err := v.keys.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, fresh); ReasonOf(err) != ReasonKey {
		t.Errorf("a cached token whose key the set no longer holds: %v; want unknown_key", err)
	}
}
