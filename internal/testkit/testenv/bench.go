package testenv

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// RunParallel runs b.N operations from about goroutines goroutines at once
// (b.RunParallel), allocations reported and the timer stopped at the end.
// Each goroutine takes its operation from worker, so that it can keep
// state of its own; an operation is handed its number, from 1 to b.N, and
// returns what went wrong. Failures fail b with their count and the first.
func RunParallel(b *testing.B, goroutines int, worker func() func(n int64) error) {
	var (
		count    atomic.Int64
		failures atomic.Int64
		firstErr sync.Once
		first    error
	)
	b.ReportAllocs()
	b.SetParallelism(max(1, goroutines/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		op := worker()
		for pb.Next() {
			if err := op(count.Add(1)); err != nil {
				failures.Add(1)
				firstErr.Do(func() { first = err })
			}
		}
	})
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Errorf("%d of %d operations failed; the first: %v", n, b.N, first)
	}
}
