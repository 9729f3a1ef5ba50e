package locker

import (
	"context"
	"sync"
	"time"
)

// Handing a contended key over. When two instances want one key, each
// waits for the other's release and then tries; but the instance that has
// just released it tries again at once too, and one of the two Redlock
// rounds fails: three SET NX that take nothing, then redsync's release on
// every node. Over two instances selling one hot product that was more
// than one failed round per hold, and the Redlock rounds took 29% of an
// instance's CPU against 8% with one instance.
//
// So a Redlock that gives back a key it had to wait for (its Lock tried
// more than once, or was woken by another holder's release) remembers it,
// and its next Lock of that key, if it comes within handoverMemory, first
// waits up to Options.Yield for another holder's release (release.lua
// announces the value it released, so its own release does not count):
// the instance that was waiting takes the key meanwhile, and the one that
// yielded tries once that holder is done, one round each, in turn. When
// nobody else wants the key any more, the yield runs out once, the round
// succeeds at the first try, and the key is no longer remembered.

const (
	// defaultYield is Options.Yield's default: longer than another waiting
	// instance takes to hear the release and take the key (a Redlock round,
	// under a millisecond), and a bound on what a key nobody else wants any
	// more costs once.
	defaultYield = 10 * time.Millisecond
	// handoverMemory is how long after its release a key counts as
	// contended: a Lock that comes later does not yield.
	handoverMemory = time.Second
	// handoverKeys bounds how many keys are remembered at once.
	handoverKeys = 1024
)

// handover remembers the keys a locker gave back after a contended hold,
// each with the value it held them by.
type handover struct {
	mu   sync.Mutex
	keys map[string]handedOver
}

// handedOver is a key given back: its value, and when.
type handedOver struct {
	value string
	at    time.Time
}

// released remembers that key, held by value, was given back after a
// contended hold.
func (h *handover) released(key, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = make(map[string]handedOver)
	}
	now := time.Now()
	if len(h.keys) >= handoverKeys {
		for k, e := range h.keys {
			if now.Sub(e.at) > handoverMemory {
				delete(h.keys, k)
			}
		}
		if len(h.keys) >= handoverKeys {
			return // a yield is an optimisation: not remembering one costs a race
		}
	}
	h.keys[key] = handedOver{value: value, at: now}
}

// take forgets key and returns the value it was given back by, when that
// was within handoverMemory.
func (h *handover) take(key string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.keys[key]
	delete(h.keys, key)
	return e.value, ok && time.Since(e.at) <= handoverMemory
}

// yield waits, before a Lock of key, for another holder to take key and
// give it back, when this locker last gave key back after a contended hold
// (see above), for up to wait: until need nodes have announced another
// holder's release. It says whether that woke it: the key is contended
// still.
func (h *handover) yield(ctx context.Context, releases *Releases, key string, need int, wait time.Duration) bool {
	value, ok := h.take(key)
	if !ok || releases == nil || wait <= 0 {
		return false
	}
	w := releases.WatchOthers(key, value, need)
	defer w.Stop()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.Released():
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
