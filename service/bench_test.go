package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service"
)

// benchGoroutines is about how many buyers RunParallel runs at once.
const benchGoroutines = 32

// BenchmarkPurchase buys one unit of one hot product per operation, from
// about benchGoroutines concurrent buyers with users of their own, under
// each strategy, on the real MySQL and Redis nodes, with the default
// per-user limit of one unit (so the limit's row is written every time).
// The strategies whose buyers wait in line run with the default batch and
// again with batch=1 (a lock per purchase, as in the articles). The stock is reset to
// b.N before each run so that every purchase sells (none oversells nothing
// it could not sell anyway: it is measured only). Besides ns/op it reports
// purchases/s over the whole run.
func BenchmarkPurchase(b *testing.B) {
	f := newFixture(b, nil)
	ctx := context.Background()
	type benchCase struct {
		name, strategy string
		batch          int
	}
	var cases []benchCase
	for _, st := range service.StrategyTable() {
		cases = append(cases, benchCase{st.Name, st.Name, 0})
		if st.Lined {
			cases = append(cases, benchCase{st.Name + "/batch=1", st.Name, 1})
		}
	}
	for _, bc := range cases {
		strategy := bc.strategy
		// A wait long enough that no buyer gives up: the benchmark measures
		// throughput, not timeouts.
		in := f.instance(settings{Strategy: strategy, Fencing: true, PerUserLimit: 1, Wait: time.Minute})
		prod := in.product(b, 0)
		b.Run(bc.name, func(b *testing.B) {
			if _, err := in.svc.SetStock(ctx, prod.ID, int64(b.N)); err != nil {
				b.Fatalf("SetStock(%d, %d) = %v; want nil", prod.ID, b.N, err)
			}
			testenv.RunParallel(b, benchGoroutines, func() func(int64) error {
				return func(n int64) error {
					p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-%d", n), Quantity: 1, Batch: bc.batch}
					if _, err := in.svc.Purchase(ctx, p); err != nil {
						return fmt.Errorf("Purchase(%s) = %v; want nil", show(p), err)
					}
					return nil
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "purchases/s")
			a, err := in.svc.Audit(ctx, prod.ID)
			switch {
			case err != nil:
				b.Errorf("Audit(%d) = %v; want nil", prod.ID, err)
			case strategy != "none" && (a.Stock != 0 || !a.Consistent):
				b.Errorf("Audit(%d) = %+v; want stock 0, consistent", prod.ID, a)
			}
		})
	}
}

// BenchmarkSoldOut answers purchases of a product this instance has seen
// sold out, from its memory, with allocations: the path a flash sale takes
// for nearly every request once the stock is gone, which touches neither
// MySQL nor Redis (with a request_id of its own, the memory of the
// product's orders answers too).
func BenchmarkSoldOut(b *testing.B) {
	f := newFixture(b, nil)
	ctx := context.Background()
	in := f.instance(settings{Strategy: "redlock", Fencing: true, PerUserLimit: 1})
	prod := in.product(b, 0)
	for _, bc := range []struct{ name, requestID string }{{"no_request_id", ""}, {"request_id", "r-bench"}} {
		b.Run(bc.name, func(b *testing.B) {
			p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: bc.requestID}
			// The first answer reads the stock; from then on the memory
			// answers.
			if _, err := in.svc.Purchase(ctx, p); !errors.Is(err, service.ErrSoldOut) {
				b.Fatalf("Purchase(%s) = %v; want sold out", show(p), err)
			}
			var failures atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := in.svc.Purchase(ctx, p); !errors.Is(err, service.ErrSoldOut) {
						failures.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := failures.Load(); n > 0 {
				b.Errorf("%d of %d purchases of a sold-out product did not answer sold out", n, b.N)
			}
		})
	}
}
