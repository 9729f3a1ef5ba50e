package driver

import (
	"encoding/json"
	"math"
	"strings"
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

// TestCatalogueFailuresNameTheProduct: a safe strategy that oversold one
// product of a catalogue fails the run, naming that product; an unsafe one
// is noted, not failed. The table, the page and the JSON carry the
// catalogue and its broken product, and a report read back from the JSON
// fails the same way.
func TestCatalogueFailuresNameTheProduct(t *testing.T) {
	broken := ProductAudit{Name: "loadtest-3", Created: 12,
		Audit: Audit{ProductID: 9, InitialStock: 10, Stock: -2, Orders: 12, UnitsSold: 12, OversoldUnits: 2}}
	for _, safe := range []bool{true, false} {
		sum := Audit{InitialStock: 30, Stock: -2, Orders: 32, UnitsSold: 32, OversoldUnits: 2}
		res := Result{Strategy: "s", Safe: safe, Requests: 50, Successes: 32, Outcomes: map[string]int{OutcomeCreated: 32},
			Audited: true, Audit: sum, RunOrders: 32, RunUnits: 32, CountsAgree: true,
			Catalogue: &CatalogueRun{Broken: []ProductAudit{broken}}}
		rep := &Report{Results: []Result{res}, Config: Settings{Products: 3, Zipf: 1,
			Catalogue: []CatalogueProduct{{7, "loadtest-1"}, {8, "loadtest-2"}, {9, "loadtest-3"}}}}
		failures := strings.Join(rep.Failures(), "; ")
		if got := strings.Contains(failures, "product loadtest-3 (id 9)"); got != safe {
			t.Errorf("safe %t: Failures() = %q; want loadtest-3 named: %t", safe, failures, safe)
		}
		var table, page, js strings.Builder
		if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "the invariant broke on loadtest-3 (oversold 2") ||
			!strings.Contains(strings.Join(strings.Fields(table.String()), " "), "a catalogue of 3 products, loadtest-1 to loadtest-3 (ids 7 to 9)") {
			t.Errorf("safe %t: WriteTable = %v:\n%s\nwant the catalogue in the header, loadtest-3 named in the notes", safe, err, table.String())
		}
		if err := rep.WriteHTML(&page); err != nil || !strings.Contains(page.String(), "a catalogue of 3 products (loadtest-1 to loadtest-3), Zipf 1\n") ||
			!strings.Contains(page.String(), "0 of 3 products sold out; the invariant broke on loadtest-3 (oversold 2") {
			t.Errorf("safe %t: WriteHTML = %v:\n%s\nwant the catalogue in the header, loadtest-3 named under the run", safe, err, page.String())
		}
		var back Report
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(js.String()), &back); err != nil || back.Results[0].Catalogue == nil ||
			len(back.Results[0].Catalogue.Broken) != 1 || back.Results[0].Catalogue.Broken[0] != broken {
			t.Errorf("safe %t: the JSON (%v) gives the catalogue run %+v; want loadtest-3 broken", safe, err, back.Results[0].Catalogue)
		}
		if got := strings.Contains(strings.Join(back.Failures(), "; "), "product loadtest-3 (id 9)"); got != safe {
			t.Errorf("safe %t: the JSON's report fails with loadtest-3 named: %t", safe, got)
		}
	}
}
