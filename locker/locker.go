package locker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Locker grants exclusive use of a named resource.
type Locker interface {
	// TryLock makes one attempt to take key and returns at once. Not
	// getting the lock wraps ErrNotAcquired; when too few of the lock's
	// nodes answered to tell, it wraps ErrUnavailable too. The attempt runs
	// on a context of its own: a ctx that ends while it is in flight never
	// leaves a lock behind (what may have been taken is released, with a
	// compare-and-delete, before TryLock returns ctx's error).
	TryLock(ctx context.Context, key string) (Lease, error)
	// Lock blocks until key is held, ctx ends or the wait runs out, trying
	// again while others hold the key. Every way of not getting the lock
	// returns an error that wraps ErrNotAcquired; it gives up at once, with
	// ErrUnavailable, when too few nodes answer.
	Lock(ctx context.Context, key string) (Lease, error)
}

// Lease is a lock that was granted. It is used by one goroutine.
type Lease interface {
	// Unlock gives the lock back. It wraps ErrNotHeld when the lease had
	// already run out or been taken over, so that nothing was released.
	Unlock(ctx context.Context) error
	// Held says whether the lock is still this lease's: not run out, not
	// given back, not taken over, as the kind itself can tell (each kind's
	// doc says how). An error means it could not tell (a node did not
	// answer).
	Held(ctx context.Context) (bool, error)
}

var (
	// ErrNotAcquired is returned by Lock and TryLock when the lock could
	// not be had: others held it, the context ended first or too few nodes
	// answered.
	ErrNotAcquired = errors.New("locker: not acquired")
	// ErrUnavailable is wrapped, beside ErrNotAcquired, when too few of the
	// lock's nodes answered to grant or refuse it: an outage, not
	// contention.
	ErrUnavailable = errors.New("locker: too few nodes answered")
	// ErrNotHeld is returned by Unlock when the lease was no longer held.
	ErrNotHeld = errors.New("locker: lock no longer held")
)

// Options are the settings every kind of lock shares.
type Options struct {
	// TTL is the lease: a holder that never unlocks (or renews) blocks
	// others no longer than this. The default is DefaultTTL.
	TTL time.Duration
	// Wait is the longest Lock waits before it gives up with
	// ErrNotAcquired. The default is DefaultWait.
	Wait time.Duration
	// Releases wakes a waiting Lock when the key is released; nil means
	// Lock polls at its fallback delay.
	Releases *Releases
	// Fallback is the longest a waiting Lock sleeps when no release is
	// announced (it sleeps a random time from half of it to it). The
	// default is each kind's range: token 25-75 ms, setnx 50-200 ms, redlock
	// 50-250 ms.
	Fallback time.Duration
	// Yield is how long a Redlock's Lock of a key it gave back after a
	// contended hold first waits for another holder to take the key and
	// give it back (redlock.go, handover). The default is 10 ms; negative: never.
	Yield time.Duration
}

// The defaults of Options.TTL and Options.Wait (the service's settings
// SECKILL_LOCK_TTL and SECKILL_LOCK_WAIT default to them too).
const (
	DefaultTTL  = 2 * time.Second
	DefaultWait = 5 * time.Second
)

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Yield == 0 {
		o.Yield = defaultYield
	}
	return o
}

// cleanupBudget bounds the compare-and-delete that takes back a lock whose
// attempt's outcome is unknown, or that was granted to a caller who has
// gone.
const cleanupBudget = 2 * time.Second

// attemptTimeout bounds one attempt's round trips: an answer later than a
// lease is worthless, and one second is already far longer than a healthy
// node takes.
func (o Options) attemptTimeout() time.Duration { return min(o.TTL, time.Second) }

// detached returns a context that ctx's cancellation does not reach, with
// its own deadline: the attempt or clean-up run on it finish (or time out)
// whatever the caller does meanwhile.
func detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// handBack ends an attempt whose caller went away while it was in flight:
// the lock it got is released on a context of its own, and the caller gets
// its context's error.
func handBack(ctx context.Context, kind, key string, lease Lease) error {
	cctx, cancel := detached(ctx, cleanupBudget)
	defer cancel()
	err := fmt.Errorf("%w: %s %s: %w", ErrNotAcquired, kind, key, context.Cause(ctx))
	if uerr := lease.Unlock(cctx); uerr != nil && !errors.Is(uerr, ErrNotHeld) {
		return errors.Join(err, fmt.Errorf("locker: %s %s: release after cancel: %w", kind, key, uerr))
	}
	return err
}

// unavailable marks err, a node's failure to answer, as ErrUnavailable.
func unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }
