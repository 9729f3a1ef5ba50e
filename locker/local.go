package locker

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"
)

// Local is one in-process lock per key: a map of keys to their holder and a
// FIFO queue of waiters, under one mutex. Unlike a sync.Mutex it honours the
// context and the wait, and its lease runs out after the TTL like the Redis
// locks' do, so that a holder that never unlocks cannot block a key forever.
// A release hands the lock straight to the longest waiter (no polling), and
// a key nobody holds or waits for is forgotten.
//
// Safe only when every buyer runs in this one process and finishes within
// the lease. It fails across processes: two instances of the service each
// have their own map, both grant the same key, and the stock is oversold. A
// holder that overruns the TTL loses the lock to the next waiter while it
// still works; its Unlock then returns ErrNotHeld.
type Local struct {
	opts Options

	mu   sync.Mutex
	keys map[string]*localKey
}

var _ Locker = (*Local)(nil)

// localKey is the state of one key; it exists only while the key is held.
type localKey struct {
	name    string
	holder  *localLease
	waiters list.List // of *localWaiter, oldest first
}

// localWaiter is a Lock call waiting for its turn; ready is closed once the
// lock has been handed to lease.
type localWaiter struct {
	lease *localLease
	ready chan struct{}
}

// NewLocal returns an in-process Local with no keys held.
func NewLocal(opts Options) *Local {
	return &Local{opts: opts.withDefaults(), keys: make(map[string]*localKey)}
}

// TryLock takes key if nobody holds it or waits for it, and returns at
// once either way.
func (l *Local) TryLock(ctx context.Context, key string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: local %s: %w", ErrNotAcquired, key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k, ok := l.keys[key]
	if !ok {
		k = &localKey{name: key}
		l.keys[key] = k
	}
	if k.holder != nil || k.waiters.Len() > 0 {
		return nil, fmt.Errorf("%w: local %s is held", ErrNotAcquired, key)
	}
	lease := &localLease{l: l, key: key}
	l.grantLocked(k, lease)
	return lease, nil
}

// Lock takes key, waiting in line until it is released or its holder's
// lease runs out, ctx ends or the wait runs out.
func (l *Local) Lock(ctx context.Context, key string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: local %s: %w", ErrNotAcquired, key, err)
	}
	lease := &localLease{l: l, key: key}

	l.mu.Lock()
	k, ok := l.keys[key]
	if !ok {
		k = &localKey{name: key}
		l.keys[key] = k
	}
	if k.holder == nil && k.waiters.Len() == 0 {
		l.grantLocked(k, lease)
		l.mu.Unlock()
		return lease, nil
	}
	w := &localWaiter{lease: lease, ready: make(chan struct{})}
	elem := k.waiters.PushBack(w)
	l.mu.Unlock()

	wait := time.NewTimer(l.opts.Wait)
	defer wait.Stop()
	var why error
	select {
	case <-w.ready:
		return lease, nil
	case <-ctx.Done():
		why = ctx.Err()
	case <-wait.C:
		why = context.DeadlineExceeded
	}

	l.mu.Lock()
	select {
	case <-w.ready:
		// Handed over while we were giving up: pass it on.
		l.releaseLocked(k, lease)
	default:
		k.waiters.Remove(elem)
		l.forgetLocked(k)
	}
	l.mu.Unlock()
	return nil, fmt.Errorf("%w: local %s: %w", ErrNotAcquired, key, why)
}

// grantLocked makes lease the holder of k and arms its expiry.
func (l *Local) grantLocked(k *localKey, lease *localLease) {
	k.holder = lease
	lease.expiry = time.AfterFunc(l.opts.TTL, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if k.holder == lease { // not unlocked in the meantime
			l.releaseLocked(k, lease)
		}
	})
}

// releaseLocked takes k from lease and hands it to the oldest waiter, or
// forgets k when nobody waits and tells the key's watchers (those that
// TryLock rather than wait in Lock's line) that it is free.
func (l *Local) releaseLocked(k *localKey, lease *localLease) {
	lease.expiry.Stop()
	k.holder = nil
	if front := k.waiters.Front(); front != nil {
		w := k.waiters.Remove(front).(*localWaiter)
		l.grantLocked(k, w.lease)
		close(w.ready)
		return
	}
	l.forgetLocked(k)
	l.opts.Releases.Notify(k.name)
}

// forgetLocked drops k from the map when it is free and nobody waits, so
// that memory does not grow with the number of keys ever locked.
func (l *Local) forgetLocked(k *localKey) {
	if k.holder == nil && k.waiters.Len() == 0 && l.keys[k.name] == k {
		delete(l.keys, k.name)
	}
}

type localLease struct {
	l      *Local
	key    string
	expiry *time.Timer // guarded by l.mu
}

// Held says whether the key is still this lease's: not run out, not
// unlocked.
func (le *localLease) Held(context.Context) (bool, error) {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	k, ok := le.l.keys[le.key]
	return ok && k.holder == le, nil
}

// Unlock releases the key, or wraps ErrNotHeld when the lease already ran
// out (or was unlocked before).
func (le *localLease) Unlock(context.Context) error {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	k, ok := le.l.keys[le.key]
	if !ok || k.holder != le {
		return fmt.Errorf("%w: local %s", ErrNotHeld, le.key)
	}
	le.l.releaseLocked(k, le)
	return nil
}
