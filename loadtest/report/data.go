package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteJSON writes the report as indented JSON; durations are in
// nanoseconds (keys ending in _ns).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("report: write json: %w", err)
	}
	return nil
}

// WriteCSV writes one row per second of each run: strategy, second (0 is
// the first after the warmup), answers, 201s (and the 202s of reserve),
// sold_out, lock failures (lock_timeout and lock_lost), other failures,
// and the p50 and p99 of that second's answers in milliseconds (empty
// when none came).
func (r *Report) WriteCSV(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintln(ew, "strategy,second,answers,201,sold_out,lock_failures,other_failures,p50_ms,p99_ms")
	ms := func(d time.Duration, n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond))
	}
	for _, res := range r.Results {
		name := strategyCell(res)
		if strings.ContainsAny(name, ",\"\n") {
			name = `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
		}
		for _, s := range res.Series {
			fmt.Fprintf(ew, "%s,%d,%d,%d,%d,%d,%d,%s,%s\n", name, s.Second, s.Answers, s.Created, s.SoldOut,
				s.LockFailures, s.OtherFailures, ms(s.P50, s.Answers), ms(s.P99, s.Answers))
		}
	}
	if ew.err != nil {
		return fmt.Errorf("report: write csv: %w", ew.err)
	}
	return nil
}
