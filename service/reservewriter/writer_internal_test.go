package reservewriter

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/reserve"
)

// TestSleepEndsWithItsContext: a writer's pause after an error ends when
// the instance stops, not when its time is up: an hour's pause on a
// context that has ended returns at once (the test would hang otherwise).
func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sleep(ctx, time.Hour)
}

// TestRefused: only the sale rule's refusals record a reservation as
// failed; anything else (the database not answering, an outcome not known)
// leaves it pending, since it may have been written.
func TestRefused(t *testing.T) {
	for code, want := range map[failure.Code]bool{
		failure.CodeSoldOut: true, failure.CodeLimitExceeded: true, failure.CodeRequestIDReused: true,
		failure.CodeUnavailable: false, failure.CodeOutcomeUnknown: false, failure.CodeInternal: false, "": false,
	} {
		if got := refused(code); got != want {
			t.Errorf("refused(%q) = %v; want %v", code, got, want)
		}
	}
}

// TestWritten: the products a writer wrote are handed out for reconciling
// at most n at a time, each once until written again.
func TestWritten(t *testing.T) {
	w := &writer{failures: map[string]int{}, touched: map[int64]bool{}}
	for _, id := range []int64{1, 2, 3, 2} {
		w.wrote(id)
	}
	first := w.written(2)
	rest := w.written(16)
	seen := map[int64]int{}
	for _, id := range append(first, rest...) {
		seen[id]++
	}
	if len(first) != 2 || len(rest) != 1 || len(seen) != 3 || seen[1] != 1 || seen[2] != 1 || seen[3] != 1 {
		t.Errorf("written(2), written(16) = %v, %v; want products 1, 2 and 3 once in all, two then one", first, rest)
	}
	if again := w.written(16); len(again) != 0 {
		t.Errorf("written again = %v; want none until written anew", again)
	}
	if w.failed("e-1"); w.failed("e-1") != 2 {
		t.Error("failed counts a second failure of an entry as 1; want 2")
	}
	w.forget("e-1")
	if w.failed("e-1") != 1 {
		t.Error("failed after forget counts more than 1; want the count from the start")
	}
}

// TestChunks: the groups read are split into enough transactions to run
// parallel at once, at most writerProducts products each, in the order
// read; a product's second generation and a request ID's second product
// go alone.
func TestChunks(t *testing.T) {
	entry := func(product, gen int64, rid string) reserve.Entry {
		return reserve.Entry{Request: reserve.Request{Product: product, RequestID: rid}, Generation: gen}
	}
	groups := map[key][]reserve.Entry{}
	var order []key
	add := func(product, gen int64, rids ...string) {
		k := key{product, gen}
		order = append(order, k)
		for _, rid := range rids {
			groups[k] = append(groups[k], entry(product, gen, rid))
		}
	}
	for p := range int64(10) {
		add(p, 1, fmt.Sprint("r-", p), fmt.Sprint("s-", p))
	}
	add(3, 2, "r-30")  // product 3 again, in a newer generation
	add(11, 1, "s-4")  // s-4 again, of another product
	add(12, 1, "r-12") // one more, apart from the others
	got := chunks(order, groups, 4)
	want := [][]key{
		{{0, 1}, {1, 1}, {2, 1}}, {{3, 1}, {4, 1}, {5, 1}}, {{6, 1}, {7, 1}, {8, 1}}, {{9, 1}, {12, 1}},
		{{3, 2}}, {{11, 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks = %v; want %v", got, want)
	}
	many := map[key][]reserve.Entry{}
	order = nil
	for p := range int64(1000) {
		k := key{p, 1}
		order = append(order, k)
		many[k] = []reserve.Entry{entry(p, 1, fmt.Sprint("r-", p))}
	}
	cs := chunks(order, many, 2)
	for _, c := range cs[:len(cs)-1] {
		if len(c) != writerProducts {
			t.Fatalf("a chunk of %d products of 1,000 over 2 at once; want %d, the most", len(c), writerProducts)
		}
	}
	if n := (len(cs)-1)*writerProducts + len(cs[len(cs)-1]); n != 1000 {
		t.Errorf("the chunks hold %d products; want the 1,000", n)
	}
}
