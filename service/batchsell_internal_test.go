package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
)

// BenchmarkBatchSell is the hot path's batch layer alone: one hold's
// critical section (its way.hold) selling a batch of n purchases of one
// product, each of a user of its own under a limit of one unit, on the
// real MariaDB, with no lock round and no HTTP around it, in each form of
// the sale store: "mysql" (three round trips), "portable" (GORM's
// statements one at a time). Each iteration is one hold.
func BenchmarkBatchSell(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		for _, form := range []string{"mysql", "portable"} {
			b.Run(fmt.Sprintf("batch=%d/%s", n, form), func(b *testing.B) { benchBatchSell(b, n, form) })
		}
	}
}

func benchBatchSell(b *testing.B, n int, form string) {
	ctx := context.Background()
	s, _ := newOnMySQL(b, testenv.MySQL(b), Config{PerUserLimit: 1, Fencing: true}, form == "portable")
	prod, err := s.CreateProduct(ctx, "bench", int64(n)*int64(b.N+1))
	if err != nil {
		b.Fatalf("CreateProduct: %v", err)
	}
	st, _ := LookupStrategy("redlock")
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		h := hold{ps: make([]Purchase, n), arrived: make([]time.Time, n)}
		for j := range h.ps {
			h.ps[j] = Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-%d-%d", i, j), Quantity: 1, Strategy: st.Name,
				RequestID: fmt.Sprintf("r-%d-%d", i, j)}
			h.arrived[j] = time.Now()
		}
		as, err := st.way.hold(s, ctx, st, h)
		if err != nil {
			b.Fatalf("hold(%d purchases) = %v", n, err)
		}
		for j, a := range as {
			if a.Err != nil || a.R.Order.ID == 0 {
				b.Fatalf("purchase %s: %+v, %v; want an order", show(h.ps[j]), a.R, a.Err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "purchases/s")
	a, err := s.Audit(ctx, prod.ID)
	if err != nil || !a.Consistent || a.UnitsSold != int64(n*b.N) {
		b.Fatalf("Audit = %+v, %v; want %d units sold, consistent", a, err, n*b.N)
	}
}

// show is a purchase as a failure names it.
func show(p Purchase) string {
	return fmt.Sprintf("product %d, user %q, request %q", p.ProductID, p.UserID, p.RequestID)
}
