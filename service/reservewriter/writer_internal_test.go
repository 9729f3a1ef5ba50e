package reservewriter

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/service/failure"
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
