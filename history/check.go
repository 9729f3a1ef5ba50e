package history

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
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
// checked directly (see counter.go), which decides it but for some with
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
// place needs (see counter.go).
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

// porcupineOf is segs as porcupine's model and operations: each segment
// a partition that begins with a reset to its stock, after first (the
// index of segs[0] among all, for the drawing's rows).
func porcupineOf(segs []*segment, first int) (porcupine.Model, []porcupine.Operation) {
	var ops []porcupine.Operation
	for i, s := range segs {
		ops = append(ops, porcupine.Operation{Input: input{reset: true, quantity: s.stock},
			Call: s.start, Return: s.start, Output: output{}, Metadata: i})
		for _, l := range s.purchase {
			out, ok := outputOf(l)
			if !ok {
				continue
			}
			ret := l.EndNS
			if out.outcome == maybe {
				ret = s.end
			}
			ops = append(ops, porcupine.Operation{Input: input{quantity: l.Quantity, line: l},
				Call: l.StartNS, Return: ret, Output: out, Metadata: i})
		}
		for _, l := range s.cancels {
			out := output{outcome: returned}
			ret := l.EndNS
			if l.Indeterminate() {
				out.outcome, ret = maybe, s.end
			}
			ops = append(ops, porcupine.Operation{Input: input{cancel: true, quantity: l.Quantity, line: l},
				Call: l.StartNS, Return: ret, Output: out, Metadata: i})
		}
	}
	assignClients(ops)
	return counterModel(segs), ops
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

// assignClients gives every operation a client ID (a row in porcupine's
// drawing) such that a client's operations never overlap: the fewest rows
// that hold them, greedily.
func assignClients(ops []porcupine.Operation) {
	idx := make([]int, len(ops))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return ops[idx[a]].Call < ops[idx[b]].Call })
	var free []int64 // per client: when it is free again
	for _, i := range idx {
		c := slices.IndexFunc(free, func(at int64) bool { return at < ops[i].Call })
		if c < 0 {
			c = len(free)
			free = append(free, 0)
		}
		free[c] = ops[i].Return
		ops[i].ClientId = c
	}
}

// counterState is a segment's counter: its stock, and the orders whose
// units came back (their IDs in order, as text: comparable and cheap while
// there are none).
type counterState struct {
	stock    int64
	returned string
}

// hasReturned says order id's units came back in state st.
func (st counterState) hasReturned(id int64) bool {
	for rest := st.returned; rest != ""; {
		var head string
		head, rest, _ = strings.Cut(rest, ",")
		if head == strconv.FormatInt(id, 10) {
			return true
		}
	}
	return false
}

// withReturn is st after order id put back q units.
func (st counterState) withReturn(id, q int64) counterState {
	ids := []int64{id}
	for rest := st.returned; rest != ""; {
		var head string
		head, rest, _ = strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(head, 10, 64) // written below
		ids = append(ids, n)
	}
	slices.Sort(ids)
	text := make([]string, len(ids))
	for i, n := range ids {
		text[i] = strconv.FormatInt(n, 10)
	}
	return counterState{stock: st.stock + q, returned: strings.Join(text, ",")}
}

// counterModel is one stock counter per segment: the segment's reset sets
// it; the purchases take from it and the cancels put back, once per order.
// An operation whose outcome is unknown makes the state a set of states.
func counterModel(segs []*segment) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := make([][]porcupine.Operation, len(segs))
			for _, op := range history {
				i := op.Metadata.(int)
				parts[i] = append(parts[i], op)
			}
			return parts
		},
		Init: func() []any { return []any{counterState{stock: unknownStock}} },
		Step: func(state, in, out any) []any {
			st, i, o := state.(counterState), in.(input), out.(output)
			stock := st.stock
			switch {
			case i.reset:
				return []any{counterState{stock: i.quantity}}
			case stock == unknownStock:
				return nil
			case i.cancel:
				id := *i.line.OrderID
				if st.hasReturned(id) {
					return []any{st} // a repeated cancel puts back nothing more
				}
				if o.outcome == maybe {
					return []any{st.withReturn(id, i.quantity), st}
				}
				return []any{st.withReturn(id, i.quantity)}
			}
			switch o.outcome {
			case took:
				if stock >= i.quantity && stock-i.quantity == o.remaining {
					return []any{counterState{stock: o.remaining, returned: st.returned}}
				}
			case soldOut:
				if stock < i.quantity {
					return []any{st}
				}
			case maybe:
				if stock >= i.quantity {
					return []any{counterState{stock: stock - i.quantity, returned: st.returned}, st}
				}
				return []any{st}
			}
			return nil
		},
		Equal: func(a, b any) bool { return a.(counterState) == b.(counterState) },
		Hash: func(s any) uint64 {
			st := s.(counterState)
			h := fnv.New64a()
			h.Write([]byte(st.returned))
			return uint64(st.stock) ^ h.Sum64()
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(input), out.(output)
			if i.reset {
				return fmt.Sprintf("stock set to %d", i.quantity)
			}
			return describeOp(i.line, o)
		},
		DescribeState: func(s any) string {
			st := s.(counterState)
			if st.returned == "" {
				return fmt.Sprintf("stock %d", st.stock)
			}
			return fmt.Sprintf("stock %d (orders returned: %s)", st.stock, st.returned)
		},
	}
	return nm.ToModel()
}

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

// WriteHTML draws the history as a page (porcupine's): each purchase a bar
// in time, one row per client, the longest valid order found and, where it
// fails, the operation it could not place. It runs porcupine's search for
// the drawing, bounded by timeout; past it the page shows what was found.
func (r *Result) WriteHTML(w io.Writer, timeout time.Duration) error {
	model, ops := porcupineOf(r.segs, 0)
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if err := porcupine.Visualize(model, info, w); err != nil {
		return fmt.Errorf("history: draw: %w", err)
	}
	return nil
}
