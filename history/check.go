package history

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The check: each product's history, cut into segments at its stock lines,
// must be linearizable against one stock counter that starts at the
// segment's stock. A purchase of q succeeds when at least q remain and
// answers what remains; otherwise it answers sold_out. 200, 201 and 202
// took their units (a 202, reserve's promise, took them in Redis when it
// was answered, whenever its order is written); a purchase without an answer, outcome_unknown or a 5xx
// without a code may or may not have taken them, at any moment from its
// start to the end of its segment (a COMMIT whose reply was lost may take
// after the client gave up); every other answer took nothing and asserts
// nothing about the stock, so it is left out. Each segment is first
// checked directly (checkCounter), which decides it but for some with
// purchases of unknown outcome; those go to porcupine's search
// (github.com/anishathalye/porcupine), one segment at a time, which finds
// an order of the operations, within their real-time bounds, that the
// counter accepts, or proves there is none.
//
// A cancel answered 200 put its order's quantity back at one instant
// within its interval, unless a cancel of the same order did before (a
// repeated cancel puts back nothing more); one without an answer (or a 5xx
// without a code) may have, at any moment from its start to the end of
// its segment; any other answer put back nothing and is left out. Stock
// no longer only falls in a segment with returns, which the direct check
// relies on: such a segment goes to the search.

// DefaultTimeout bounds the search of one check.
const DefaultTimeout = 2 * time.Minute

// ErrUndecided is returned when the search ran out of time.
var ErrUndecided = errors.New("history: the check ran out of time before it could decide")

// Result is the verdict on a history.
type Result struct {
	Linearizable bool
	// Violation says, for a person, the first segment that is not
	// linearizable and the operations involved; "" when Linearizable.
	Violation string
	// Purchases is the number of purchase lines; Checked of them assert
	// something about the stock and were checked.
	Purchases, Checked int
	// Undersold is the number of sold_out answers given while stock
	// remained for sure: counting every purchase of the segment that began
	// before the answer came as having taken its units (the indeterminate
	// ones too), at least the quantity asked for was left.
	Undersold int
	// Products and Segments are how many of each the history has.
	Products, Segments int

	segs []*segment
}

// String is the verdict in one line, with the violation when there is one.
func (r *Result) String() string {
	head := fmt.Sprintf("%d purchases of %d products (%d segments), %d checked, %d sold_out while stock remained",
		r.Purchases, r.Products, r.Segments, r.Checked, r.Undersold)
	if r.Linearizable {
		return "linearizable: " + head
	}
	return "not linearizable: " + head + "\n" + r.Violation
}

// input is what an operation asks of the counter: a purchase of quantity,
// or, for a segment's first operation, a reset to stock.
type input struct {
	reset    bool
	quantity int64
	line     *Line
	// cancel: a return of line's order (line.OrderID), quantity its units.
	cancel bool
}

// outcome is what the counter answered.
type outcome int

const (
	took     outcome = iota // 200, 201, 202: took the units, left remaining
	soldOut                 // 409 sold_out
	maybe                   // no answer, outcome_unknown, 5xx without a code
	returned                // a cancel's 200: its order's units came back, once
)

type output struct {
	outcome   outcome
	remaining int64
}

// unknownStock is the counter before its segment's reset.
const unknownStock = -1

// segment is one product's history from one stock line to the next.
type segment struct {
	product  int64
	stock    int64
	start    int64 // the stock line's time
	end      int64 // the next stock line's time, or after the last answer
	purchase []*Line
	// cancels are the segment's cancels that may have put units back: 200
	// or of unknown outcome.
	cancels []*Line
}

// Check checks lines (see above). Its error says why it could not decide:
// a purchase of a product before any stock line of it, or a search that
// ran out of time (ErrUndecided).
func Check(lines []Line) (*Result, error) { return CheckTimeout(lines, DefaultTimeout) }

// CheckTimeout is Check with a bound on the general search, which only a
// segment with purchases of unknown outcome that the direct check cannot
// place needs (checkCounter).
func CheckTimeout(lines []Line, timeout time.Duration) (*Result, error) {
	segs, purchases, err := segments(lines)
	if err != nil {
		return nil, err
	}
	res := &Result{Purchases: purchases, Segments: len(segs), Linearizable: true, segs: segs}
	products := map[int64]bool{}
	for i, s := range segs {
		products[s.product] = true
		for _, l := range s.purchase {
			if _, ok := outputOf(l); ok {
				res.Checked++
			}
		}
		res.Undersold += undersold(s)
		if !res.Linearizable {
			continue // the first violation is the one reported
		}
		v := counterVerdict{ok: true}
		switch why := cancelsOfOrders(s); {
		case why != "":
			v = counterVerdict{why: why, sure: true}
		case len(s.cancels) == 0:
			v = checkCounter(s)
		default:
			v = counterVerdict{why: fmt.Sprintf("product %d, stock %d at %s: no order of its purchases and returns fits one counter", s.product, s.stock, stamp(s.start))}
		}
		if v.ok {
			continue
		}
		if !v.sure {
			// The direct check cannot tell for sure: ask the search.
			model, ops := porcupineOf(segs[i:i+1], 0)
			switch verdict, info := porcupine.CheckOperationsVerbose(model, ops, timeout); verdict {
			case porcupine.Ok:
				continue
			case porcupine.Illegal:
				v.why = describe(segs[i:i+1], info)
			default:
				return nil, ErrUndecided
			}
		}
		res.Linearizable, res.Violation = false, v.why
	}
	res.Products = len(products)
	return res, nil
}

// cancelsOfOrders holds each cancel of s against the purchase that made
// its order, when the history has it: the cancel puts back what that
// purchase took, and cannot have ended before it began. It returns the
// first violation, or "".
func cancelsOfOrders(s *segment) string {
	made := map[int64]*Line{}
	for _, l := range s.purchase {
		if l.Ordered() {
			made[*l.OrderID] = l
		}
	}
	for _, c := range s.cancels {
		p, ok := made[*c.OrderID]
		switch {
		case !ok:
		case p.Quantity != c.Quantity:
			return fmt.Sprintf("product %d, stock %d at %s: %s puts back %d units; the purchase that made the order took %d (%s)",
				s.product, s.stock, stamp(s.start), describeOp(c, output{outcome: returned}), c.Quantity, p.Quantity, p.RequestID)
		case c.EndNS < p.StartNS:
			return fmt.Sprintf("product %d, stock %d at %s: %s ended before the purchase that made the order began (%s)",
				s.product, s.stock, stamp(s.start), describeOp(c, output{outcome: returned}), p.RequestID)
		}
	}
	return ""
}

// segments cuts the history into its segments, by product, in time order;
// it also counts the purchases.
func segments(lines []Line) ([]*segment, int, error) {
	byProduct := map[int64][]*segment{}
	var order []int64
	stockLines := slices.Clone(lines)
	// Stock lines first by time, then each purchase into the segment of
	// its product that began last before it.
	sort.SliceStable(stockLines, func(i, j int) bool { return stockLines[i].TimeNS < stockLines[j].TimeNS })
	for i := range stockLines {
		l := &stockLines[i]
		if l.Stock == nil {
			continue
		}
		if _, ok := byProduct[l.Product]; !ok {
			order = append(order, l.Product)
		}
		byProduct[l.Product] = append(byProduct[l.Product], &segment{product: l.Product, stock: *l.Stock, start: l.TimeNS})
	}
	purchases := 0
	for i := range lines {
		l := &lines[i]
		if l.Stock != nil {
			continue
		}
		segs := byProduct[l.Product]
		k := sort.Search(len(segs), func(k int) bool { return segs[k].start > l.StartNS }) - 1
		switch {
		case k < 0 && l.Cancel():
			return nil, 0, fmt.Errorf("history: the cancel of order %d of product %d began before any stock line of it", *l.OrderID, l.Product)
		case k < 0:
			return nil, 0, fmt.Errorf("history: purchase %q of product %d began before any stock line of it", l.RequestID, l.Product)
		case l.Cancel():
			if l.Succeeded() || l.Indeterminate() {
				segs[k].cancels = append(segs[k].cancels, l)
			}
		default:
			purchases++
			segs[k].purchase = append(segs[k].purchase, l)
		}
	}
	var out []*segment
	for _, p := range order {
		segs := byProduct[p]
		for k, s := range segs {
			if k+1 < len(segs) {
				s.end = segs[k+1].start
			} else {
				s.end = s.start
				for _, l := range s.purchase {
					s.end = max(s.end, l.EndNS)
				}
				for _, l := range s.cancels {
					s.end = max(s.end, l.EndNS)
				}
				s.end++
			}
		}
		out = append(out, segs...)
	}
	return out, purchases, nil
}

// outputOf is what l asserts about the stock; false: nothing.
func outputOf(l *Line) (output, bool) {
	switch {
	case l.Cancel():
		return output{}, false // a return, not a purchase: see porcupineOf
	case l.Succeeded():
		return output{outcome: took, remaining: *l.RemainingStock}, true
	case l.SoldOut():
		return output{outcome: soldOut}, true
	case l.Indeterminate():
		return output{outcome: maybe}, true
	}
	return output{}, false
}

// undersold counts the sold_out answers of s given while stock surely
// remained (see Result.Undersold).
func undersold(s *segment) int {
	type start struct {
		at int64
		q  int64
	}
	var takers []start
	for _, l := range s.purchase {
		if l.Succeeded() || l.Indeterminate() {
			takers = append(takers, start{l.StartNS, l.Quantity})
		}
	}
	sort.Slice(takers, func(i, j int) bool { return takers[i].at < takers[j].at })
	sum := make([]int64, len(takers)+1)
	for i, t := range takers {
		sum[i+1] = sum[i] + t.q
	}
	n := 0
	for _, l := range s.purchase {
		if !l.SoldOut() {
			continue
		}
		k := sort.Search(len(takers), func(k int) bool { return takers[k].at > l.EndNS })
		if s.stock-sum[k] >= l.Quantity {
			n++
		}
	}
	return n
}
