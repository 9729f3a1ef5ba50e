package history

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestCounterAgreesWithPorcupine holds the direct check against
// porcupine's exhaustive search on thousands of small random histories,
// linearizable or not, with and without purchases of unknown outcome and
// with quantities of 1 to 3.
func TestCounterAgreesWithPorcupine(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var valid, invalid int
	for n := range 20_000 {
		lines := randomHistory(rng)
		res, err := CheckTimeout(lines, 10*time.Second)
		if err != nil {
			t.Fatalf("history %d: Check = %v", n, err)
		}
		segs, _, err := segments(lines)
		if err != nil {
			t.Fatal(err)
		}
		model, ops := porcupineOf(segs, 0)
		want := porcupine.CheckOperations(model, ops)
		if res.Linearizable != want {
			t.Fatalf("history %d: Check says linearizable %v (%s); porcupine says %v\n%s", n, res.Linearizable, res.Violation, want, show(lines))
		}
		// The direct check alone, where it says it is sure.
		for _, s := range segs {
			if v := checkCounter(s); !v.ok && v.sure && want {
				t.Fatalf("history %d: the direct check is sure of a violation porcupine does not find: %s\n%s", n, v.why, show(lines))
			}
		}
		if want {
			valid++
		} else {
			invalid++
		}
	}
	t.Logf("%d linearizable, %d not", valid, invalid)
	if valid < 1000 || invalid < 1000 {
		t.Errorf("%d linearizable and %d not: the generator should make plenty of both", valid, invalid)
	}
}

// randomHistory is a small history of one product: a few purchases with
// random windows and random answers.
func randomHistory(rng *rand.Rand) []Line {
	stock := rng.Int64N(6)
	lines := []Line{{Product: 1, Stock: &stock, TimeNS: 0}}
	// Mostly plausible: answers drawn from a real run, then perturbed.
	left := stock
	for k := range 2 + rng.IntN(6) {
		q := 1 + rng.Int64N(3)
		start := 1 + rng.Int64N(20)
		l := Line{Product: 1, UserID: fmt.Sprint("u", k), RequestID: fmt.Sprint("r", k), Quantity: q,
			StartNS: start, EndNS: start + rng.Int64N(10)}
		switch r := rng.IntN(10); {
		case r < 1:
			l.Status = 0
			if rng.IntN(2) == 0 && left >= q {
				left -= q
			}
		case r < 6 && left >= q:
			left -= q
			rem, id := left, int64(k)
			if rng.IntN(8) == 0 {
				rem = rng.Int64N(6) // a wrong answer now and then
			}
			l.Status, l.RemainingStock, l.OrderID = 201, &rem, &id
		default:
			l.Status, l.Code = 409, "sold_out"
		}
		lines = append(lines, l)
	}
	return lines
}

func show(lines []Line) string {
	var s string
	for _, l := range lines {
		if l.Stock != nil {
			s += fmt.Sprintf("stock %d\n", *l.Stock)
			continue
		}
		o, _ := outputOf(&l)
		s += fmt.Sprintf("[%d,%d] q=%d status=%d %s", l.StartNS, l.EndNS, l.Quantity, l.Status, l.Code)
		if o.outcome == took {
			s += fmt.Sprintf(" left=%d", *l.RemainingStock)
		}
		s += "\n"
	}
	return s
}

// TestCounterExactWithOneUnknownQuantity: when the purchases of unknown
// outcome of a segment all asked for the same quantity, the direct check
// decides alone (a failure is sure) and agrees with porcupine.
func TestCounterExactWithOneUnknownQuantity(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 5))
	var invalid int
	for n := range 20_000 {
		lines := randomHistory(rng)
		q := 1 + rng.Int64N(3)
		for i := range lines {
			if lines[i].Stock == nil && lines[i].Status == 0 {
				lines[i].Quantity = q
			}
		}
		segs, _, err := segments(lines)
		if err != nil {
			t.Fatal(err)
		}
		model, ops := porcupineOf(segs, 0)
		want := porcupine.CheckOperations(model, ops)
		v := checkCounter(segs[0])
		if v.ok != want || !v.ok && !v.sure {
			t.Fatalf("history %d: direct check ok %v, sure %v (%s); porcupine says %v\n%s",
				n, v.ok, v.sure, v.why, want, show(lines))
		}
		if !want {
			invalid++
		}
	}
	if invalid < 1000 {
		t.Errorf("%d histories not linearizable: the generator should make plenty", invalid)
	}
}

// TestCounterSoldOutBeforeAStockedSale: a sold_out that ended before a 201
// began which found enough stock is a violation whatever the purchases of
// unknown outcome (of mixed quantities, and enough of them to have taken
// the stock below 3 had no 201 said otherwise) did.
func TestCounterSoldOutBeforeAStockedSale(t *testing.T) {
	stock, left, id := int64(10), int64(4), int64(1)
	lines := []Line{{Product: 1, Stock: &stock},
		{Product: 1, UserID: "a", Quantity: 5, StartNS: 1, EndNS: 100},
		{Product: 1, UserID: "b", Quantity: 3, StartNS: 1, EndNS: 100},
		{Product: 1, UserID: "c", Quantity: 3, StartNS: 1, EndNS: 2, Status: 409, Code: "sold_out"},
		{Product: 1, UserID: "d", Quantity: 3, StartNS: 5, EndNS: 6, Status: 201, RemainingStock: &left, OrderID: &id}}
	segs, _, err := segments(lines)
	if err != nil {
		t.Fatal(err)
	}
	if v := checkCounter(segs[0]); v.ok || !v.sure {
		t.Errorf("checkCounter = ok %v, sure %v (%s); want a sure violation", v.ok, v.sure, v.why)
	}
}
