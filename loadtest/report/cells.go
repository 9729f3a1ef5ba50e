package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// share formats a fraction as a percentage.
func share(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

// writeWrapped writes text in lines of at most TableWidth columns, breaking
// at spaces; a continued line is indented by four.
func writeWrapped(w io.Writer, text string) {
	for _, line := range wrap(text, TableWidth) {
		fmt.Fprintln(w, line)
	}
}

func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
			if len(lines) > 0 {
				line = "    " + word
			}
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = "    " + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

func strategyCell(r Result) string {
	switch {
	case r.Default && r.Strategy != "":
		return r.Strategy + "*"
	case r.Default:
		return "(default)"
	}
	return r.Strategy
}

// otherCount counts the failures that have no column of their own.
func otherCount(r Result) int {
	n := r.Requests - r.Successes
	for _, k := range []string{OutcomeSoldOut, OutcomeLockTimeout} {
		n -= r.Outcomes[k]
	}
	return n
}

// successLatency is the latency of the run's successes: its 201s, and
// its 202s under reserve.
func successLatency(r Result) Latency {
	if r.SuccessLatency.Count > 0 {
		return r.SuccessLatency
	}
	return r.LatencyByOutcome[OutcomeCreated]
}

func auditCells(r Result) (stock, sold, oversold string) {
	if !r.Audited {
		if r.AuditError != "" {
			return "failed", "-", "-"
		}
		return "-", "-", "-"
	}
	return strconv.FormatInt(r.Audit.Stock, 10), strconv.FormatInt(r.Audit.UnitsSold, 10), strconv.FormatInt(r.Audit.OversoldUnits, 10)
}

func sellRateCell(r Result) string {
	if r.SellRate <= 0 {
		return "-"
	}
	return rate(r.SellRate)
}

func soldOutCell(r Result) string {
	if r.TimeToSoldOut < 0 {
		return "in warmup"
	}
	return dur(r.TimeToSoldOut)
}

func itoa(n int) string { return strconv.Itoa(n) }

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

// FormatDuration writes d as every output of the report does: with three
// significant digits or so, "-" for 0 or less.
func FormatDuration(d time.Duration) string { return dur(d) }

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
		e.err = err
	}
	return n, err
}
