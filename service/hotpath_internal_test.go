package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/metrics"
)

// TestSoldOutMessage: the sold-out answer put together by hand reads
// exactly as fmt's "product %d has %d left", with a negative stock (an
// oversold product) shown as 0, for the extremes of both numbers.
func TestSoldOutMessage(t *testing.T) {
	for _, id := range []int64{1, 7, 424242, -3, math.MaxInt64, math.MinInt64} {
		for _, left := range []int64{0, 1, 99, -1, math.MaxInt64, math.MinInt64} {
			err := soldOut(id, left)
			want := fmt.Sprintf("product %d has %d left", id, max(left, 0))
			if got := failure.MessageOf(err); got != want {
				t.Errorf("soldOut(%d, %d) message = %q; want %q", id, left, got, want)
			}
			if !errors.Is(err, failure.ErrSoldOut) || failure.CodeOf(err) != failure.CodeSoldOut {
				t.Errorf("soldOut(%d, %d) = %v (code %q); want %v, code %q", id, left, err, failure.CodeOf(err), failure.ErrSoldOut, failure.CodeSoldOut)
			}
		}
	}
}

// TestErrorCodeAndMessage: the code and message are those of the first
// *failure.Error in the chain, however deep; a context's end is unavailable and
// anything else internal, with its own text.
func TestErrorCodeAndMessage(t *testing.T) {
	wrapped := fmt.Errorf("purchase product 3: %w", errors.Join(errors.New("other"), failure.ErrLockTimeout.Because(errors.New("cause"))))
	for _, tc := range []struct {
		err  error
		code failure.Code
		msg  string
	}{
		{nil, "", ""},
		{wrapped, failure.CodeLockTimeout, failure.ErrLockTimeout.Message},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), failure.CodeUnavailable, "read: context deadline exceeded"},
		{context.Canceled, failure.CodeUnavailable, "context canceled"},
		{errors.New("a bug"), failure.CodeInternal, "a bug"},
	} {
		if got := failure.CodeOf(tc.err); got != tc.code {
			t.Errorf("failure.CodeOf(%v) = %q; want %q", tc.err, got, tc.code)
		}
		if tc.err == nil {
			continue
		}
		if got := failure.MessageOf(tc.err); got != tc.msg {
			t.Errorf("failure.MessageOf(%v) = %q; want %q", tc.err, got, tc.msg)
		}
	}
}

// sameStrategy says a and b say the same and sell the same way.
func sameStrategy(a, b Strategy) bool {
	return a.Name == b.Name && a.Guard == b.Guard && a.Description == b.Description && a.Safe == b.Safe &&
		a.OnEmbedded == b.OnEmbedded && a.Lined() == b.Lined() && a.way.locked == b.way.locked &&
		a.way.fenced == b.way.fenced && a.way.renewed == b.way.renewed && a.way.deferred == b.way.deferred &&
		(a.way.sell == nil) == (b.way.sell == nil)
}

// TestLookupStrategy: every strategy of the table is found by its name,
// as the table has it, in the table's order; nothing else is found, and a
// table handed out is the caller's to change.
func TestLookupStrategy(t *testing.T) {
	all := StrategyTable()
	order := strategyOrder()
	if len(all) != len(order) {
		t.Fatalf("StrategyTable() has %d strategies; want %d", len(all), len(order))
	}
	for i, st := range all {
		if st.Name != order[i] || st.Guard == "" || st.Description == "" {
			t.Errorf("StrategyTable()[%d] = %+v; want %q with a guard and a description", i, st, order[i])
		}
		if got, ok := LookupStrategy(st.Name); !ok || !sameStrategy(got, st) {
			t.Errorf("LookupStrategy(%q) = %+v, %v; want %+v, true", st.Name, got, ok, st)
		}
	}
	for _, name := range []string{"", "Redlock", "mutex", "none "} {
		if got, ok := LookupStrategy(name); ok || got.Name != "" || got.way.sell != nil {
			t.Errorf("LookupStrategy(%q) = %+v, %v; want the zero Strategy, false", name, got, ok)
		}
	}
	all[0].Description = "changed"
	if StrategyTable()[0].Description == "changed" {
		t.Error("a change to one StrategyTable() shows in the next; want a table of its own each time")
	}
}

// TestObservePurchaseSeries: every strategy and outcome counts in its own
// series once per purchase, the counter and the histogram alike, through
// the series metrics.New resolved; a pair it did not make is counted too.
func TestObservePurchaseSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	type pair struct{ strategy, outcome string }
	want := map[pair]uint64{}
	for _, st := range StrategyTable() {
		for i, o := range metrics.PurchaseOutcomes() {
			var (
				r   Receipt
				err error
			)
			switch o {
			case "ok":
			case "replayed":
				r.Replayed = true
			default:
				err = fmt.Errorf("purchase: %w", &failure.Error{Code: failure.Code(o), Message: o})
			}
			// A different number of purchases per series, so that one
			// counted in another's series shows.
			for range i + 1 {
				m.Purchase(st.Name, outcome(r, err), time.Millisecond)
			}
			want[pair{st.Name, o}] = uint64(i + 1)
		}
	}
	m.Purchase("bogus", outcome(Receipt{}, context.Canceled), time.Millisecond)
	want[pair{"bogus", string(failure.CodeUnavailable)}] = 1

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	got := map[string]map[pair]uint64{"seckill_purchases_total": {}, "seckill_purchase_duration_seconds": {}}
	for _, mf := range mfs {
		series, ok := got[mf.GetName()]
		if !ok {
			continue
		}
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			p := pair{labels["strategy"], labels["outcome"]}
			if s.GetHistogram() != nil {
				series[p] = s.GetHistogram().GetSampleCount()
			} else {
				series[p] = uint64(s.GetCounter().GetValue())
			}
		}
	}
	for _, name := range []string{"seckill_purchases_total", "seckill_purchase_duration_seconds"} {
		if len(got[name]) != len(want) {
			t.Errorf("%s has %d series; want %d", name, len(got[name]), len(want))
		}
		for p, n := range want {
			if got[name][p] != n {
				t.Errorf("%s{strategy=%q,outcome=%q} counts %d; want %d", name, p.strategy, p.outcome, got[name][p], n)
			}
		}
	}
}
