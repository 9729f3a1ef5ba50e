package history

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// describeOp says what a purchase or a cancel asked and was answered.
func describeOp(l *Line, o output) string {
	if l.Cancel() {
		what := fmt.Sprintf("cancel of order %d (%d units)", *l.OrderID, l.Quantity)
		if o.outcome == maybe {
			return what + ": no answer"
		}
		return fmt.Sprintf("%s: %d", what, l.Status)
	}
	what := fmt.Sprintf("%s buys %d (%s)", l.UserID, l.Quantity, l.RequestID)
	switch o.outcome {
	case took:
		return fmt.Sprintf("%s: %d, %d left", what, l.Status, o.remaining)
	case soldOut:
		return what + ": sold_out"
	}
	if l.Status == 0 {
		return what + ": no answer"
	}
	return fmt.Sprintf("%s: %d %s", what, l.Status, l.Code)
}

// maxInvolved bounds the operations a violation lists.
const maxInvolved = 8

// describe says, for a person, where the first segment that failed went
// wrong: how far the longest order porcupine found got, the stock there,
// and the purchases that no order could place next.
func describe(segs []*segment, info porcupine.LinearizationInfo) string {
	partials := info.PartialLinearizationsOperations()
	for i, s := range segs {
		if i >= len(partials) || len(partials[i]) == 0 {
			continue
		}
		// The longest partial order of this segment.
		var best []porcupine.Operation
		for _, p := range partials[i] {
			if len(p) > len(best) {
				best = p
			}
		}
		all := map[*Line]bool{}
		for _, l := range s.purchase {
			if _, ok := outputOf(l); ok {
				all[l] = true
			}
		}
		placed, stock, taken := 0, s.stock, int64(0)
		back := map[int64]bool{} // the orders whose units came back
		for _, op := range best {
			in := op.Input.(input)
			if in.reset {
				continue
			}
			if in.cancel {
				if id := *in.line.OrderID; !back[id] {
					back[id], stock = true, stock+in.quantity
				}
				continue
			}
			placed++
			delete(all, in.line)
			if o := op.Output.(output); o.outcome == took {
				stock, taken = o.remaining, taken+in.quantity
			}
		}
		if len(all) == 0 {
			continue // this segment linearized: another one failed
		}
		// The purchase that had to come next: the first to end of those
		// left, and those it overlaps.
		var left []*Line
		for l := range all {
			left = append(left, l)
		}
		sort.Slice(left, func(a, b int) bool { return left[a].EndNS < left[b].EndNS })
		first := left[0]
		var b strings.Builder
		fmt.Fprintf(&b, "product %d, stock %d at %s: after %d purchases in a valid order (%d units taken, %d left),\n",
			s.product, s.stock, stamp(s.start), placed, taken, stock)
		fmt.Fprintf(&b, "no order can place next: %s\n", lineWords(s, first))
		involved := 0
		for _, l := range left[1:] {
			if l.StartNS <= first.EndNS && involved < maxInvolved {
				fmt.Fprintf(&b, "  concurrent with: %s\n", lineWords(s, l))
				involved++
			}
		}
		return strings.TrimRight(b.String(), "\n")
	}
	return "no segment's partial order was recorded"
}

// lineWords is a purchase for a person, its times from its segment's start.
func lineWords(s *segment, l *Line) string {
	o, _ := outputOf(l)
	end := "+" + time.Duration(l.EndNS-s.start).String()
	if o.outcome == maybe {
		end = "?"
	}
	return fmt.Sprintf("%s [+%v, %s]", describeOp(l, o), time.Duration(l.StartNS-s.start), end)
}

// stamp is a time in the history as RFC 3339 with nanoseconds.
func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
