package locker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	goredislib "github.com/redis/go-redis/v9"
)

// Redlock is the Redlock algorithm from github.com/go-redsync/redsync/v4 over
// independent Redis masters: SET key token NX PX ttl on every node at once,
// held when a majority (N/2+1) grants it with lease left over, released on
// every node otherwise and on Unlock.
//
// Safe while a majority of the nodes is up and keeps its keys, the holder
// finishes within the lease and no clock jumps. It fails when a holder
// overruns the lease (a pause, slow work): the lock expires and a second
// holder enters; only fencing protects the stock then. A node that restarts
// without persistence forgets the locks it granted, which can hand the same
// lock to two holders.
type Redlock struct {
	rs      *redsync.Redsync
	clients []goredislib.UniversalClient
	pools   []redsyncredis.Pool
	pipes   []*nodePipe
	opts    Options
	// handover remembers the keys given back after a contended hold.
	handover handover
}

var _ Locker = (*Redlock)(nil)

// nodeTimeoutFactor is how long, as a share of the lease, each node has to
// answer a step (SET NX, the extension, the release): 15%, 300 ms for the
// default 2 s lease, three times redsync's own default (5%), which healthy
// nodes on a loaded machine miss. The time spent waiting is taken off the
// lock's validity, so a slow round never lengthens what a holder is
// promised. A node that is down (its port closed) refuses at once; one
// that hangs costs a round 300 ms.
const nodeTimeoutFactor = 0.15

// NewRedlock returns a Redlock over clients, one per independent node.
// redsync talks to each node through a pipe (pipeline.go): the commands
// of the rounds under way at one moment, for any keys, go to the node as
// one pipeline.
func NewRedlock(clients []goredislib.UniversalClient, opts Options) *Redlock {
	pools := make([]redsyncredis.Pool, len(clients))
	pipes := make([]*nodePipe, len(clients))
	for i, c := range clients {
		pipes[i] = &nodePipe{client: c}
		pools[i] = newPipedPool(c, pipes[i])
	}
	r := &Redlock{rs: redsync.New(pools...), clients: clients, pools: pools, pipes: pipes, opts: opts.withDefaults()}
	r.handover = handover{releases: r.opts.Releases, need: r.quorum(), wait: r.opts.Yield}
	return r
}

// TryLock runs one Redlock round of redsync for key: SET NX PX on every
// node at once, held with a majority and lease left over, released on every
// node otherwise. The round runs on a context the caller cannot cancel
// (redsync bounds each step by its own timeout and, after a failed round,
// releases on a fresh one), so a caller who hangs up mid-round leaves no
// lock behind: what the round took is released before TryLock returns.
func (r *Redlock) TryLock(ctx context.Context, key string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: redlock %s: %w", ErrNotAcquired, key, err)
	}
	// A new Mutex per acquisition: a redsync Mutex must not be shared
	// between goroutines.
	m := r.rs.NewMutex(key, redsync.WithExpiry(r.opts.TTL), redsync.WithTries(1),
		redsync.WithTimeoutFactor(nodeTimeoutFactor))
	if err := m.TryLockContext(context.WithoutCancel(ctx)); err != nil {
		if nodesDown(err) > len(r.pools)-r.quorum() {
			return nil, fmt.Errorf("%w: %w: redlock %s: %w", ErrNotAcquired, ErrUnavailable, key, err)
		}
		return nil, fmt.Errorf("%w: redlock %s: %w", ErrNotAcquired, key, err)
	}
	lease := &redlockLease{m: m, clients: r.clients, until: m.Until(),
		nodeTimeout: time.Duration(float64(r.opts.TTL) * nodeTimeoutFactor)}
	if ctx.Err() != nil {
		return nil, handBack(ctx, "redlock", key, lease)
	}
	return lease, nil
}

// Lock tries TryLock again at each release of key a majority of the nodes
// announced or, when none is heard, after a fallback of 50-250 ms
// (redsync's own delay between rounds), until it holds key or the wait
// runs out. When it gave key back after a contended hold a moment ago, it
// first lets another waiter have it (handover, below), within the same wait.
func (r *Redlock) Lock(ctx context.Context, key string) (Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Wait)
	defer cancel()
	contended := r.handover.yield(ctx, key)
	tries := 0
	lease, err := retry(ctx, r.opts, key, r.quorum(), 50*time.Millisecond, 250*time.Millisecond, func(ctx context.Context) (Lease, error) {
		tries++
		return r.TryLock(ctx, key)
	})
	if l, ok := lease.(*redlockLease); ok && err == nil {
		l.handover, l.contended = &r.handover, contended || tries > 1
	}
	return lease, err
}

// quorum is the majority of the nodes: N/2+1.
func (r *Redlock) quorum() int { return len(r.pools)/2 + 1 }

// nodesDown counts the nodes a failed round could not reach: redsync joins
// one *redsync.RedisError per node that did not answer.
func nodesDown(err error) int {
	n := 0
	var walk func(error)
	walk = func(err error) {
		if _, ok := err.(*redsync.RedisError); ok {
			n++
			return
		}
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return n
}

type redlockLease struct {
	m *redsync.Mutex
	// clients are the nodes, for Held, which gives each nodeTimeout.
	clients     []goredislib.UniversalClient
	nodeTimeout time.Duration
	// until is redsync's Until as of the grant or the last Extend, kept
	// under mu: the watchdog extends while the holder may ask Held.
	mu    sync.Mutex
	until time.Time
	// handover is the locker's memory of contended keys (nil for a
	// TryLock's lease), and contended says this lease's Lock waited for
	// another holder: its release is remembered there.
	handover  *handover
	contended bool
}

var _ Renewable = (*redlockLease)(nil)

// Extend gives the lock a full TTL again on a majority of the nodes
// (redsync's Extend, a compare-and-pexpire on each), or wraps ErrNotHeld
// when a majority no longer holds this lease's value.
func (l *redlockLease) Extend(ctx context.Context) error {
	ok, err := l.m.ExtendContext(ctx)
	if ok {
		l.mu.Lock()
		l.until = l.m.Until()
		l.mu.Unlock()
		return nil
	}
	var taken *redsync.ErrTaken
	if errors.Is(err, redsync.ErrExtendFailed) || errors.As(err, &taken) || nodesDown(err) == 0 {
		return fmt.Errorf("%w: redlock %s: %v", ErrNotHeld, l.m.Name(), err)
	}
	return fmt.Errorf("locker: redlock extend %s: %w", l.m.Name(), err)
}

// Held says whether the lease is still valid by redsync's reckoning (its
// Until: the grant's start plus the TTL, less the time the round took and
// the clock drift, moved on by each Extend) and a majority of the nodes
// still hold its value: a node that restarted empty and granted the key to
// another holder counts against it. The nodes are asked at once, each
// within the share of the lease a Redlock round gives a node.
func (l *redlockLease) Held(ctx context.Context) (bool, error) {
	if !time.Now().Before(l.validUntil()) {
		return false, nil
	}
	type reply struct {
		holds bool
		err   error
	}
	replies := make([]reply, len(l.clients))
	var wg sync.WaitGroup
	for i, c := range l.clients {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, l.nodeTimeout)
			defer cancel()
			v, err := c.Get(nctx, l.m.Name()).Result()
			switch {
			case errors.Is(err, goredislib.Nil):
			case err != nil:
				replies[i].err = err
			default:
				replies[i].holds = v == l.m.Value()
			}
		})
	}
	wg.Wait()
	holding, unknown := 0, 0
	var errs []error
	for _, r := range replies {
		switch {
		case r.err != nil:
			unknown++
			errs = append(errs, r.err)
		case r.holds:
			holding++
		}
	}
	quorum := len(l.clients)/2 + 1
	if holding < quorum && holding+unknown >= quorum {
		// Those that did not answer could make a majority: it cannot tell.
		return false, fmt.Errorf("locker: redlock %s: read the holder: %w", l.m.Name(), errors.Join(errs...))
	}
	return holding >= quorum && time.Now().Before(l.validUntil()), nil
}

// validUntil is redsync's Until as of the grant or the last Extend.
func (l *redlockLease) validUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Unlock releases the lock on every node (redsync's compare-and-delete),
// each node's release announced on that node in the same round trip
// (announcing).
func (l *redlockLease) Unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(announcing(ctx))
	var taken *redsync.ErrTaken
	switch {
	case ok:
		// A majority released it; a node that was down forgets it at expiry.
		if l.contended && l.handover != nil {
			l.handover.released(l.m.Name(), l.m.Value())
		}
		return nil
	case errors.Is(err, redsync.ErrLockAlreadyExpired), errors.As(err, &taken):
		// Expired, or a majority now holds another holder's value.
		return fmt.Errorf("%w: redlock %s: %w", ErrNotHeld, l.m.Name(), err)
	case err != nil:
		return fmt.Errorf("locker: redlock unlock %s: %w", l.m.Name(), err)
	}
	return fmt.Errorf("%w: redlock %s", ErrNotHeld, l.m.Name())
}

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
