package locker

import (
	"context"
	"sync"
	"time"
)

// Handing a contended key over. When two instances want one key, each
// waits for the other's release and then tries; but the instance that has
// just released it would try again at once too, and one of the two Redlock
// rounds would fail: three SET NX that take nothing, then redsync's
// release on every node (docs/figures.md has what that cost).
//
// So a Redlock that gives back a key it had to wait for (its Lock tried
// more than once, or was woken by another holder's release) starts
// watching, there and then, for another holder's release of the key (one
// announced by a majority of the nodes with another value than its own:
// release.lua names the value it released). Its next Lock of that key, if
// it comes within handoverMemory, first waits on that watch, up to
// Options.Yield and within its Wait: the instance that was waiting takes
// the key meanwhile, and the one that yielded tries once that holder is
// done, one round each, in turn. When nobody else wants the key any more,
// the yield runs out once, the round succeeds at the first try, and the
// key is no longer watched.

const (
	// defaultYield is Options.Yield's default: longer than another waiting
	// instance takes to hear the release and take the key (a Redlock round,
	// under a millisecond), and a bound on what a key nobody else wants any
	// more costs once.
	defaultYield = 10 * time.Millisecond
	// handoverMemory is how long after its release a key counts as
	// contended: a Lock that comes later does not yield.
	handoverMemory = time.Second
	// handoverKeys bounds how many keys are watched at once.
	handoverKeys = 1024
)

// handover watches the keys a locker gave back after a contended hold.
type handover struct {
	releases *Releases     // nil: no announcements, no yield
	need     int           // the messages of one release that make it (a majority of the nodes)
	wait     time.Duration // Options.Yield; not above 0: never

	mu    sync.Mutex
	keys  map[string]handedOver
	order []handedKey // the keys as given back, oldest first
}

// handedOver is a key given back: the watch for the others' releases of
// it, and when.
type handedOver struct {
	watch *Watch
	at    time.Time
}

// handedKey is one entry of handover.order.
type handedKey struct {
	key string
	at  time.Time
}

// released starts watching for the others' releases of key, which this
// locker gave back, held by value, after a contended hold.
func (h *handover) released(key, value string) {
	if h.releases == nil || h.wait <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == nil {
		h.keys = make(map[string]handedOver)
	}
	now := time.Now()
	h.forget(key)
	// The oldest first: those past handoverMemory will never be yielded for.
	for len(h.order) > 0 && now.Sub(h.order[0].at) > handoverMemory {
		if e, ok := h.keys[h.order[0].key]; ok && e.at.Equal(h.order[0].at) {
			h.forget(h.order[0].key)
		}
		h.order = h.order[1:]
	}
	if len(h.keys) >= handoverKeys {
		return // a yield is an optimisation: not watching costs one race
	}
	h.keys[key] = handedOver{watch: h.releases.WatchOthers(key, value, h.need), at: now}
	h.order = append(h.order, handedKey{key: key, at: now})
}

// forget stops watching key. The caller holds h.mu.
func (h *handover) forget(key string) {
	if e, ok := h.keys[key]; ok {
		e.watch.Stop()
		delete(h.keys, key)
	}
}

// take hands over the watch of key, when it was given back within
// handoverMemory; the caller stops it.
func (h *handover) take(key string) (*Watch, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.keys[key]
	if !ok {
		return nil, false
	}
	delete(h.keys, key)
	if time.Since(e.at) > handoverMemory {
		e.watch.Stop()
		return nil, false
	}
	return e.watch, true
}

// yield waits, before a Lock of key, for another holder to take key and
// give it back, when this locker last gave key back after a contended hold
// (see above), for up to h.wait or until ctx ends. It says whether that
// release woke it: the key is contended still.
func (h *handover) yield(ctx context.Context, key string) bool {
	w, ok := h.take(key)
	if !ok {
		return false
	}
	defer w.Stop()
	t := time.NewTimer(h.wait)
	defer t.Stop()
	select {
	case <-w.Released():
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
