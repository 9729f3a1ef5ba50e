package every_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/every"
)

// TestRunCallsUntilCtxEnds: Run calls f at its period with ctx, and
// returns once ctx ends, calling f no more.
func TestRunCallsUntilCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		every.Run(ctx, time.Millisecond, func(got context.Context) {
			if got != ctx {
				t.Error("f was not given Run's context")
			}
			if calls.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("f was called %d times; want 3, none after the context ended", n)
	}
}

// TestStartStops: f runs at its period until stop, and never after stop
// has returned.
func TestStartStops(t *testing.T) {
	var calls atomic.Int64
	called := make(chan struct{}, 1)
	stop := every.Start(time.Millisecond, func() {
		calls.Add(1)
		select {
		case called <- struct{}{}:
		default:
		}
	})
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("f was never called")
	}
	stop()
	after := calls.Load()
	time.Sleep(20 * time.Millisecond)
	if n := calls.Load(); n != after {
		t.Errorf("f was called %d times after stop returned", n-after)
	}
}
