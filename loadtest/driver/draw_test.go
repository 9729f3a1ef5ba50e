package driver

import (
	"math"
	"testing"
)

// TestDrawFollowsTheLaw: the product drawn from each request's index
// follows the Zipf law of its exponent, S <= 1 included (math/rand's Zipf
// takes only S > 1), and is the same on every call.
func TestDrawFollowsTheLaw(t *testing.T) {
	const n, draws = 10, 200000
	for _, s := range []float64{0, 0.5, 1, 2.5} {
		d := newDraw(n, s)
		var counts [n]int
		for i := range draws {
			counts[d.pick(i)]++
		}
		h := 0.0
		for k := 1; k <= n; k++ {
			h += math.Pow(float64(k), -s)
		}
		for k, c := range counts {
			want := math.Pow(float64(k+1), -s) / h
			if got := float64(c) / draws; math.Abs(got-want) > 0.01 {
				t.Errorf("S=%g: product %d drawn %.4f of the time; want %.4f", s, k, got, want)
			}
		}
		if again := newDraw(n, s); again.pick(12345) != d.pick(12345) {
			t.Errorf("S=%g: request 12345 drew two products", s)
		}
	}
	if d := newDraw(1, 3); d.pick(7) != 0 {
		t.Error("one product: the draw picked another")
	}
}
