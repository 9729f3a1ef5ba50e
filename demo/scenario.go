package demo

import (
	"fmt"
	"strings"

	"github.com/seckill/seckill/client"
)

// Scenario is one story of the workshop.
type Scenario struct {
	// Name is what -scenario takes, e.g. "setnx-clock".
	Name string
	// Title heads its table.
	Title string
	// Shows says in one line what it shows (-list).
	Shows string
	// Story says, before it runs, what it does.
	Story string
	// Faults says it injects faults (stops or restarts Redis nodes, kills
	// an instance): it runs on embedded nodes of its own whatever
	// SECKILL_REDIS_ADDRS says.
	Faults bool
	Run    func(w *World) (*Result, error)
}

// Result is what a scenario found: a table with a verdict per row.
type Result struct {
	Scenario string `json:"scenario"`
	Title    string `json:"title"`
	// Columns are the table's headings; the last is the verdict's.
	Columns []string `json:"columns"`
	Rows    []Row    `json:"rows"`
	// Notes are said after the table.
	Notes []string `json:"notes,omitempty"`
	// Seconds is how long the scenario took.
	Seconds float64 `json:"seconds"`
}

// Row is one line of a Result.
type Row struct {
	// Key names the row for programs, e.g. "setnx fencing=off".
	Key string `json:"key"`
	// Series is the id of the series (one product on sale) the row is
	// about, when there is one.
	Series string `json:"series,omitempty"`
	// Cells hold one value per column but the verdict's.
	Cells   []string `json:"cells"`
	Verdict string   `json:"verdict"`
	// Flaw says the row shows a flaw: stock oversold, two holders of one
	// lock, a strategy that stopped selling, a lock taken per purchase.
	Flaw bool `json:"flaw"`
	// Expected says the row went as the lesson says: a safe strategy held,
	// an unsafe one showed its flaw.
	Expected bool `json:"expected"`
}

// OK says every row went as the lesson says.
func (r *Result) OK() bool {
	for _, row := range r.Rows {
		if !row.Expected {
			return false
		}
	}
	return len(r.Rows) > 0
}

// Row returns the row called key.
func (r *Result) Row(key string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Key == key {
			return row, true
		}
	}
	return Row{}, false
}

// judge gives the row its verdict: OVERSOLD, and a flaw, when the audit
// did not hold; else flaw when the row shows a flaw, fine when it does not.
func (row *Row) Judge(audit client.Audit, flaw, fine string) {
	switch {
	case !audit.Held():
		row.Flaw = true
		row.Verdict = fmt.Sprintf("OVERSOLD by %d", audit.OversoldUnits)
	case row.Flaw:
		row.Verdict = flaw
	default:
		row.Verdict = fine
	}
}

// add appends a row; expected says it went as the lesson says, and its
// verdict says so when it did not.
func (r *Result) Add(row Row, expected bool) {
	row.Expected = expected
	if !expected {
		row.Verdict = "UNEXPECTED: " + row.Verdict
	}
	r.Rows = append(r.Rows, row)
}

// Scenarios returns every scenario, in the order the demo plays them.
func Scenarios() []Scenario {
	return []Scenario{
		saleScenario(),
		clockScenario(),
		unlockScenario(),
		overrunScenario(),
		killScenario(),
		nodeDownScenario(),
		nodeRestartScenario(),
		batchScenario(),
		linearScenario(),
		counterScenario(),
		reserveScenario(),
		ordersScenario(),
		failoverScenario(),
		galeraScenario(),
	}
}

// Select returns the scenarios named in list, a comma-separated list of
// names, in the order given; an empty list is every scenario.
func Select(list string) ([]Scenario, error) {
	all := Scenarios()
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	var out []Scenario
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, sc := range all {
			if sc.Name == name {
				out = append(out, sc)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("demo: no scenario %q (-list lists them: %s)", name, strings.Join(names(all), ", "))
		}
	}
	return out, nil
}

func names(scs []Scenario) []string {
	out := make([]string, len(scs))
	for i, sc := range scs {
		out[i] = sc.Name
	}
	return out
}
