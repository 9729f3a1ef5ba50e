package locker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Releases tells the waiters of a key when it is released, on this
// instance or any other: a Redis lock publishes on a channel named after
// its key when it releases it (as Redisson's LockPubSub does), every
// instance subscribes to the channels of its keys' prefix, and Local
// notifies in process. A waiter that Watches a key before it tries the lock
// is woken by the next release instead of polling; a message lost (a
// subscription reconnecting, a node down) costs only the waiter's short
// fallback delay.
//
// A nil *Releases is valid and wakes nobody: lockers then wait out their
// fallback delay.
type Releases struct {
	mu       sync.Mutex
	watchers map[string]map[*Watch]struct{}

	subs []*redis.PubSub
	wg   sync.WaitGroup
}

// NewReleases returns a Releases that wakes waiters in this process only,
// until Subscribe adds Redis nodes.
func NewReleases() *Releases {
	return &Releases{watchers: make(map[string]map[*Watch]struct{})}
}

// Subscribe subscribes to the release channels of every key that starts
// with prefix on each node, and waits (within ctx) until each node that
// answers has confirmed: a release published after Subscribe returns wakes
// this instance's waiters. A node that is down does not fail it; go-redis
// subscribes again when the node is back.
func (r *Releases) Subscribe(ctx context.Context, clients []redis.UniversalClient, prefix string) error {
	var errs []error
	for i, c := range clients {
		sub := c.PSubscribe(ctx, prefix+"*")
		// The confirmation comes first on the connection; reading it here,
		// before Channel takes the connection over, makes sure it is in place.
		if _, err := sub.ReceiveTimeout(ctx, time.Second); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
		}
		r.subs = append(r.subs, sub)
		ch := sub.Channel(redis.WithChannelSize(256))
		r.wg.Go(func() {
			for msg := range ch {
				r.notify(msg.Channel, msg.Payload)
			}
		})
	}
	if len(errs) == len(clients) && len(clients) > 0 {
		return fmt.Errorf("locker: subscribe to releases: %w", errors.Join(errs...))
	}
	return nil
}

// Close ends the subscriptions.
func (r *Releases) Close() error {
	if r == nil {
		return nil
	}
	var errs []error
	for _, sub := range r.subs {
		if err := sub.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	r.wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("locker: close release subscriptions: %w", errors.Join(errs...))
	}
	return nil
}

// releasedMessage is the release message of the single-node kinds
// (setnx's unlock, and unlock.lua, which takes it as an argument): it
// names no value.
const releasedMessage = "released"

// Notify wakes every waiter of key (a release in process, which names no
// value).
func (r *Releases) Notify(key string) { r.notify(key, "") }

// notify tells key's waiters of a release message: value is the value
// released, releasedMessage from the single-node kinds, empty in process. A
// watch wakes at once, unless it waits for others' releases only and
// value is the one it excepts, or it needs more than one message and value
// names a holder's value: then it wakes at the need-th message of that
// value (one release announced by that many nodes), once.
func (r *Releases) notify(key, value string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.watchers[key] {
		if w.except != "" && w.except == value {
			continue
		}
		if w.need > 1 && value != "" && value != releasedMessage {
			if value != w.value {
				w.value, w.heard = value, 0
			}
			if w.heard++; w.heard != w.need {
				continue // not yet a majority, or past it: woken already
			}
		}
		select {
		case w.c <- struct{}{}:
		default: // already woken, not yet awake
		}
	}
}

// Watch is a waiter's interest in one key's releases.
type Watch struct {
	r   *Releases
	key string
	c   chan struct{}
	// except is the value whose release does not wake it (none when
	// empty).
	except string
	// need is how many messages of one release wake it; heard counts
	// those of the release of value, the last one heard (guarded by r.mu).
	need, heard int
	value       string
}

// Watch registers interest in key's releases until Stop. Register before
// trying the lock, so that a release in between is not missed.
func (r *Releases) Watch(key string) *Watch { return r.WatchOthers(key, "", 1) }

// WatchOthers is Watch, for the releases of key by holders of any value
// but value (none when empty): a Redis lock that announces its value
// (release.lua) does not wake a watch for the others with its own release.
// It wakes at the need-th message of each release: a Redlock release
// announces its value on each node, and a waiter woken by the first node,
// before the others have released too, would try a round that cannot take
// a majority yet. A release whose messages do not reach need (a message
// lost, a node down while the holder held only a majority) leaves the
// waiter to its fallback delay.
func (r *Releases) WatchOthers(key, value string, need int) *Watch {
	w := &Watch{r: r, key: key, c: make(chan struct{}, 1), except: value, need: max(need, 1)}
	if r == nil {
		return w
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watchers[key] == nil {
		r.watchers[key] = make(map[*Watch]struct{})
	}
	r.watchers[key][w] = struct{}{}
	return w
}

// Released is ready after each release of the key that wakes the watch
// (at most one pending).
func (w *Watch) Released() <-chan struct{} { return w.c }

// Stop ends the watch.
func (w *Watch) Stop() {
	if w.r == nil {
		return
	}
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	delete(w.r.watchers[w.key], w)
	if len(w.r.watchers[w.key]) == 0 {
		delete(w.r.watchers, w.key)
	}
}

// Wait blocks until the key is released, fallback passes or ctx ends.
func (w *Watch) Wait(ctx context.Context, fallback time.Duration) error {
	t := time.NewTimer(fallback)
	defer t.Stop()
	select {
	case <-w.c:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retry calls try until it returns a lease, fails with anything but plain
// contention (ErrUnavailable, or an error that is not ErrNotAcquired), ctx
// ends or wait runs out. Between calls it waits for key's next release
// (opts.Releases: need messages of it, one per node that must have
// released) or, when no release is announced, a random fallback delay
// from [minDelay, maxDelay). It is the one retry loop the Redis kinds share
// (Local queues its waiters itself).
func retry(ctx context.Context, opts Options, key string, need int, minDelay, maxDelay time.Duration, try func(context.Context) (Lease, error)) (Lease, error) {
	if opts.Fallback > 0 {
		minDelay, maxDelay = opts.Fallback/2, opts.Fallback
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Wait)
	defer cancel()
	watch := opts.Releases.WatchOthers(key, "", need) // before the first try: a release in between wakes us
	defer watch.Stop()
	for {
		lease, err := try(ctx)
		if err == nil {
			return lease, nil
		}
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			// The try ended on its own terms while ctx ended: say both.
			return nil, fmt.Errorf("%w: %w", notAcquired(err), cerr)
		}
		if ctx.Err() != nil || errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrNotAcquired) {
			return nil, notAcquired(err)
		}
		if werr := watch.Wait(ctx, jitter(minDelay, maxDelay)); werr != nil {
			return nil, fmt.Errorf("%w: %w", err, werr)
		}
	}
}

// jitter returns a random duration from [lo, hi).
func jitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo)
}

// notAcquired makes sure err wraps ErrNotAcquired.
func notAcquired(err error) error {
	if errors.Is(err, ErrNotAcquired) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotAcquired, err)
}
