package report_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/loadtest/report"
)

// TestFailures: a result fails the run when a safe strategy broke the
// invariant, the counts disagree or nothing got through; an unsafe one that
// oversold does not.
func TestFailures(t *testing.T) {
	held := api.Audit{InitialStock: 10, Stock: 0, Orders: 10, UnitsSold: 10, Consistent: true}
	oversold := api.Audit{InitialStock: 10, Stock: -2, Orders: 12, UnitsSold: 12, OversoldUnits: 2}
	ok := func(safe bool, a api.Audit) report.Result {
		return report.Result{Strategy: "s", Safe: safe, Requests: 50, Successes: int(a.Orders),
			Outcomes: map[string]int{report.OutcomeCreated: int(a.Orders)}, Audited: true, Audit: a,
			RunOrders: a.Orders, RunUnits: a.UnitsSold, CountsAgree: true}
	}
	disagree := ok(true, held)
	disagree.Successes, disagree.CountsAgree = 9, false
	nothing := report.Result{Strategy: "s", Requests: 5, Outcomes: map[string]int{report.OutcomeTransport: 5}}
	promised := func(safe bool, p report.Promises) report.Result {
		res := ok(safe, held)
		res.Promises = &p
		return res
	}
	// Ten promises, five kept in the drain's time and three still pending,
	// two of which the audit, read after it, counted as orders.
	drainedShort := promised(true, report.Promises{Made: 10, Kept: 5, Failed: 2, Pending: 3, DrainLimit: time.Second})
	drainedShort.Successes, drainedShort.RunOrders, drainedShort.CountsAgree = 10, 7, false
	for _, tc := range []struct {
		name string
		res  report.Result
		want string // a part of the failure; "" for none
	}{
		{"safe held", ok(true, held), ""},
		{"unsafe oversold", ok(false, oversold), ""},
		{"safe oversold", ok(true, oversold), "broke the stock invariant"},
		{"counts disagree", disagree, "counts disagree"},
		{"nothing got through", nothing, "no request got through"},
		{"every promise kept", promised(true, report.Promises{Made: 10, Kept: 10}), ""},
		{"a promise failed", promised(true, report.Promises{Made: 10, Kept: 9, Failed: 1}), "1 of its 10 promises (202s) was not kept: 1 failed"},
		{"a promise lost, unsafe", promised(false, report.Promises{Made: 10, Kept: 9, Lost: 1}), "1 lost (purchase_not_found)"},
		{"a promise still pending", promised(true, report.Promises{Made: 10, Kept: 9, Pending: 1, DrainLimit: time.Second}),
			"1 still pending when the drain of 1s ran out"},
		{"promises written after the drain", drainedShort, "2 of the 3 promises still pending when the drain of 1s ran out, which became orders after it if so"},
	} {
		rep := &report.Report{Results: []report.Result{tc.res}}
		got := strings.Join(rep.Failures(), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: Failures() = %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestCatalogueHeaderSaysWhichIdIsWhich: the table's header gives the
// catalogue's ids as a range matching its names only when the k-th name
// has the k-th id; products created side by side take their ids in no
// particular order, and the header says so.
func TestCatalogueHeaderSaysWhichIdIsWhich(t *testing.T) {
	for _, c := range []struct {
		ids  []int64
		want string
	}{
		{[]int64{3, 4, 5}, "loadtest-1 to loadtest-3 (ids 3 to 5)"},
		{[]int64{15, 6, 3}, "loadtest-1 to loadtest-3 (ids from 3 to 15, not in the names' order)"},
	} {
		rep := &report.Report{Config: report.Settings{Products: 3, Catalogue: []report.CatalogueProduct{
			{c.ids[0], "loadtest-1"}, {c.ids[1], "loadtest-2"}, {c.ids[2], "loadtest-3"}}}}
		var table strings.Builder
		if err := rep.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(strings.Fields(table.String()), " "); !strings.Contains(got, c.want) {
			t.Errorf("ids %v: the header does not say %q:\n%s", c.ids, c.want, table.String())
		}
	}
}

// TestCatalogueFailuresNameTheProduct: a safe strategy that oversold one
// product of a catalogue fails the run, naming that product; an unsafe one
// is noted, not failed. The table, the page and the JSON carry the
// catalogue and its broken product, and a report read back from the JSON
// fails the same way.
func TestCatalogueFailuresNameTheProduct(t *testing.T) {
	broken := report.ProductAudit{Name: "loadtest-3", Created: 12,
		Audit: api.Audit{ProductID: 9, InitialStock: 10, Stock: -2, Orders: 12, UnitsSold: 12, OversoldUnits: 2}}
	for _, safe := range []bool{true, false} {
		sum := api.Audit{InitialStock: 30, Stock: -2, Orders: 32, UnitsSold: 32, OversoldUnits: 2}
		res := report.Result{Strategy: "s", Safe: safe, Requests: 50, Successes: 32, Outcomes: map[string]int{report.OutcomeCreated: 32},
			Audited: true, Audit: sum, RunOrders: 32, RunUnits: 32, CountsAgree: true,
			Catalogue: &report.CatalogueRun{Broken: []report.ProductAudit{broken}}}
		rep := &report.Report{Results: []report.Result{res}, Config: report.Settings{Products: 3, Zipf: 1,
			Catalogue: []report.CatalogueProduct{{7, "loadtest-1"}, {8, "loadtest-2"}, {9, "loadtest-3"}}}}
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
		var back report.Report
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

// TestPromisesInEveryOutput: a run with 202s shows its promises in every
// output: a line under the table (which still fits), columns of the wide
// table, an object of the JSON, a table of the page; one promise not kept
// is BROKEN in the verdict, and fails the run. A report without 202s shows
// none of it.
func TestPromisesInEveryOutput(t *testing.T) {
	for _, broken := range []int{0, 3} {
		rep := sampleReports()["promised"]
		rep.Results[1] = samplePromised(30, broken)
		var table, wide, js, page strings.Builder
		for _, err := range []error{rep.WriteTable(&table), rep.WriteWideTable(&wide), rep.WriteJSON(&js), rep.WriteHTML(&page)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		text := strings.Join(strings.Fields(table.String()), " ")
		for _, want := range []string{"reserve: promises (202s): 31 made, " + itoa(31-broken) + " kept",
			"write lag p50 80.0ms, p99 310ms", "PROMISES: under reserve a 202 is a promise"} {
			if !strings.Contains(text, want) {
				t.Errorf("broken %d: the table lacks %q:\n%s", broken, want, table.String())
			}
		}
		if !strings.Contains(wide.String(), "PROMISES") || !strings.Contains(wide.String(), "LAG_P99") {
			t.Errorf("broken %d: the wide table has no promise columns:\n%s", broken, wide.String())
		}
		if !strings.Contains(js.String(), `"promises": {`) || !strings.Contains(js.String(), `"success_latency": {`) {
			t.Errorf("broken %d: the JSON has no promises or success latency", broken)
		}
		if !strings.Contains(page.String(), "Promises (202s) and their orders") {
			t.Errorf("broken %d: the page has no table of promises", broken)
		}
		res := rep.Results[1]
		failed := strings.Join(rep.Failures(), "; ")
		if got := strings.HasPrefix(res.Verdict, "BROKEN: 3 promises not kept") && strings.Contains(failed, "reserve: 3 of its 31 promises"); got != (broken > 0) {
			t.Errorf("broken %d: verdict %q, failures %q", broken, res.Verdict, failed)
		}
		// The reserve run's 201 latency is its 202s'.
		if !strings.Contains(text, "reserve 40.0ms 160ms 240ms") {
			t.Errorf("broken %d: the reserve row of the latency table is not its 202s' latency:\n%s", broken, table.String())
		}
	}
	var table, wide, js strings.Builder
	rep := sampleReports()["closed"]
	for _, err := range []error{rep.WriteTable(&table), rep.WriteWideTable(&wide), rep.WriteJSON(&js)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, out := range []string{table.String(), wide.String(), js.String()} {
		if strings.Contains(strings.ToLower(out), "promise") || strings.Contains(out, "success_latency") {
			t.Errorf("a report without 202s speaks of promises:\n%s", out)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestNoneSlowerSaysWhy: a run of none slower than a safe strategy's says
// why under the table; not when none was the faster, nor with batch=1.
func TestNoneSlowerSaysWhy(t *testing.T) {
	for _, c := range []struct {
		none  float64
		batch int
		want  bool
	}{{687, 0, true}, {5000, 0, false}, {687, 1, false}} {
		rep := &report.Report{Config: report.Settings{Batch: c.batch}, Results: []report.Result{
			{Strategy: "none", SellRate: c.none, Requests: 10, Successes: 10},
			{Strategy: "redlock", Safe: true, SellRate: 3000, Requests: 10, Successes: 10},
		}}
		var table strings.Builder
		if err := rep.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(strings.Join(strings.Fields(table.String()), " "), "none: slower than redlock (687/s against 3000/s) though it takes no lock")
		if got != c.want {
			t.Errorf("none at %v/s, batch %d: the note is there: %t; want %t:\n%s", c.none, c.batch, got, c.want, table.String())
		}
	}
}
