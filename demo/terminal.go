package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/seckill/seckill/demo/lab"
)

// Width is the most columns a line of the demo takes.
const Width = 100

// Terminal says where and how Run prints.
type Terminal struct {
	Out io.Writer
	// Colour paints the verdicts (a terminal that takes ANSI colours).
	Colour bool
	// Live, when true, redraws a status line in place while a scenario
	// runs (Out is a terminal).
	Live bool
}

// ErrUnexpected is wrapped by Run's error when a row did not go as the
// lesson says: a safe strategy broke, or an unsafe one did not show its
// flaw.
var ErrUnexpected = errors.New("demo: not every scenario went as the lesson says")

// Run plays scs in turn in l and prints, for each, its story, then its
// table and notes. It returns the results, and an error wrapping
// ErrUnexpected when a row went otherwise than the lesson says, or the
// errors of the scenarios that could not run; the others run all the
// same.
func Run(ctx context.Context, l *lab.Lab, scs []lab.Scenario, t Terminal) ([]*lab.Result, error) {
	start := time.Now()
	fmt.Fprintf(t.Out, "seckill demo: %d %s on %s.\n", len(scs), pluralWord(len(scs), "scenario"), l.Stores())
	var (
		results []*lab.Result
		failed  []string
		errs    []error
	)
	for _, sc := range scs {
		fmt.Fprintln(t.Out)
		writeWrapped(t.Out, sc.Title, "")
		writeWrapped(t.Out, sc.Story, "")
		var obs lab.Observer
		var status *statusLine
		if t.Live {
			status = &statusLine{out: t.Out, name: sc.Name}
			obs = status
		}
		res, _, err := l.Run(ctx, sc, obs, false)
		if status != nil {
			status.clear()
		}
		if err != nil {
			if ctx.Err() != nil {
				return results, err
			}
			writeWrapped(t.Out, "COULD NOT RUN: "+err.Error(), "")
			failed = append(failed, sc.Name)
			errs = append(errs, fmt.Errorf("demo: %s: %w", sc.Name, err))
			continue
		}
		results = append(results, res)
		if err := writeResult(t.Out, res, t.Colour); err != nil {
			return results, err
		}
		if !res.OK() {
			failed = append(failed, sc.Name)
		}
	}
	took := lab.DurWords(time.Since(start).Round(100 * time.Millisecond))
	fmt.Fprintln(t.Out)
	if len(failed) > 0 {
		writeWrapped(t.Out, fmt.Sprintf("NOT AS EXPECTED in %s, after %s: the rows marked UNEXPECTED "+
			"went otherwise than the articles say.", strings.Join(failed, ", "), took), "")
		return results, errors.Join(append(errs, fmt.Errorf("%w: %s", ErrUnexpected, strings.Join(failed, ", ")))...)
	}
	writeWrapped(t.Out, fmt.Sprintf("All as the articles say, in %s: every safe strategy held, "+
		"every unsafe one showed its flaw.", took), "")
	return results, nil
}

// writeResult prints a result's table, then its notes.
func writeResult(w io.Writer, res *lab.Result, colour bool) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(res.Columns, "\t"))
	for _, row := range res.Rows {
		fmt.Fprintln(tw, strings.Join(row.Cells, "\t")+"\t"+paint(row, colour))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("demo: print %s: %w", res.Scenario, err)
	}
	for _, n := range res.Notes {
		writeWrapped(w, n, "")
	}
	return nil
}

// ANSI colours: red for a flaw, green for a stock that held, bold yellow
// for a row that went otherwise than expected.
const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[1;33m"
	reset  = "\x1b[0m"
)

func paint(row lab.Row, colour bool) string {
	if !colour {
		return row.Verdict
	}
	c := green
	switch {
	case !row.Expected:
		c = yellow
	case row.Flaw:
		c = red
	}
	return c + row.Verdict + reset
}

// ansi matches an ANSI colour sequence.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// VisibleWidth is the columns s takes on a terminal: its runes, colour
// sequences left out.
func VisibleWidth(s string) int { return len([]rune(ansi.ReplaceAllString(s, ""))) }

// writeWrapped prints text in lines of at most Width columns, each after
// indent.
func writeWrapped(w io.Writer, text, indent string) {
	for _, line := range wrap(text, Width-len(indent)) {
		fmt.Fprintln(w, indent+line)
	}
}

// wrap breaks text into lines of at most width runes at spaces, tabs and
// newlines, not at a no-break space (a word longer than width stands
// alone).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	breaks := func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }
	for _, word := range strings.FieldsFunc(text, breaks) {
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

func pluralWord(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// statusLine is an Observer that redraws one line in place: the scenario,
// the time, what it does now and the stock of each product.
type statusLine struct {
	out  io.Writer
	name string

	mu    sync.Mutex
	note  string
	drawn bool
}

func (s *statusLine) Observe(e lab.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Kind {
	case "note":
		s.note = e.Text
	case "tick":
		var stock []string
		for _, sn := range e.Series {
			stock = append(stock, fmt.Sprintf("%s %d", sn.ID, sn.Stock))
		}
		line := fmt.Sprintf("%s %4.1fs  %s", s.name, e.At, joinNonEmpty(" | ", s.note, strings.Join(stock, ", ")))
		if r := []rune(line); len(r) > Width-1 {
			line = string(r[:Width-2]) + "…"
		}
		fmt.Fprint(s.out, "\r\x1b[K"+line)
		s.drawn = true
	}
}

// clear takes the status line away.
func (s *statusLine) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drawn {
		fmt.Fprint(s.out, "\r\x1b[K")
	}
}

// List prints every scenario, one per line: its name, then what it shows.
func List(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, sc := range Scenarios() {
		fmt.Fprintf(tw, "%s\t%s\n", sc.Name, sc.Shows)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("demo: list: %w", err)
	}
	return nil
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}
