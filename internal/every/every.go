// Package every calls a function at a period, the loop the service's
// background work (the sweep, the stock cache's re-reads, the key set's
// re-reads) and the tools' samplers share.
package every

import (
	"context"
	"sync"
	"time"
)

// Run calls f every period, the first time one period from now, until ctx
// ends; f gets ctx. A call under way when ctx ends runs to its end.
func Run(ctx context.Context, period time.Duration, f func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

// Start calls f every period in a goroutine of its own, the first time one
// period from now, until stop is called; stop returns once f is no longer
// running and will not run again.
func Start(period time.Duration, f func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { Run(ctx, period, func(context.Context) { f() }) })
	return func() {
		cancel()
		wg.Wait()
	}
}
