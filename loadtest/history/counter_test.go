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
