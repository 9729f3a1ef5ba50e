package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// TableWidth is the most columns any line of WriteTable takes (with
// strategy names of the server's length and instance URLs that fit).
const TableWidth = 100

// WriteTable prints the report for a person, every line within TableWidth
// columns: what ran, then per strategy its answers, its latency by outcome
// and its audit (three short tables, one row per strategy each), a legend,
// notes and anything that went wrong.
func (r *Report) WriteTable(w io.Writer) error { return r.writeTable(w, false) }

// WriteWideTable prints the report as WriteTable does, but every column
// in one table, one row per strategy: its lines are as wide as they need.
func (r *Report) WriteWideTable(w io.Writer) error { return r.writeTable(w, true) }

// writeTable prints the report; over a catalogue, with a HOTTEST block.
func (r *Report) writeTable(w io.Writer, wide bool) error {
	ew := &errWriter{w: w}
	r.writeHeader(ew)
	raw := len(r.Results) > 0 && r.Results[0].Raw
	open := r.Config.Mode == "open"
	var blocks [][][]string
	switch {
	case raw:
		blocks = [][][]string{r.rawRows(open, wide)}
	case wide:
		blocks = [][][]string{r.wideRows(open)}
	default:
		blocks = r.narrowRows(open)
	}
	if hot := r.hottestRows(); hot != nil && !raw {
		blocks = append(blocks, hot)
	}
	for i, rows := range blocks {
		if i > 0 {
			fmt.Fprintln(ew)
		}
		var b strings.Builder
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, row := range rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		_ = tw.Flush() // a strings.Builder takes every write
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			fmt.Fprintln(ew, strings.TrimRight(line, " "))
		}
	}
	r.writeFooter(ew, raw)
	if ew.err != nil {
		return fmt.Errorf("report: write table: %w", ew.err)
	}
	return nil
}

// narrowRows are the three tables of the default output.
func (r *Report) narrowRows(open bool) [][][]string {
	answers := [][]string{{"STRATEGY", "SAFE", "REQUESTS", "201", "SOLD_OUT", "LOCK_TIMEOUT", "OTHER"}}
	if open {
		answers[0] = append(answers[0], "DROPPED")
	}
	answers[0] = append(answers[0], "201/S", "SOLD_OUT_AT")
	lat := [][]string{
		{"", "201", "", "", "SOLD_OUT", "", ""},
		{"LATENCY", "P50", "P99", "MAX", "P50", "P99", "MAX"},
	}
	audit := [][]string{{"AUDIT", "FINAL_STOCK", "UNITS_SOLD", "OVERSOLD", "VERDICT"}}
	for _, res := range r.Results {
		name := strategyCell(res)
		row := []string{name, yesNo(res.Safe), itoa(res.Requests), itoa(res.Successes),
			itoa(res.Outcomes[OutcomeSoldOut]), itoa(res.Outcomes[OutcomeLockTimeout]), itoa(otherCount(res))}
		if open {
			row = append(row, itoa(res.Dropped))
		}
		answers = append(answers, append(row, sellRateCell(res), soldOutCell(res)))
		c, s := successLatency(res), res.LatencyByOutcome[OutcomeSoldOut]
		lat = append(lat, []string{name, dur(c.P50), dur(c.P99), dur(c.Max), dur(s.P50), dur(s.P99), dur(s.Max)})
		stock, sold, oversold := auditCells(res)
		audit = append(audit, []string{name, stock, sold, oversold, res.Verdict})
	}
	blocks := [][][]string{answers, lat, audit}
	if hist := r.historyRows(); hist != nil {
		blocks = append(blocks, hist)
	}
	return blocks
}

// historyRows is the check of each run's history (-history), and the
// undersell figures; nil without -history.
func (r *Report) historyRows() [][]string {
	rows := [][]string{{"HISTORY", "PURCHASES", "LINEARIZABLE", "UNDERSOLD", "UNSOLD"}}
	for _, res := range r.Results {
		h := res.History
		if h == nil {
			continue
		}
		unsold := "-"
		if res.UnsoldUnits != nil {
			unsold = strconv.FormatInt(*res.UnsoldUnits, 10)
		}
		lin := "not checked"
		if h.Checked {
			lin = yesNo(h.Linearizable)
		}
		rows = append(rows, []string{strategyCell(res), itoa(h.Purchases), lin, itoa(h.UndersoldAnswers), unsold})
	}
	if len(rows) == 1 {
		return nil
	}
	return rows
}

// wideRows is every column in one table.
func (r *Report) wideRows(open bool) [][]string {
	head := []string{"STRATEGY", "SAFE", "REQUESTS", "201", "SOLD_OUT", "LIMIT", "LOCK_TIMEOUT", "LOCK_LOST", "4XX", "5XX", "NET", "OTHER"}
	if open {
		head = append(head, "DROPPED", "MAX_LATE")
	}
	head = append(head, "REQ/S", "201/S_RUN", "201/S", "SOLD_OUT_AT",
		"201_P50", "201_P99", "201_MAX", "SOLD_OUT_P50", "SOLD_OUT_P99", "SOLD_OUT_MAX",
		"ALL_P50", "ALL_P95", "ALL_P99", "ALL_P99.9", "ALL_MAX", "FINAL_STOCK", "UNITS_SOLD", "OVERSOLD")
	promises := r.hasPromises()
	if promises {
		head = append(head, "PROMISES", "KEPT", "FAILED", "LOST", "PENDING", "LAG_P50", "LAG_P99")
	}
	rows := [][]string{append(head, "VERDICT")}
	for _, res := range r.Results {
		o := res.Outcomes
		row := []string{strategyCell(res), yesNo(res.Safe), itoa(res.Requests), itoa(res.Successes), itoa(o[OutcomeSoldOut]),
			itoa(o[OutcomeLimitExceeded]), itoa(o[OutcomeLockTimeout]), itoa(o[OutcomeLockLost]), itoa(o[OutcomeOther4xx]),
			itoa(o[Outcome5xx]), itoa(o[OutcomeTransport]), itoa(o[OutcomeOther])}
		if open {
			row = append(row, itoa(res.Dropped), dur(res.MaxSendDelay))
		}
		c, s, l := successLatency(res), res.LatencyByOutcome[OutcomeSoldOut], res.Latency
		stock, sold, oversold := auditCells(res)
		row = append(row, rate(res.Throughput), rate(res.SuccessThroughput), sellRateCell(res), soldOutCell(res),
			dur(c.P50), dur(c.P99), dur(c.Max), dur(s.P50), dur(s.P99), dur(s.Max),
			dur(l.P50), dur(l.P95), dur(l.P99), dur(l.P999), dur(l.Max), stock, sold, oversold)
		if promises {
			row = append(row, promiseCells(res.Promises)...)
		}
		rows = append(rows, append(row, res.Verdict))
	}
	return rows
}

// rawRows is the table of the raw mode.
func (r *Report) rawRows(open, wide bool) [][]string {
	head := []string{"TARGET", "REQUESTS", "OK(2XX)", "OTHER"}
	if open {
		head = append(head, "DROPPED")
	}
	head = append(head, "REQ/S", "P50", "P99")
	if wide {
		head = append(head, "P95", "P99.9")
	}
	rows := [][]string{append(head, "MAX", "VERDICT")}
	for _, res := range r.Results {
		l := res.Latency
		row := []string{res.Strategy, itoa(res.Requests), itoa(res.Successes), itoa(res.Requests - res.Successes)}
		if open {
			row = append(row, itoa(res.Dropped))
		}
		row = append(row, rate(res.Throughput), dur(l.P50), dur(l.P99))
		if wide {
			row = append(row, dur(l.P95), dur(l.P999))
		}
		rows = append(rows, append(row, dur(l.Max), res.Verdict))
	}
	return rows
}

// writeHeader writes what the runs sold, how the load was sent, and the
// driver's machine.
func (r *Report) writeHeader(w io.Writer) {
	writeWrapped(w, r.soldLine())
	writeWrapped(w, r.Config.loadLine())
	e := r.Environment
	writeWrapped(w, fmt.Sprintf("driver: %s %s/%s, %d CPUs, GOMAXPROCS %d", e.GoVersion, e.OS, e.Arch, e.NumCPU, e.GOMAXPROCS))
	fmt.Fprintln(w)
}

// soldLine says when the report was made, against which instances, and
// which products were sold.
func (r *Report) soldLine() string {
	c := r.Config
	var b strings.Builder
	fmt.Fprintf(&b, "seckill load test, %s: %s (%s)", r.Start.Format("2006-01-02 15:04:05"),
		plural(len(c.URLs), "instance"), strings.Join(c.URLs, ", "))
	switch {
	case c.Endpoint != "":
	case c.Products > 0:
		fmt.Fprintf(&b, ", %s", c.catalogueHeader())
		if c.Stock > 0 {
			fmt.Fprintf(&b, ", the stock of each reset to %d before each run", c.Stock)
		}
	default:
		fmt.Fprintf(&b, ", product %d", c.ProductID)
		if c.Stock > 0 {
			fmt.Fprintf(&b, ", stock reset to %d before each run", c.Stock)
		}
	}
	return b.String()
}

// loadLine says how the load was sent: its loop, length and workers, its
// warmup, and what each purchase asked for.
func (c Settings) loadLine() string {
	var b strings.Builder
	switch {
	case c.Mode == "open":
		rates := make([]string, len(c.Rates))
		for i, v := range c.Rates {
			rates[i] = strconv.FormatFloat(v, 'f', -1, 64)
		}
		each := ""
		if len(c.Rates) > 1 {
			each = " each"
		}
		fmt.Fprintf(&b, "open loop: %s requests/s for %s%s (%d in all), at most %d in flight; latency counts from the intended send time",
			strings.Join(rates, ", "), c.Duration, each, c.Requests, c.Concurrency)
	case c.Requests > 0:
		fmt.Fprintf(&b, "closed loop: %d requests per run, %d workers", c.Requests, c.Concurrency)
	default:
		fmt.Fprintf(&b, "closed loop: %s per run, %d workers", c.Duration, c.Concurrency)
	}
	if c.Warmup > 0 {
		fmt.Fprintf(&b, "; a warmup of %s first, left out of the figures", c.Warmup)
	}
	if c.Endpoint == "" {
		fmt.Fprintf(&b, "; quantity %d", c.Quantity)
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"hold", c.Hold}, {"pause", c.Pause}} {
			if d.v > 0 {
				fmt.Fprintf(&b, ", %s %s", d.name, d.v)
			}
		}
		if c.Batch > 0 {
			fmt.Fprintf(&b, ", batch %d", c.Batch)
		}
		if c.Fencing != nil {
			fmt.Fprintf(&b, ", fencing %t", *c.Fencing)
		}
	}
	return b.String()
}

func (r *Report) writeFooter(w io.Writer, raw bool) {
	fmt.Fprintln(w)
	if raw {
		writeWrapped(w, "OTHER: non-2xx answers and transport errors. Latency from send (the intended send time in the open loop) to the whole answer.")
	} else {
		writeWrapped(w, "OTHER: limit_exceeded, lock_lost, other 4xx and 5xx, and requests without an answer (counted apart below when there are any). "+
			"201/S: 201s per second while stock lasted, until the last unit went (or over the whole run). "+
			"SOLD_OUT_AT: when the last unit went. LATENCY: of the 201s and of the sold_out answers apart, "+
			"from send (the intended send time in the open loop) to the whole answer. "+
			"AUDIT: the server's audit after the run.")
	}
	if !raw && r.historyRows() != nil {
		writeWrapped(w, "HISTORY: every purchase of the run checked against one stock counter (-history); "+
			"LINEARIZABLE: every answer fits it. UNDERSOLD: sold_out answers given while stock surely remained. "+
			"UNSOLD: units left at the end of a run whose demand exceeded the stock.")
	}
	if !raw && r.hasPromises() {
		writeWrapped(w, "PROMISES: under reserve a 202 is a promise that the order will be written; it counts "+
			"with the 201s (201, 201/S, SOLD_OUT_AT, the 201 latency). The driver asks "+
			"GET /api/v1/purchases/{request_id} for each, from its arrival until it became an order (kept), "+
			"the database refused it (failed) or none was found (lost), or the drain after the run (-drain) "+
			"ran out (still pending); the audit is read after the drain. A promise not kept fails the run. "+
			"Write lag: of the promises followed from their 202 (64 at a time while the load runs; the others "+
			"are asked after it), from the 202 to the first poll that found the order, an upper bound at the "+
			"polls' resolution (the orders carry no time).")
	}
	if r.hottestRows() != nil && !raw {
		writeWrapped(w, "HOTTEST: the products that drew the most requests in each run (the warmup's left out), "+
			"their share of the run's requests, and their 201s. The tables above sum the catalogue: "+
			"its audit is the sum of its products' audits.")
	}
	for _, res := range r.Results {
		if note := res.catalogueNote(r.Config); note != "" && !raw {
			writeWrapped(w, strategyCell(res)+": "+note)
		}
	}
	for _, res := range r.Results {
		for _, note := range res.notes(r.Config) {
			writeWrapped(w, strategyCell(res)+": "+note)
		}
		if h := res.History; h != nil && h.Violation != "" {
			first, _, _ := strings.Cut(h.Violation, "\n")
			writeWrapped(w, strategyCell(res)+": its history is not linearizable: "+first)
		}
		if note := r.slowerUnguarded(res); note != "" && !raw {
			writeWrapped(w, strategyCell(res)+": "+note)
		}
	}
	if f := r.Failures(); len(f) > 0 {
		fmt.Fprintln(w, "\nFAILED:")
		for _, s := range f {
			writeWrapped(w, "  - "+s)
		}
	}
}
