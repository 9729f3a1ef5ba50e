package lab

import (
	"fmt"
	"time"

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
	// Run plays the story in w and returns its table.
	Run func(w *World) (*Result, error)
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

// Judge gives the row its verdict: OVERSOLD, and a flaw, when the audit
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

// Add appends a row; expected says it went as the lesson says, and its
// verdict says so when it did not.
func (r *Result) Add(row Row, expected bool) {
	row.Expected = expected
	if !expected {
		row.Verdict = "UNEXPECTED: " + row.Verdict
	}
	r.Rows = append(r.Rows, row)
}

// DurWords says a duration for a story or a screen: "300 ms", "1 s", "1.5 s", "1 min",
// with a no-break space that keeps the number and its unit on one line.
func DurWords(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d\u00a0min", d/time.Minute)
	case d >= time.Second:
		return fmt.Sprintf("%g\u00a0s", d.Seconds())
	}
	return fmt.Sprintf("%d\u00a0ms", d.Milliseconds())
}
