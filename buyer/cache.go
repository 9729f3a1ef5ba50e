package buyer

import (
	"sync"
	"time"
)

// DefaultCacheSize is how many verified tokens a Verifier remembers: a
// token is a few hundred bytes, so some megabytes at most.
const DefaultCacheSize = 16384

// cache remembers tokens verified, so that a buyer's retries with the
// same token cost a map lookup instead of a signature check. It is
// bounded: two generations of at most size/2 tokens each; when the new
// one is full, the old one is dropped and the new one becomes old (a hit
// in the old one moves the token to the new). A token is never answered
// past its exp, nor after the key set was read again (its key may be
// gone): then it is verified anew.
type cache struct {
	size int

	mu       sync.Mutex
	cur, old map[string]cached
}

// cached is a verified token's claims, and the key set's reading it was
// verified under.
type cached struct {
	claims Claims
	read   uint64
}

func newCache(size int) *cache {
	return &cache{size: size, cur: make(map[string]cached), old: make(map[string]cached)}
}

// get returns token's claims if it was verified under the key set's
// reading read and its exp is after now.
func (c *cache) get(token string, now time.Time, read uint64) (Claims, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cur[token]
	if !ok {
		if e, ok = c.old[token]; ok {
			delete(c.old, token)
			c.putLocked(token, e)
		}
	}
	if !ok {
		return Claims{}, false
	}
	if e.read != read || !now.Before(e.claims.Expiry) {
		delete(c.cur, token)
		return Claims{}, false
	}
	return e.claims, true
}

// put remembers token's claims, verified under the key set's reading
// read.
func (c *cache) put(token string, claims Claims, read uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(token, cached{claims: claims, read: read})
}

func (c *cache) putLocked(token string, e cached) {
	if len(c.cur) >= c.size/2 {
		c.old, c.cur = c.cur, make(map[string]cached, c.size/2)
	}
	c.cur[token] = e
}

// len is how many tokens the cache holds.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}
