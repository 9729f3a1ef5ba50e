package load

import (
	"sync/atomic"
	"testing"
)

// TestClassifyOutcomeUnknown: an answer 503 outcome_unknown carries the
// code that countsAgree's callers count as "may have made an order".
func TestClassifyOutcomeUnknown(t *testing.T) {
	p := &Plan{Purchase: true}
	a := p.classify(503, []byte(`{"error":{"code":"outcome_unknown","message":"replay it"}}`), new(atomic.Bool))
	if a.code != codeOutcomeUnknown {
		t.Errorf("classify(503 outcome_unknown).code = %q; want %q", a.code, codeOutcomeUnknown)
	}
}

// TestMergeKeepsUnknowns: the shards' tallies merged keep each product's
// answers outcome_unknown, which the counts' check reads.
func TestMergeKeepsUnknowns(t *testing.T) {
	a, b := newTally(1, 1, 2), newTally(1, 1, 2)
	a.Products[1].Unknown, b.Products[1].Unknown = 2, 3
	a.merge(b)
	if a.Products[1].Unknown != 5 || a.Products[0].Unknown != 0 {
		t.Errorf("merged unknowns = %d, %d; want 0, 5", a.Products[0].Unknown, a.Products[1].Unknown)
	}
}
