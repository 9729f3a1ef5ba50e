package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seckill/seckill/client"
)

// acquireLimit bounds the wait for a buyer to take a free lock.
const acquireLimit = 10 * time.Second

// LockAcquired returns how many purchases in has seen take strategy's lock:
// the service counts each when its hold begins, before its work.
func (in *Instance) LockAcquired(ctx context.Context, strategy string) (int, error) {
	m, err := in.Client.Metrics(ctx)
	if err != nil {
		return 0, fmt.Errorf("lab: %w", err)
	}
	return int(m.Sum("seckill_lock_wait_seconds", "strategy", strategy, "result", "acquired")), nil
}

// waitAcquired waits until in has seen strategy's lock taken more than
// before times: a buyer holds it now. It gives up after limit.
func waitAcquired(ctx context.Context, in *Instance, strategy string, before int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		n, err := in.LockAcquired(ctx, strategy)
		if err == nil && n > before {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab: %s took no %s lock within %s: %w", in.Name, strategy, limit, errors.Join(err, ctx.Err()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Holder sends a purchase of s on in, with o's work (hold_ms) or pause
// (pause_ms) inside the lock, and returns once it holds the lock; the
// channel gives its answer.
func (w *World) Holder(s *Series, in *Instance, o client.Override) (<-chan Answer, error) {
	before, err := in.LockAcquired(w.ctx, o.Strategy)
	if err != nil {
		return nil, err
	}
	c := w.BuyAsync(w.ctx, s, in, o)
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	held := make(chan error, 1)
	go func() { held <- waitAcquired(ctx, in, o.Strategy, before, acquireLimit) }()
	select {
	case err := <-held:
		if err != nil {
			return nil, err
		}
		return c, nil
	case a := <-c:
		// It answered without ever holding the lock.
		return nil, fmt.Errorf("lab: a buyer who was to hold the %s lock on %s got %s", o.Strategy, in.Name, a)
	}
}
