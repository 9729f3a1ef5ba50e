package driver

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the report for a person: what ran, then one row per
// strategy, then a legend and anything that went wrong.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	r.writeHeader(ew)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	raw := len(r.Results) > 0 && r.Results[0].Raw
	if raw {
		fmt.Fprintln(tw, "TARGET\tREQUESTS\tOK(2XX)\tOTHER\tREQ/S\tP50\tP95\tP99\tP99.9\tMAX\tVERDICT")
	} else {
		fmt.Fprintln(tw, "STRATEGY\tSAFE\tREQUESTS\tOK(201)\tSOLD_OUT\tLOCK_TIMEOUT\tOTHER\tREQ/S\tOK/S\tP50\tP95\tP99\tP99.9\tSOLD_OUT_AT\tFINAL_STOCK\tUNITS_SOLD\tOVERSOLD\tVERDICT")
	}
	for _, res := range r.Results {
		l := res.Latency
		if raw {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				res.Strategy, res.Requests, res.Successes, otherCell(res), rate(res.Throughput),
				dur(l.P50), dur(l.P95), dur(l.P99), dur(l.P999), dur(l.Max), res.Verdict)
			continue
		}
		stock, sold, oversold := "-", "-", "-"
		if res.Audited {
			stock = strconv.FormatInt(res.Audit.Stock, 10)
			sold = strconv.FormatInt(res.Audit.UnitsSold, 10)
			oversold = strconv.FormatInt(res.Audit.OversoldUnits, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			strategyCell(res), yesNo(res.Safe), res.Requests, res.Successes,
			res.Outcomes[OutcomeSoldOut], res.Outcomes[OutcomeLockTimeout], otherCell(res),
			rate(res.Throughput), rate(res.SuccessThroughput),
			dur(l.P50), dur(l.P95), dur(l.P99), dur(l.P999), dur(res.TimeToSoldOut),
			stock, sold, oversold, res.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	r.writeFooter(ew, raw)
	return ew.err
}

func (r *Report) writeHeader(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "seckill load test, %s: %s", r.Start.Format("2006-01-02 15:04:05"), plural(len(c.URLs), "instance"))
	fmt.Fprintf(w, " (%s)", strings.Join(c.URLs, ", "))
	if c.Endpoint == "" {
		fmt.Fprintf(w, ", product %d", c.ProductID)
		if c.Stock > 0 {
			fmt.Fprintf(w, ", stock reset to %d before each run", c.Stock)
		}
	}
	fmt.Fprintln(w)
	if c.Mode == "open" {
		fmt.Fprintf(w, "open loop: %g requests/s for %s (%d in all), at most %d in flight; latency counts from the intended send time",
			c.Rate, c.Duration, c.Requests, c.Concurrency)
	} else {
		fmt.Fprintf(w, "closed loop: %d requests per run, %d workers", c.Requests, c.Concurrency)
	}
	if c.Endpoint == "" {
		fmt.Fprintf(w, "; quantity %d", c.Quantity)
		if c.Hold > 0 {
			fmt.Fprintf(w, ", hold %s", c.Hold)
		}
		if c.Fencing != nil {
			fmt.Fprintf(w, ", fencing %t", *c.Fencing)
		}
	}
	e := r.Environment
	fmt.Fprintf(w, "\ndriver: %s %s/%s, %d CPUs, GOMAXPROCS %d\n\n", e.GoVersion, e.OS, e.Arch, e.NumCPU, e.GOMAXPROCS)
}

func (r *Report) writeFooter(w io.Writer, raw bool) {
	fmt.Fprintln(w)
	if raw {
		fmt.Fprintln(w, "OTHER: non-2xx answers and transport errors (net). Latency from send to the whole answer.")
	} else {
		fmt.Fprintln(w, "OTHER: lost = 503 lock_lost, limit = 409 limit_exceeded, 4xx/5xx = other errors, net = no answer.")
		fmt.Fprintln(w, "REQ/S and OK/S: all answers and 201s per second of the whole run. SOLD_OUT_AT: first sold_out answer")
		fmt.Fprintln(w, "(or last 201 when the stock reached 0). FINAL_STOCK, UNITS_SOLD, OVERSOLD: the server's audit after the run.")
	}
	for _, res := range r.Results {
		if len(res.Codes) > 0 {
			keys := make([]string, 0, len(res.Codes))
			for k := range res.Codes {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = fmt.Sprintf("%d × %s", res.Codes[k], k)
			}
			fmt.Fprintf(w, "%s: %s\n", strategyCell(res), strings.Join(parts, ", "))
		}
		if len(res.Samples) > 0 {
			fmt.Fprintf(w, "%s: transport errors, e.g. %s\n", strategyCell(res), res.Samples[0])
		}
		if r.Config.Mode == "open" && res.MaxSendDelay >= time.Millisecond {
			fmt.Fprintf(w, "%s: some requests left up to %s after their intended time (all %d in flight); their latency includes the wait\n",
				strategyCell(res), dur(res.MaxSendDelay), r.Config.Concurrency)
		}
	}
	if f := r.Failures(); len(f) > 0 {
		fmt.Fprintln(w, "\nFAILED:")
		for _, s := range f {
			fmt.Fprintln(w, "  - "+s)
		}
	}
}

func strategyCell(r Result) string {
	switch {
	case r.Default && r.Strategy != "":
		return r.Strategy + " (default)"
	case r.Default:
		return "(default)"
	}
	return r.Strategy
}

// otherCell lists the failures that have no column of their own.
func otherCell(r Result) string {
	var parts []string
	add := func(name, key string) {
		if n := r.Outcomes[key]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", name, n))
		}
	}
	add("lost", OutcomeLockLost)
	add("limit", OutcomeLimitExceeded)
	add("4xx", OutcomeOther4xx)
	add("5xx", Outcome5xx)
	add("net", OutcomeTransport)
	add("other", OutcomeOther)
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// rate formats a per-second figure.
func rate(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// dur formats a duration with three significant digits or so; 0 is "-".
func dur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// errWriter remembers the first write error, so that a table of many
// Fprintf calls checks it once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = fmt.Errorf("driver: write table: %w", err)
	}
	return n, err
}
