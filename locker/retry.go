package locker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

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
