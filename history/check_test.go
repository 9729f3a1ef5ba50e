package history_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/history"
)

// h builds hand-made histories: times in microseconds from 0.
type h struct{ lines []history.Line }

func (b *h) stock(product, stock, at int64) *h {
	b.lines = append(b.lines, history.Line{Product: product, Stock: &stock, TimeNS: at * 1000})
	return b
}

// buy is a purchase of q by user over [start, end] answered status code;
// left is the remaining stock of a 2xx, which carries an order ID but for
// a 202 (a reservation).
func (b *h) buy(product int64, user string, q, start, end int64, status int, code string, left int64) *h {
	l := history.Line{Product: product, UserID: user, RequestID: "r-" + user, Quantity: q,
		StartNS: start * 1000, EndNS: end * 1000, Status: status, Code: code}
	if status/100 == 2 {
		l.RemainingStock = &left
	}
	if status == 200 || status == 201 {
		id := int64(len(b.lines))
		l.OrderID = &id
	}
	b.lines = append(b.lines, l)
	return b
}

func (b *h) ok(product int64, user string, q, start, end, left int64) *h {
	return b.buy(product, user, q, start, end, 201, "", left)
}

// promise is a 202: a reservation under reserve, its units taken, its
// order to be written later.
func (b *h) promise(product int64, user string, q, start, end, left int64) *h {
	return b.buy(product, user, q, start, end, 202, "", left)
}

// cancel is a cancel of order (the index of its purchase's line) of q
// units over [start, end] answered status code.
func (b *h) cancel(product, order, q, start, end int64, status int, code string) *h {
	b.lines = append(b.lines, history.Line{Op: "cancel", Product: product, OrderID: &order, Quantity: q,
		StartNS: start * 1000, EndNS: end * 1000, Status: status, Code: code})
	return b
}

func (b *h) soldOut(product int64, user string, q, start, end int64) *h {
	return b.buy(product, user, q, start, end, 409, "sold_out", 0)
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		h         *h
		want      bool
		undersold int
		mention   string // in the violation
	}{
		{name: "sequential sale", want: true, h: new(h).stock(1, 2, 0).
			ok(1, "a", 1, 1, 2, 1).ok(1, "b", 1, 3, 4, 0).soldOut(1, "c", 1, 5, 6)},
		{name: "concurrent answers in either order", want: true, h: new(h).stock(1, 2, 0).
			ok(1, "a", 1, 1, 10, 0).ok(1, "b", 1, 2, 9, 1).soldOut(1, "c", 1, 3, 11)},
		{name: "oversell: two orders of the last unit", want: false, mention: "buys 1", h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 5, 0).ok(1, "b", 1, 2, 6, 0)},
		{name: "two orders that took the same unit", want: false, h: new(h).stock(1, 2, 0).
			ok(1, "a", 1, 1, 5, 1).ok(1, "b", 1, 2, 6, 1)},
		{name: "wrong remaining stock", want: false, h: new(h).stock(1, 5, 0).
			ok(1, "a", 1, 1, 2, 3)},
		{name: "undersell: sold_out with stock left", want: false, undersold: 1, mention: "sold_out", h: new(h).stock(1, 5, 0).
			ok(1, "a", 1, 1, 2, 4).soldOut(1, "b", 1, 3, 4)},
		{name: "a sale after a sold_out that ended before it began", want: false, undersold: 1, h: new(h).stock(1, 1, 0).
			soldOut(1, "a", 1, 1, 2).ok(1, "b", 1, 3, 4, 0)},
		{name: "sold_out of more than is left", want: true, h: new(h).stock(1, 3, 0).
			ok(1, "a", 2, 1, 2, 1).soldOut(1, "b", 2, 3, 4).ok(1, "c", 1, 5, 6, 0)},
		{name: "no answer that took its unit", want: true, h: new(h).stock(1, 2, 0).
			buy(1, "a", 1, 1, 2, 0, "", 0).ok(1, "b", 1, 5, 6, 0)},
		{name: "outcome_unknown that took nothing", want: true, h: new(h).stock(1, 2, 0).
			buy(1, "a", 1, 1, 2, 503, "outcome_unknown", 0).ok(1, "b", 1, 5, 6, 1).ok(1, "c", 1, 7, 8, 0)},
		{name: "a 5xx without code that took after its answer", want: true, h: new(h).stock(1, 3, 0).
			buy(1, "a", 1, 1, 2, 502, "", 0).ok(1, "b", 1, 3, 4, 2).ok(1, "c", 1, 5, 6, 0)},
		{name: "indeterminate cannot explain two missing units", want: false, h: new(h).stock(1, 3, 0).
			buy(1, "a", 1, 1, 2, 0, "", 0).ok(1, "b", 1, 5, 6, 0)},
		{name: "failure answers assert nothing", want: true, h: new(h).stock(1, 1, 0).
			buy(1, "a", 1, 1, 2, 409, "limit_exceeded", 0).buy(1, "b", 1, 1, 2, 503, "lock_timeout", 0).
			buy(1, "c", 1, 1, 2, 400, "invalid_argument", 0).ok(1, "d", 1, 3, 4, 0)},
		{name: "several products", want: true, h: new(h).stock(1, 1, 0).stock(2, 1, 0).
			ok(1, "a", 1, 1, 2, 0).ok(2, "b", 1, 1, 2, 0).soldOut(2, "c", 1, 3, 4)},
		{name: "one bad product of several", want: false, mention: "product 2", h: new(h).stock(1, 1, 0).stock(2, 1, 0).
			ok(1, "a", 1, 1, 2, 0).ok(2, "b", 1, 1, 2, 0).ok(2, "c", 1, 3, 4, 0)},
		{name: "a reset starts a new sale", want: true, h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).soldOut(1, "b", 1, 3, 4).stock(1, 1, 10).ok(1, "c", 1, 11, 12, 0)},
		{name: "sold_out after a reset is undersell", want: false, undersold: 1, h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).stock(1, 5, 10).soldOut(1, "b", 1, 11, 12)},
		{name: "promises (202s) that took the stock in turn", want: true, h: new(h).stock(1, 3, 0).
			promise(1, "a", 1, 1, 10, 1).promise(1, "b", 1, 2, 9, 2).promise(1, "c", 1, 3, 11, 0).soldOut(1, "d", 1, 12, 13)},
		{name: "a promise and an order share the stock", want: true, h: new(h).stock(1, 2, 0).
			ok(1, "a", 1, 1, 2, 1).promise(1, "b", 1, 3, 4, 0).soldOut(1, "c", 1, 5, 6)},
		{name: "two promises of the last unit", want: false, mention: "202", h: new(h).stock(1, 1, 0).
			promise(1, "a", 1, 1, 5, 0).promise(1, "b", 1, 2, 6, 0)},
		{name: "a cancel puts the unit back, and it sells again", want: true, h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).cancel(1, 1, 1, 3, 4, 200, "").ok(1, "b", 1, 5, 6, 0).soldOut(1, "c", 1, 7, 8)},
		{name: "a unit returned twice", want: false, mention: "buys 1", h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).cancel(1, 1, 1, 3, 4, 200, "").cancel(1, 1, 1, 5, 6, 200, "").
			ok(1, "b", 1, 7, 8, 0).ok(1, "c", 1, 9, 10, 0)},
		{name: "concurrent cancels of one order return it once", want: true, h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).cancel(1, 1, 1, 3, 6, 200, "").cancel(1, 1, 1, 4, 7, 200, "").
			ok(1, "b", 1, 8, 9, 0).soldOut(1, "c", 1, 10, 11)},
		{name: "a sold_out after a cancel ended", want: false, mention: "sold_out", h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).cancel(1, 1, 1, 3, 4, 200, "").soldOut(1, "b", 1, 5, 6)},
		{name: "a cancel may put back after a concurrent sold_out", want: true, h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).cancel(1, 1, 1, 3, 10, 200, "").soldOut(1, "b", 1, 4, 5).ok(1, "c", 1, 11, 12, 0)},
		{name: "a cancel that puts back more than its order took", want: false, mention: "took 1", h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).cancel(1, 1, 2, 3, 4, 200, "").ok(1, "b", 2, 5, 6, 0)},
		{name: "a cancel of an order not made yet", want: false, mention: "before the purchase", h: new(h).stock(1, 1, 0).
			cancel(1, 2, 1, 1, 2, 200, "").ok(1, "a", 1, 3, 4, 0)},
		{name: "a refused cancel puts back nothing", want: false, h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).cancel(1, 1, 1, 3, 4, 409, "order_paid").ok(1, "b", 1, 5, 6, 0)},
		{name: "a cancel without an answer may have put back", want: true, h: new(h).stock(1, 1, 0).
			ok(1, "a", 1, 1, 2, 0).cancel(1, 1, 1, 3, 4, 0, "").ok(1, "b", 1, 5, 6, 0)},
		{name: "a sold_out after a promise of the last unit but one", want: false, undersold: 1, mention: "sold_out", h: new(h).stock(1, 2, 0).
			promise(1, "a", 1, 1, 2, 1).soldOut(1, "b", 1, 3, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := history.Check(tc.h.lines)
			if err != nil {
				t.Fatalf("Check = %v", err)
			}
			if res.Linearizable != tc.want || res.Undersold != tc.undersold {
				t.Fatalf("Check = %s; want linearizable %v, undersold %d", res, tc.want, tc.undersold)
			}
			if !tc.want && (res.Violation == "" || !strings.Contains(res.Violation, tc.mention)) {
				t.Errorf("violation %q; want one that mentions %q", res.Violation, tc.mention)
			}
			var page bytes.Buffer
			if err := res.WriteHTML(&page, 10*time.Second); err != nil || !strings.Contains(page.String(), "<html") {
				t.Errorf("WriteHTML = %v, %d bytes; want a page", err, page.Len())
			}
		})
	}
}

func TestCheckNeedsAStockLine(t *testing.T) {
	_, err := history.Check(new(h).stock(1, 1, 0).ok(2, "a", 1, 1, 2, 0).lines)
	if err == nil || !strings.Contains(err.Error(), "product 2") {
		t.Errorf("Check = %v; want an error naming product 2", err)
	}
}

func TestReadWrite(t *testing.T) {
	lines := new(h).stock(1, 3, 0).ok(1, "a", 1, 1, 2, 2).soldOut(1, "b", 3, 3, 4).buy(1, "c", 1, 5, 6, 0, "", 0).
		promise(1, "d", 1, 7, 8, 1).cancel(1, 1, 1, 9, 10, 200, "").lines
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if err := history.WriteFile(path, lines); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The contract's shapes, key for key.
	for _, want := range []string{`{"product":1,"stock":3,"time_ns":0}`,
		`{"product":1,"user_id":"a","request_id":"r-a","quantity":1,"start_ns":1000,"end_ns":2000,"status":201,"code":"","remaining_stock":2,"order_id":1}`,
		`{"product":1,"user_id":"c","request_id":"r-c","quantity":1,"start_ns":5000,"end_ns":6000,"status":0,"code":""}`,
		`{"product":1,"user_id":"d","request_id":"r-d","quantity":1,"start_ns":7000,"end_ns":8000,"status":202,"code":"","remaining_stock":1}`} {
		if !strings.Contains(string(data), want+"\n") {
			t.Errorf("written history lacks the line %s:\n%s", want, data)
		}
	}
	got, err := history.ReadFile(path)
	if err != nil || fmt.Sprint(deref(got)) != fmt.Sprint(deref(lines)) {
		t.Errorf("ReadFile = %v, %v; want %v", deref(got), err, deref(lines))
	}
}

// deref shows lines with their pointers followed.
func deref(lines []history.Line) []string {
	var out []string
	for _, l := range lines {
		var extra string
		if l.Stock != nil {
			extra += fmt.Sprint(" stock=", *l.Stock)
		}
		if l.RemainingStock != nil {
			extra += fmt.Sprint(" left=", *l.RemainingStock)
		}
		if l.OrderID != nil {
			extra += fmt.Sprint(" order=", *l.OrderID)
		}
		l.Stock, l.RemainingStock, l.OrderID = nil, nil, nil
		out = append(out, fmt.Sprintf("%+v", l)+extra)
	}
	return out
}

func TestReadNamesTheBadLine(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{"product":1,"stock":2,"time_ns":0}` + "\n" + `{"product":1,`, "line 2"},
		{"\n\n" + `{"product":1,"stock":-2,"time_ns":0}`, "line 3"},
		{`{"product":1,"user_id":"a","quantity":1,"start_ns":5,"end_ns":4,"status":201}`, "line 1"},
		{`{"product":1,"user_id":"a","quantity":1,"start_ns":1,"end_ns":4,"status":201,"code":""}`, "remaining_stock"},
		{`{"product":1,"user_id":"a","quantity":1,"start_ns":1,"end_ns":4,"status":201,"code":"","remaining_stock":1}`, "order_id"},
		{`{"product":1,"user_id":"a","quantity":1,"start_ns":1,"end_ns":4,"status":202,"code":""}`, "a 202 needs remaining_stock"},
		{`{"product":1,"stock":2,"time_ns":0,"extra":1}`, "line 1"},
	} {
		_, err := history.Read(strings.NewReader(tc.text))
		var pe *history.ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%q) = %v; want a *ParseError saying %q", tc.text, err, tc.want)
		}
	}
}

// generated is a linearizable history of n purchases of one product of
// stock units by buyers concurrent buyers: purchase k takes effect at
// k µs, and its call and answer lie within buyers µs around that point, so
// that about buyers purchases are in flight at once. One in 200 gets no
// answer, taking its unit or not.
func generated(n, buyers int, stock int64, seed uint64) []history.Line {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := new(h).stock(1, stock, 0)
	left := stock
	for k := range n {
		at := int64(buyers + k)
		start := at - rng.Int64N(int64(buyers))
		end := at + rng.Int64N(int64(buyers))
		user := fmt.Sprint("u", k)
		switch {
		case rng.IntN(200) == 0:
			if left > 0 && rng.IntN(2) == 0 {
				left--
			}
			b.buy(1, user, 1, start, end, 0, "", 0)
		case left > 0:
			left--
			b.ok(1, user, 1, start, end, left)
		default:
			b.soldOut(1, user, 1, start, end)
		}
	}
	return b.lines
}

func TestCheckGenerated(t *testing.T) {
	lines := generated(2000, 64, 1200, 1)
	res, err := history.Check(lines)
	if err != nil || !res.Linearizable || res.Undersold != 0 {
		t.Fatalf("Check(generated) = %v, %v; want linearizable, nothing undersold", res, err)
	}
	// One order too many makes it fail.
	bad := append(lines, new(h).ok(1, "extra", 1, 100_000, 100_001, 0).lines...)
	if res, err := history.Check(bad); err != nil || res.Linearizable {
		t.Fatalf("Check(generated + an extra order) = %v, %v; want not linearizable", res, err)
	}
}

// BenchmarkCheck checks 20,000 purchases of one product by 256 concurrent
// buyers (stock 12,000: the last 40% are sold_out, one in 200 unanswered).
func BenchmarkCheck(b *testing.B) {
	lines := generated(20_000, 256, 12_000, 2)
	b.ResetTimer()
	for b.Loop() {
		res, err := history.Check(lines)
		if err != nil || !res.Linearizable {
			b.Fatalf("Check = %v, %v", res, err)
		}
	}
}

// TestCheckHugeStock: a stock of any size costs nothing to check (the
// search for which purchases of unknown outcome fill a gap is bounded by
// what they asked for, not by the gap).
func TestCheckHugeStock(t *testing.T) {
	res, err := history.Check(new(h).stock(1, 1<<62, 0).buy(1, "a", 2, 1, 2, 0, "", 0).ok(1, "b", 1, 3, 4, 0).lines)
	if err != nil || res.Linearizable || !strings.Contains(res.Violation, "units went between") {
		t.Fatalf("Check = %v, %v; want not linearizable: the units between were never sold", res, err)
	}
}
