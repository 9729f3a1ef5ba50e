package sale_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/seckill/seckill/sale"
)

func TestDecide(t *testing.T) {
	buy := func(rid, user string, q int64) sale.Purchase {
		return sale.Purchase{RequestID: rid, User: user, Quantity: q}
	}
	for _, tc := range []struct {
		name string
		st   sale.State
		ps   []sale.Purchase
		want []sale.Decision
		left int64
	}{
		{
			name: "sells in order until sold out",
			st:   sale.State{Product: 1, Stock: 3},
			ps:   []sale.Purchase{buy("", "a", 2), buy("", "b", 2), buy("", "c", 1), buy("", "d", 1)},
			want: []sale.Decision{
				{Verdict: sale.Sold, Left: 1, Units: 2},
				{Verdict: sale.SoldOut, Left: 1},
				{Verdict: sale.Sold, Left: 0, Units: 1},
				{Verdict: sale.SoldOut, Left: 0},
			},
			left: 0,
		},
		{
			name: "the limit counts what the buyer held and what the batch sold them",
			st:   sale.State{Product: 1, Stock: 10, Limit: 2, Units: map[string]int64{"a": 1}},
			ps:   []sale.Purchase{buy("", "a", 1), buy("", "a", 1), buy("", "b", 2), buy("", "b", 1), buy("", "c", 3)},
			want: []sale.Decision{
				{Verdict: sale.Sold, Left: 9, Units: 2},
				{Verdict: sale.OverLimit, Units: 2},
				{Verdict: sale.Sold, Left: 7, Units: 2},
				{Verdict: sale.OverLimit, Units: 2},
				{Verdict: sale.OverLimit, Units: 0},
			},
			left: 7,
		},
		{
			name: "no limit",
			st:   sale.State{Product: 1, Stock: 10, Units: map[string]int64{"a": 100}},
			ps:   []sale.Purchase{buy("", "a", 5)},
			want: []sale.Decision{{Verdict: sale.Sold, Left: 5, Units: 105}},
			left: 5,
		},
		{
			name: "sold out is decided before the limit",
			st:   sale.State{Product: 1, Stock: 1, Limit: 1, Units: map[string]int64{"a": 1}},
			ps:   []sale.Purchase{buy("", "a", 2)},
			want: []sale.Decision{{Verdict: sale.SoldOut, Left: 1}},
			left: 1,
		},
		{
			name: "a used request ID replays its order, or is a reuse",
			st: sale.State{Product: 1, Stock: 5, Used: map[string]sale.Prior{
				"r1": {Product: 1, User: "a", Quantity: 1},
				"r2": {Product: 2, User: "b", Quantity: 1},
			}},
			ps: []sale.Purchase{buy("r1", "a", 1), buy("r1", "a", 2), buy("r1", "z", 1), buy("r2", "b", 1)},
			want: []sale.Decision{
				{Verdict: sale.Replay},
				{Verdict: sale.Reused},
				{Verdict: sale.Reused},
				{Verdict: sale.Reused}, // another product's order
			},
			left: 5,
		},
		{
			name: "a request ID sold in the batch is replayed by a later purchase",
			st:   sale.State{Product: 1, Stock: 5, Limit: 1},
			ps:   []sale.Purchase{buy("r", "a", 1), buy("r", "a", 1), buy("r", "b", 1), buy("", "a", 1)},
			want: []sale.Decision{
				{Verdict: sale.Sold, Left: 4, Units: 1},
				{Verdict: sale.ReplayOf, Of: 0},
				{Verdict: sale.Reused},
				{Verdict: sale.OverLimit, Units: 1},
			},
			left: 4,
		},
		{
			name: "a request ID refused in the batch is decided again",
			st:   sale.State{Product: 1, Stock: 1},
			ps:   []sale.Purchase{buy("r", "a", 2), buy("r", "a", 1), buy("r", "a", 1)},
			want: []sale.Decision{
				{Verdict: sale.SoldOut, Left: 1},
				{Verdict: sale.Sold, Left: 0, Units: 1},
				{Verdict: sale.ReplayOf, Of: 1},
			},
			left: 0,
		},
		{
			name: "nothing to decide",
			st:   sale.State{Product: 1, Stock: 3},
			want: []sale.Decision{},
			left: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			units := map[string]int64{}
			for u, n := range tc.st.Units {
				units[u] = n
			}
			out := sale.Decide(tc.st, tc.ps)
			if !reflect.DeepEqual(out.Decisions, tc.want) {
				t.Errorf("Decide(%+v, %+v).Decisions =\n%+v\nwant\n%+v", tc.st, tc.ps, out.Decisions, tc.want)
			}
			if out.Left != tc.left || out.Sold != tc.st.Stock-tc.left {
				t.Errorf("Decide(...) left %d, sold %d; want %d, %d", out.Left, out.Sold, tc.left, tc.st.Stock-tc.left)
			}
			if !reflect.DeepEqual(units, tc.st.Units) && !(len(units) == 0 && tc.st.Units == nil) {
				t.Errorf("Decide changed its state's units: %v, was %v", tc.st.Units, units)
			}
		})
	}
}

// TestDecideIsOneByOne: a batch decided at once answers as its purchases
// decided one at a time, each against what the one before left, do; and
// what it sells adds up: the units it reports per buyer are what they held
// plus what they bought, the stock never goes below zero, nobody passes
// the limit. Random batches over a few buyers and request IDs, so that
// replays, reuses, sell-outs and the limit all happen.
func TestDecideIsOneByOne(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		st := sale.State{Product: 1, Stock: r.Int64N(12), Limit: r.Int64N(4), Units: map[string]int64{}, Used: map[string]sale.Prior{}}
		for u := range 4 {
			if r.IntN(2) == 0 {
				st.Units[fmt.Sprintf("u%d", u)] = r.Int64N(3)
			}
		}
		if r.IntN(2) == 0 {
			st.Used["r0"] = sale.Prior{Product: 1 + r.Int64N(2), User: "u0", Quantity: 1}
		}
		ps := make([]sale.Purchase, r.IntN(10))
		for i := range ps {
			ps[i] = sale.Purchase{User: fmt.Sprintf("u%d", r.IntN(4)), Quantity: 1 + r.Int64N(3)}
			if r.IntN(2) == 0 {
				ps[i].RequestID = fmt.Sprintf("r%d", r.IntN(3))
			}
		}
		batch := sale.Decide(st, ps)

		// One by one: each purchase alone, on the state the ones before
		// left, the orders they made added to Used.
		one := sale.State{Product: 1, Stock: st.Stock, Limit: st.Limit, Units: map[string]int64{}, Used: map[string]sale.Prior{}}
		for u, n := range st.Units {
			one.Units[u] = n
		}
		for rid, p := range st.Used {
			one.Used[rid] = p
		}
		for i, p := range ps {
			d := sale.Decide(one, []sale.Purchase{p}).Decisions[0]
			want := batch.Decisions[i]
			if want.Verdict == sale.ReplayOf {
				want = sale.Decision{Verdict: sale.Replay}
			}
			if d != want {
				t.Fatalf("round %d: purchase %d %+v decided alone = %+v; in the batch %+v (state %+v, batch %+v)", round, i, p, d, batch.Decisions[i], st, ps)
			}
			if d.Verdict == sale.Sold {
				one.Stock -= p.Quantity
				one.Units[p.User] += p.Quantity
				if p.RequestID != "" {
					one.Used[p.RequestID] = sale.Prior{Product: 1, User: p.User, Quantity: p.Quantity}
				}
			}
		}
		if batch.Left != one.Stock || batch.Left < 0 || batch.Sold != st.Stock-batch.Left {
			t.Fatalf("round %d: batch left %d, sold %d; one by one left %d (from %d)", round, batch.Left, batch.Sold, one.Stock, st.Stock)
		}
		for u, n := range batch.Units {
			if n != one.Units[u] || st.Limit > 0 && n > st.Limit {
				t.Fatalf("round %d: batch says %s holds %d; one by one %d, limit %d", round, u, n, one.Units[u], st.Limit)
			}
		}
	}
}

func TestReplays(t *testing.T) {
	prior := sale.Prior{Product: 1, User: "a", Quantity: 2}
	for _, tc := range []struct {
		product int64
		p       sale.Purchase
		want    bool
	}{
		{1, sale.Purchase{RequestID: "r", User: "a", Quantity: 2}, true},
		{2, sale.Purchase{RequestID: "r", User: "a", Quantity: 2}, false},
		{1, sale.Purchase{RequestID: "r", User: "A", Quantity: 2}, false},
		{1, sale.Purchase{RequestID: "r", User: "a", Quantity: 1}, false},
	} {
		if got := sale.Replays(prior, tc.product, tc.p); got != tc.want {
			t.Errorf("Replays(%+v, %d, %+v) = %t; want %t", prior, tc.product, tc.p, got, tc.want)
		}
	}
}
