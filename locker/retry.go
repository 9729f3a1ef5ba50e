package locker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// retry calls try until it reports success, returns an error, ctx ends or
// wait runs out, sleeping a random delay from [minDelay, maxDelay) between
// calls. It is the one retry loop every hand-written kind shares.
func retry(ctx context.Context, wait, minDelay, maxDelay time.Duration, try func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		ok, err := try(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %w", ErrNotAcquired, ctx.Err())
			}
			return fmt.Errorf("%w: %w", ErrNotAcquired, err)
		}
		if ok {
			return nil
		}
		timer.Reset(jitter(minDelay, maxDelay))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNotAcquired, ctx.Err())
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
