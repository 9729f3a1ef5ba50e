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
// ends or wait runs out, sleeping a random delay from [minDelay, maxDelay)
// between calls. It is the one retry loop every kind shares.
func retry(ctx context.Context, wait, minDelay, maxDelay time.Duration, try func(context.Context) (Lease, error)) (Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		lease, err := try(ctx)
		if err == nil {
			return lease, nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrNotAcquired) {
			return nil, notAcquired(err)
		}
		timer.Reset(jitter(minDelay, maxDelay))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-timer.C:
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
