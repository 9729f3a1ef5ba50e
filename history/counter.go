package history

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// The counter checker: a direct proof for the one model the histories are
// checked against, in O(n log n) per segment, where a general search
// (porcupine) explores orders of concurrent answers and takes minutes on a
// sale of 20,000 purchases.
//
// Here "201" stands for every answer that took its units: 200, 201 and
// 202 alike (Line.Succeeded), each saying what it left.
//
// Stock only falls, and a 201 says exactly what it left (r) after taking
// q, so the 201s of a segment can only be ordered by the stock they found
// (b = r + q), highest first, and their ranges [r, b) must not overlap (two
// orders of one unit) and must tile the stock from the top, but for the
// units that purchases of unknown outcome took in between. Each answer is
// placed at the earliest point its start and the order allow; a sold_out
// needs the stock below its quantity by its answer, which the earliest
// placement makes most likely. Purchases of unknown outcome fill the gaps
// between 201s (the earliest-started first) and, after the last, take what
// they can as early as they can. Without such purchases this is exact.
// With them, a history it cannot place is handed to porcupine, which is
// exact, so that a verdict of "not linearizable" is always proven.

// counterVerdict is the direct check's verdict on one segment.
type counterVerdict struct {
	ok bool
	// why is the violation, for a person, when !ok.
	why string
	// sure says the violation holds whatever the purchases of unknown
	// outcome did: no search can place the history.
	sure bool
}

// placed is a unit-taking event at a point in time.
type placed struct {
	at int64
	q  int64
}

// checkCounter checks one segment directly: it places the 201s and, in
// their gaps and after them, the purchases of unknown outcome, then checks
// each sold_out against what was placed.
func checkCounter(s *segment) counterVerdict {
	c := newCounterCheck(s)
	if v, ok := c.placeTakers(); !ok {
		return v
	}
	c.placeRest()
	return c.checkSoldOuts()
}

// counterCheck is checkCounter's work on one segment.
type counterCheck struct {
	s                     *segment
	takers, sold, unknown []*Line
	used                  []bool // of unknown: taken to fill a gap
	// exact says a failure is proven: without purchases of unknown
	// outcome, or when they all asked for the same quantity, the placement
	// is the earliest possible (see oneQuantity).
	exact  bool
	events []placed
	p      int64 // the last 201's point
	top    int64 // the stock the next 201 must find, but for gaps
}

// newCounterCheck sorts the purchases of s by outcome: the 201s by the
// stock they found, highest first, and those of unknown outcome by their
// start.
func newCounterCheck(s *segment) *counterCheck {
	c := &counterCheck{s: s, p: s.start, top: s.stock}
	for _, l := range s.purchase {
		switch o, ok := outputOf(l); {
		case !ok:
		case o.outcome == took:
			c.takers = append(c.takers, l)
		case o.outcome == soldOut:
			c.sold = append(c.sold, l)
		default:
			c.unknown = append(c.unknown, l)
		}
	}
	c.exact = oneQuantity(c.unknown)
	sort.SliceStable(c.takers, func(i, j int) bool { return foundStock(c.takers[i]) > foundStock(c.takers[j]) })
	slices.SortStableFunc(c.unknown, func(a, b *Line) int { return cmpInt(a.StartNS, b.StartNS) })
	c.used = make([]bool, len(c.unknown))
	return c
}

// foundStock is the stock a 201 found: what it left and what it took.
func foundStock(l *Line) int64 { return *l.RemainingStock + l.Quantity }

// fail is a violation of the segment, proven when the check is exact.
func (c *counterCheck) fail(format string, args ...any) counterVerdict {
	return counterVerdict{why: fmt.Sprintf("product %d, stock %d at %s: ", c.s.product, c.s.stock, stamp(c.s.start)) +
		fmt.Sprintf(format, args...), sure: c.exact}
}

// sure is v, proven.
func sure(v counterVerdict) counterVerdict {
	v.sure = true
	return v
}

// placeTakers places each 201, highest stock first, at the earliest point
// its start and the order allow, after the purchases of unknown outcome
// that fill the gap above it. It returns the violation, and false, when a
// 201 cannot be placed.
func (c *counterCheck) placeTakers() (counterVerdict, bool) {
	s := c.s
	var unknownUnits, gaps int64
	for _, l := range c.unknown {
		unknownUnits += l.Quantity
	}
	for i, l := range c.takers {
		b, r := foundStock(l), *l.RemainingStock
		switch {
		case r < 0:
			return sure(c.fail("%s left a negative stock", lineWords(s, l))), false
		case b > c.top && i == 0:
			return sure(c.fail("%s found %d units, more than the %d there were: oversold", lineWords(s, l), b, s.stock)), false
		case b > c.top:
			return sure(c.fail("%s and %s took the same units (%d to %d and %d to %d)",
				lineWords(s, c.takers[i-1]), lineWords(s, l), foundStock(c.takers[i-1]), *c.takers[i-1].RemainingStock, b, r)), false
		}
		// The gap top-b: purchases of unknown outcome took it.
		gap := c.top - b
		gaps += gap
		at := max(c.p, l.StartNS)
		if at > l.EndNS {
			// Purchases of unknown outcome can only make it later.
			return sure(c.fail("%s ended before a purchase that found more stock began (+%v)",
				lineWords(s, l), time.Duration(at-s.start))), false
		}
		if gap > 0 {
			filled, latest, ok := fillGap(c.unknown, c.used, gap, l.EndNS)
			if !ok {
				if gaps > unknownUnits {
					return sure(c.fail("%d units went between %d and %s, more than all purchases of unknown outcome asked for",
						gap, c.top, lineWords(s, l))), false
				}
				return c.fail("%d units went between %d and %s with no purchase of unknown outcome to have taken them",
					gap, c.top, lineWords(s, l)), false
			}
			at = max(at, latest)
			for _, k := range filled {
				c.events = append(c.events, placed{at: max(c.unknown[k].StartNS, c.p), q: c.unknown[k].Quantity})
			}
		}
		if at > l.EndNS {
			return c.fail("%s must come after a purchase that found more stock, which began only at +%v",
				lineWords(s, l), time.Duration(at-s.start)), false
		}
		c.events = append(c.events, placed{at: at, q: l.Quantity})
		c.p, c.top = at, r
	}
	return counterVerdict{}, true
}

// placeRest lets the purchases of unknown outcome that filled no gap take,
// after the last 201, what they can, as early as they can.
func (c *counterCheck) placeRest() {
	for k, l := range c.unknown {
		if !c.used[k] && l.Quantity <= c.top {
			c.events = append(c.events, placed{at: max(l.StartNS, c.p), q: l.Quantity})
			c.top -= l.Quantity
		}
	}
}

// checkSoldOuts checks that each sold_out found the stock below its
// quantity by its answer.
func (c *counterCheck) checkSoldOuts() counterVerdict {
	s := c.s
	slices.SortFunc(c.events, func(a, b placed) int { return cmpInt(a.at, b.at) })
	at := make([]int64, len(c.events))
	sum := make([]int64, len(c.events)+1)
	for i, e := range c.events {
		at[i], sum[i+1] = e.at, sum[i]+e.q
	}
	for _, l := range c.sold {
		k := sort.Search(len(at), func(k int) bool { return at[k] > l.EndNS })
		if left := s.stock - sum[k]; left >= l.Quantity {
			v := c.fail("%s while at least %d units were left", lineWords(s, l), left)
			v.sure = v.sure || foundLater(c.takers, l) ||
				undersold(&segment{stock: s.stock, purchase: append(slices.Clone(c.takers), append(c.unknown, l)...)}) > 0
			return v
		}
	}
	return counterVerdict{ok: true}
}

// oneQuantity says every purchase of unknown outcome asked for the same
// quantity (or there are none). Gaps are then filled unit by unit of that
// quantity, any of them fits any slot, and taking the earliest-started for
// the earliest slots places every slot as early as any order can: the
// direct check is exact.
func oneQuantity(unknown []*Line) bool {
	for _, l := range unknown {
		if l.Quantity != unknown[0].Quantity {
			return false
		}
	}
	return true
}

// foundLater says a 201 that began after the sold_out l ended found at
// least l's quantity: the stock never rises within a segment, so it was
// at least that high all through l, whatever else happened.
func foundLater(takers []*Line, l *Line) bool {
	for _, t := range takers {
		if t.StartNS > l.EndNS && *t.RemainingStock+t.Quantity >= l.Quantity {
			return true
		}
	}
	return false
}

// fillGap picks, among the purchases of unknown outcome not yet used that
// began by until, the earliest-started whose quantities add up to gap
// exactly; it returns them and the latest start among them.
func fillGap(unknown []*Line, used []bool, gap, until int64) ([]int, int64, bool) {
	var cands []int
	var total int64
	for k, l := range unknown {
		if l.StartNS > until {
			break
		}
		if !used[k] && l.Quantity <= gap {
			cands = append(cands, k)
			total += l.Quantity
		}
	}
	if total < gap {
		return nil, 0, false // and no table of gap+1 sums, which a huge stock would make huge
	}
	pick, ok := subsetSum(unknown, cands, gap)
	if !ok {
		return nil, 0, false
	}
	var latest int64
	for _, k := range pick {
		used[k] = true
		latest = max(latest, unknown[k].StartNS)
	}
	return pick, latest, true
}

// subsetSum finds a subset of cands (in order, the earliest preferred)
// whose quantities add up to target: a table over the sums.
func subsetSum(unknown []*Line, cands []int, target int64) ([]int, bool) {
	// from[v] is the candidate that first reached sum v, -1 none.
	from := make([]int, target+1)
	for v := range from {
		from[v] = -1
	}
	prev := make([]int64, target+1)
	reach := make([]bool, target+1)
	reach[0] = true
	for _, k := range cands {
		q := unknown[k].Quantity
		for v := target; v >= q; v-- {
			if !reach[v] && reach[v-q] {
				reach[v], from[v], prev[v] = true, k, v-q
			}
		}
		if reach[target] {
			break
		}
	}
	if !reach[target] {
		return nil, false
	}
	var out []int
	for v := target; v > 0; v = prev[v] {
		out = append(out, from[v])
	}
	return out, true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
