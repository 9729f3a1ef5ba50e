package locker

import (
	"context"
	"errors"
	"time"
)

// Locker grants exclusive use of a named resource.
type Locker interface {
	// Lock blocks until key is held, ctx ends or the wait runs out. Every
	// way of not getting the lock returns an error that wraps
	// ErrNotAcquired.
	Lock(ctx context.Context, key string) (Lease, error)
}

// Lease is a lock that was granted. It is used by one goroutine.
type Lease interface {
	// Unlock gives the lock back. It wraps ErrNotHeld when the lease had
	// already run out or been taken over, so that nothing was released.
	Unlock(ctx context.Context) error
}

var (
	// ErrNotAcquired is returned by Lock when the lock could not be had
	// within the wait, the context ended first or too few nodes answered.
	ErrNotAcquired = errors.New("locker: not acquired")
	// ErrNotHeld is returned by Unlock when the lease was no longer held.
	ErrNotHeld = errors.New("locker: lock no longer held")
)

// Options are the settings every kind of lock shares.
type Options struct {
	// TTL is the lease: a holder that never unlocks blocks others no longer
	// than this. The default is 8s.
	TTL time.Duration
	// Wait is the longest Lock waits before it gives up with
	// ErrNotAcquired. The default is 5s.
	Wait time.Duration
}

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = 8 * time.Second
	}
	if o.Wait <= 0 {
		o.Wait = 5 * time.Second
	}
	return o
}
