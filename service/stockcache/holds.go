package stockcache

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Holds: a return of units on its way holds its product's sold-out
// answers on every instance, from before its COMMIT until the instances
// have heard the stock it left (HoldHeard, Returned). A purchase of a held
// product goes to the database, which decides it. A hold whose end is
// never heard (its announcer died, or a node lost the message) runs out
// by itself, and the refresher has read the product again by then.

// The forms of a hold's announcements: "hold:product:milliseconds:token"
// and "release:product:token".
const (
	holdPrefix    = "hold:"
	releasePrefix = "release:"
)

// maxHold bounds a hold an announcement asks for: a return's takes its
// database time and two refreshes, seconds.
const maxHold = 10 * time.Minute

// Hold holds the product's sold-out answers under token for at most d.
func (c *Cache) Hold(product int64, token string, d time.Duration) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	hs := c.holds[product]
	if hs == nil {
		hs = make(map[string]time.Time)
		c.holds[product] = hs
	}
	for t, until := range hs {
		if !now.Before(until) {
			delete(hs, t) // run out
		}
	}
	hs[token] = now.Add(d)
}

// release ends the product's hold token.
func (c *Cache) release(product int64, token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.holds[product], token)
	if len(c.holds[product]) == 0 {
		delete(c.holds, product)
	}
}

// heldLocked says a hold of the product is running; c.mu is held.
func (c *Cache) heldLocked(product int64) bool {
	hs := c.holds[product]
	if len(hs) == 0 {
		return false
	}
	now := time.Now()
	for _, until := range hs {
		if now.Before(until) {
			return true
		}
	}
	return false
}

// holdMessage is a hold's or a release's announcement, read: hold is 0
// for a release.
type holdMessage struct {
	product int64
	hold    time.Duration
	token   string
}

// parseHold reads a hold's or a release's announcement; ok says msg has
// one's form, err that its fields do not parse.
func parseHold(msg string) (h holdMessage, ok bool, err error) {
	var rest string
	var release bool
	switch {
	case strings.HasPrefix(msg, holdPrefix):
		rest = msg[len(holdPrefix):]
	case strings.HasPrefix(msg, releasePrefix):
		rest, release = msg[len(releasePrefix):], true
	default:
		return h, false, nil
	}
	parts := strings.Split(rest, ":")
	want := 3
	if release {
		want = 2
	}
	if len(parts) != want || parts[len(parts)-1] == "" {
		return h, true, fmt.Errorf("%q is not hold:product:milliseconds:token or release:product:token", msg)
	}
	if h.product, err = strconv.ParseInt(parts[0], 10, 64); err != nil {
		return h, true, fmt.Errorf("%q: the product: %w", msg, err)
	}
	h.token = parts[len(parts)-1]
	if release {
		return h, true, nil
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || ms <= 0 || ms > maxHold.Milliseconds() {
		return h, true, fmt.Errorf("%q: the hold's milliseconds must be a whole number from 1 to %d", msg, maxHold.Milliseconds())
	}
	h.hold = time.Duration(ms) * time.Millisecond
	return h, true, nil
}
