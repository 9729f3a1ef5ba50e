package history

import (
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
