// Package sale is the sale rule, and nothing else. Given what a product
// has left, the units each buyer already holds of it and the orders its
// buyers' request IDs already made, Decide answers a batch of purchases in
// order, as if one by one: sold, sold out, over the per-user limit, a
// replay of an earlier order, or a request ID reused by another purchase.
//
// Every way the service sells asks it: a hold's batch under a lock or the
// row lock decides with it and writes what it sold. It imports no
// database, Redis or HTTP package, so the rule is tested on its own, in
// milliseconds (sale_test.go).
package sale

// Purchase is one purchase of the product, as the rule sees it.
type Purchase struct {
	// RequestID is the buyer's request ID; "" when the buyer sent none,
	// so there is nothing to replay.
	RequestID string
	User      string
	Quantity  int64
}

// Prior is what an order already made with a request ID was for: a
// purchase with that request ID replays it when it asks for the same, and
// is refused as a reuse otherwise.
type Prior struct {
	Product  int64
	User     string
	Quantity int64
}

// State is what a product's sale stands at when a batch is decided.
type State struct {
	Product int64
	// Stock is the units left.
	Stock int64
	// Limit is the most units one buyer may hold of the product; 0 is no
	// limit.
	Limit int64
	// Units are the units each buyer already holds (absent: none). Decide
	// does not change it.
	Units map[string]int64
	// Used are the orders already made with the batch's request IDs, by
	// request ID (absent: unused).
	Used map[string]Prior
}

// Verdict is what the rule made of one purchase.
type Verdict uint8

const (
	// Sold: the purchase takes its units; Decision.Left is the stock it
	// leaves.
	Sold Verdict = iota
	// SoldOut: less than its quantity was left (Decision.Left).
	SoldOut
	// OverLimit: its buyer would hold more than the limit
	// (Decision.Units is what the buyer holds).
	OverLimit
	// Replay: its request ID made an order before the batch, for the same
	// purchase; it answers that order.
	Replay
	// ReplayOf: an earlier purchase of the batch with its request ID was
	// sold (Decision.Of), for the same purchase; it answers that one's
	// order.
	ReplayOf
	// Reused: its request ID was used by another purchase, before the
	// batch or in it.
	Reused
)

var verdictNames = [...]string{"sold", "sold out", "over the limit", "replay", "replay in the batch", "request ID reused"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown verdict"
}

// Decision is the rule's answer to one purchase.
type Decision struct {
	Verdict Verdict
	// Left is the stock after the purchase (Sold) or the stock it found
	// too small (SoldOut).
	Left int64
	// Units is what the buyer holds after the purchase (Sold) or the
	// units that left no room under the limit (OverLimit).
	Units int64
	// Of is, for ReplayOf, the index of the purchase it replays.
	Of int
}

// Outcome is a batch's decisions and what they sell.
type Outcome struct {
	// Decisions are the purchases' answers, in the batch's order.
	Decisions []Decision
	// Left is the stock the batch leaves; Sold the units it sells.
	Left, Sold int64
	// Units are the units, after the batch, of every buyer it sells to.
	Units map[string]int64
}

// Decide answers ps in order, as if each were decided alone after the one
// before it: a purchase whose request ID was used replays its order (or
// is refused as a reuse, when it asks for something else); one that asks
// for more than is left is sold out; one that would take its buyer past
// the limit is over it; any other is sold, and takes its units from the
// stock and adds them to its buyer's.
func Decide(st State, ps []Purchase) Outcome {
	out := Outcome{Decisions: make([]Decision, len(ps)), Left: st.Stock}
	var sold map[string]int // this batch's sold purchases, by request ID
	for i, p := range ps {
		d := &out.Decisions[i]
		if p.RequestID != "" {
			if prior, ok := st.Used[p.RequestID]; ok {
				d.Verdict = Replay
				if !prior.matches(st.Product, p) {
					d.Verdict = Reused
				}
				continue
			}
			if j, ok := sold[p.RequestID]; ok {
				d.Verdict, d.Of = ReplayOf, j
				if !(Prior{st.Product, ps[j].User, ps[j].Quantity}).matches(st.Product, p) {
					d.Verdict, d.Of = Reused, 0
				}
				continue
			}
		}
		if p.Quantity > out.Left {
			d.Verdict, d.Left = SoldOut, out.Left
			continue
		}
		held, ok := out.Units[p.User]
		if !ok {
			held = st.Units[p.User]
		}
		if st.Limit > 0 && held+p.Quantity > st.Limit {
			d.Verdict, d.Units = OverLimit, held
			continue
		}
		out.Left -= p.Quantity
		out.Sold += p.Quantity
		if out.Units == nil {
			out.Units = map[string]int64{}
		}
		out.Units[p.User] = held + p.Quantity
		d.Verdict, d.Left, d.Units = Sold, out.Left, held+p.Quantity
		if p.RequestID != "" {
			if sold == nil {
				sold = map[string]int{}
			}
			sold[p.RequestID] = i
		}
	}
	return out
}

// Replays says a purchase p of product replays an order made for prior:
// the same product, buyer and quantity. Anything else that carries the
// order's request ID is a reuse.
func Replays(prior Prior, product int64, p Purchase) bool {
	return prior.matches(product, p)
}

func (prior Prior) matches(product int64, p Purchase) bool {
	return prior.Product == product && prior.User == p.User && prior.Quantity == p.Quantity
}
