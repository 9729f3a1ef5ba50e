package locker

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Watchdog renews a lease while its holder works, as Redisson's watchdog
// does (redsync leaves renewal to its caller): every interval, a third of
// the TTL, it extends the lease to a full TTL again. It stops at Stop, when
// the holder's context ends, or when a renewal finds the lock gone; Lost
// is closed then, and the holder's write is left to fencing to refuse.
//
// So that a stop-the-world pause can be shown for what it is, Freeze stops
// the renewals as a frozen process would stop them, and Thaw lets them go
// on: a freeze longer than the lease loses it even with the watchdog on.
type Watchdog struct {
	lease Renewable
	every time.Duration

	mu     sync.Mutex
	frozen bool

	lost chan struct{}
	stop chan struct{}
	done chan struct{}
}

// Renewable is a lease whose TTL can be extended while it is held.
type Renewable interface {
	Lease
	// Extend gives the lease a full TTL again if it is still held; it wraps
	// ErrNotHeld when the lock is gone or someone else's.
	Extend(ctx context.Context) error
}

// StartWatchdog starts renewing lease every interval until ctx ends or
// Stop. A lease that cannot be renewed (not a Renewable: the classic SETNX
// recipe and the in-process lock keep their fixed lease) gets a watchdog
// that does nothing.
func StartWatchdog(ctx context.Context, lease Lease, every time.Duration) *Watchdog {
	w := &Watchdog{every: every, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	r, ok := lease.(Renewable)
	if !ok || every <= 0 {
		close(w.done)
		return w
	}
	w.lease = r
	go w.run(ctx)
	return w
}

func (w *Watchdog) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		frozen := w.frozen
		w.mu.Unlock()
		if frozen {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, w.every)
		err := w.lease.Extend(rctx)
		cancel()
		if errors.Is(err, ErrNotHeld) {
			close(w.lost)
			return
		}
		// Another error (a node slow or down) leaves the lease as it was:
		// the next tick tries again while the lease may still be valid.
	}
}

// Freeze stops the renewals until Thaw, as a process paused whole would.
func (w *Watchdog) Freeze() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frozen = true
}

// Thaw lets the renewals go on after Freeze.
func (w *Watchdog) Thaw() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frozen = false
}

// Lost is closed when a renewal found the lock gone.
func (w *Watchdog) Lost() <-chan struct{} { return w.lost }

// Stop ends the renewals and waits for the last one to finish; call it
// before unlocking. Freeze, Thaw and Stop do nothing on a nil *Watchdog.
func (w *Watchdog) Stop() {
	if w == nil {
		return
	}
	select {
	case <-w.done:
		return
	default:
	}
	close(w.stop)
	<-w.done
}
