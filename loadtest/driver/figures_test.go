package driver_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// checkWidth checks that every line of the default table fits
// report.TableWidth columns, and that the wide table has more to show.
func checkWidth(t *testing.T, rep *report.Report) {
	t.Helper()
	var narrow, wide bytes.Buffer
	if err := rep.WriteTable(&narrow); err != nil {
		t.Fatalf("WriteTable = %v", err)
	}
	if err := rep.WriteWideTable(&wide); err != nil {
		t.Fatalf("WriteWideTable = %v", err)
	}
	if w := maxWidth(narrow.String()); w > report.TableWidth {
		t.Errorf("the table has a line of %d columns; want at most %d:\n%s", w, report.TableWidth, narrow.String())
	}
	if w := maxWidth(wide.String()); w <= report.TableWidth {
		t.Errorf("the wide table's widest line has %d columns; want every column, wider than %d", w, report.TableWidth)
	}
}

func maxWidth(text string) int {
	w := 0
	for _, line := range strings.Split(text, "\n") {
		w = max(w, utf8.RuneCountInString(line))
	}
	return w
}

// TestRunClosedLoopByDuration: the closed loop runs for its duration
// rather than a request count, and stops sending when it is over.
func TestRunClosedLoopByDuration(t *testing.T) {
	in := apptest.Start(t, nil)
	const d = time.Second
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 20,
		Strategies: []string{"optimistic"}, Duration: d, Concurrency: 8,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if rep.Config.Mode != "closed" || rep.Config.Requests != 0 || rep.Config.Duration != d {
		t.Errorf("settings %+v; want the closed loop for %s, no request count", rep.Config, d)
	}
	res := rep.Results[0]
	if res.Requests <= res.Successes || sumOutcomes(res) != res.Requests || res.Successes != 20 {
		t.Errorf("%d requests, outcomes %v; want the 20 units sold and sold_out answers after them", res.Requests, res.Outcomes)
	}
	// Workers stop claiming requests once d is over, and wait for those in
	// flight: the run lasts d and a little more, never 10 times as long.
	if res.Elapsed < d || res.Elapsed > 10*d {
		t.Errorf("a closed loop of %s ran %s", d, res.Elapsed)
	}
	if !res.CountsAgree || !res.SoldOut || res.TimeToSoldOut <= 0 || res.SellRate <= 0 {
		t.Errorf("counts agree %t, sold out %t at %s, sell rate %g; want all set", res.CountsAgree, res.SoldOut, res.TimeToSoldOut, res.SellRate)
	}
	if len(res.Series) == 0 || res.Series[0].Second != 0 {
		t.Errorf("series %+v; want seconds from 0", res.Series)
	}
}

// TestCSVSumsToAudit: the CSV has a row per second of each run, the
// warmup's included (numbered below 0), so that its 201 column adds up to
// the units the audit says were sold, its answers to every answer, and
// its warmup rows to the table's warmup (the requests in flight as it
// ended included).
func TestCSVSumsToAudit(t *testing.T) {
	in := apptest.Start(t, nil)
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 30,
		Strategies: []string{"token", "none"}, Duration: 1500 * time.Millisecond, Warmup: 300 * time.Millisecond,
		Concurrency: 8, Hold: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	var out bytes.Buffer
	if err := rep.WriteCSV(&out); err != nil {
		t.Fatalf("WriteCSV = %v", err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatalf("WriteCSV wrote what does not parse: %v", err)
	}
	if got := strings.Join(rows[0], ","); got != "strategy,second,answers,201,sold_out,lock_failures,other_failures,p50_ms,p99_ms" {
		t.Fatalf("CSV header %q", got)
	}
	created, answers, warm := map[string]int{}, map[string]int{}, map[string]bool{}
	warmAnswers := map[string]int{}
	last := map[string]int{}
	for _, row := range rows[1:] {
		sec, err1 := strconv.Atoi(row[1])
		a, err2 := strconv.Atoi(row[2])
		c, err3 := strconv.Atoi(row[3])
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("row %q: %v", row, err)
		}
		if prev, ok := last[row[0]]; ok && sec != prev+1 {
			t.Errorf("%s: second %d follows %d; want one row per second", row[0], sec, prev)
		}
		last[row[0]] = sec
		created[row[0]] += c
		answers[row[0]] += a
		warm[row[0]] = warm[row[0]] || sec < 0
		if sec < 0 {
			warmAnswers[row[0]] += a
		}
	}
	for _, res := range rep.Results {
		if res.Warmup == nil || res.Warmup.Requests == 0 || !warm[res.Strategy] {
			t.Errorf("%s: warmup %+v, a row below second 0: %t; want the warmup's answers apart", res.Strategy, res.Warmup, warm[res.Strategy])
			continue
		}
		if int64(created[res.Strategy]) != res.Audit.UnitsSold || !res.CountsAgree {
			t.Errorf("%s: the CSV's 201 column adds up to %d; the audit sold %d units", res.Strategy, created[res.Strategy], res.Audit.UnitsSold)
		}
		if answers[res.Strategy] != res.Requests+res.Warmup.Requests {
			t.Errorf("%s: the CSV's answers add up to %d; want %d measured + %d of the warmup",
				res.Strategy, answers[res.Strategy], res.Requests, res.Warmup.Requests)
		}
		// The requests in flight as the warmup ended are the warmup's,
		// in the CSV as in the table, whenever their answers came.
		if warmAnswers[res.Strategy] != res.Warmup.Requests {
			t.Errorf("%s: the CSV's warmup rows add up to %d answers; the table's warmup has %d",
				res.Strategy, warmAnswers[res.Strategy], res.Warmup.Requests)
		}
	}
}

// TestLatencyByOutcome: with 200ms of work inside the lock, every 201
// takes 200ms or more, while sold_out is answered at once (an instance
// that has seen the product sold out touches nothing): the figures of the
// two outcomes must be kept apart.
func TestLatencyByOutcome(t *testing.T) {
	in := apptest.Start(t, nil)
	const hold = 200 * time.Millisecond
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 3,
		Strategies: []string{"token"}, Requests: 60, Concurrency: 4, Hold: hold,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	res := rep.Results[0]
	created, soldOut := res.LatencyByOutcome[report.OutcomeCreated], res.LatencyByOutcome[report.OutcomeSoldOut]
	if created.Count != res.Successes || soldOut.Count != res.Outcomes[report.OutcomeSoldOut] || created.Count != 3 {
		t.Fatalf("latency counts: 201 %d, sold_out %d; want 3 and %d", created.Count, soldOut.Count, res.Outcomes[report.OutcomeSoldOut])
	}
	if created.Min < hold || created.P50 < hold {
		t.Errorf("201 latency %+v; every 201 held the lock %s", created, hold)
	}
	if soldOut.P50 >= hold {
		t.Errorf("sold_out p50 %s; want the instant answers apart from the 201s' %s", soldOut.P50, created.P50)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, cell := range []string{formatDur(created.P50), formatDur(soldOut.P50)} {
		if !strings.Contains(table.String(), cell) {
			t.Errorf("the table does not show %s:\n%s", cell, table.String())
		}
	}
}

// formatDur is the table's way of writing a latency, for the durations
// of TestLatencyByOutcome.
func formatDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
	case d < 100*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

func productCount(t *testing.T, in *apptest.Instance) int64 {
	t.Helper()
	var n int64
	if err := in.Stores.DB.WithContext(t.Context()).Table("products").Count(&n).Error; err != nil {
		t.Fatalf("count products: %v", err)
	}
	return n
}

// TestFailedRunLeavesNoProduct: a run that cannot make a single purchase
// fails before it creates its product.
func TestFailedRunLeavesNoProduct(t *testing.T) {
	in := apptest.Start(t, map[string]string{"SECKILL_STRATEGY_OVERRIDE": "false"})
	for _, cfg := range []driver.Config{
		{Strategies: []string{"token"}},
		{Strategies: []string{""}, Hold: time.Millisecond},
		{Strategies: []string{""}, Fencing: new(bool)},
	} {
		cfg.URLs, cfg.AdminToken, cfg.Requests, cfg.Concurrency = []string{in.URL}, in.AdminToken, 20, 4
		_, err := driver.Run(t.Context(), cfg)
		if !errors.Is(err, driver.ErrOverrideDisabled) {
			t.Errorf("Run(strategy %q, hold %s, fencing %v) = %v; want ErrOverrideDisabled", cfg.Strategies[0], cfg.Hold, cfg.Fencing, err)
		}
	}
	if n := productCount(t, in); n != 0 {
		t.Errorf("the failed runs left %d products behind; want none", n)
	}
}

// TestInstanceKilledMidRun: one of two instances dies during the run; the
// run says which and fails.
func TestInstanceKilledMidRun(t *testing.T) {
	a := apptest.Start(t, nil)
	b, kill := a.AnotherKillable(t)
	progress := &onWrite{n: 4, do: kill}
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{a.URL, b.URL}, AdminToken: a.AdminToken, Stock: 100000,
		Strategies: []string{"optimistic", "token"}, Duration: 2 * time.Second, Concurrency: 4, Progress: progress,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(rep.Results) != 1 {
		t.Errorf("%d results; want the run to stop after the strategy that lost an instance", len(rep.Results))
	}
	res := rep.Results[0]
	if len(res.Instances) != 2 || res.Instances[0].Down || !res.Instances[1].Down || res.Instances[1].Transport == 0 {
		t.Errorf("instances %+v; want %s down, with transport errors", res.Instances, b.URL)
	}
	failures := strings.Join(rep.Failures(), "; ")
	if !strings.Contains(failures, b.URL) || !strings.Contains(failures, "went down") {
		t.Errorf("Failures() = %q; want %s named as gone down", failures, b.URL)
	}
	if !strings.HasPrefix(res.Verdict, "BROKEN") {
		t.Errorf("verdict %q; want BROKEN", res.Verdict)
	}
	checkWidth(t, rep)
}

// onWrite is a progress writer that calls do once it has been written to
// n times: the run is then under way.
type onWrite struct {
	mu sync.Mutex
	n  int
	do func()
}

func (o *onWrite) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n--; o.n == 0 {
		o.do()
	}
	return len(p), nil
}

// TestProgressLines: with ProgressEvery the progress is plain lines, one
// every ProgressEvery and one at the end, with no carriage return: what a
// log or a pipe can hold.
func TestProgressLines(t *testing.T) {
	in := apptest.Start(t, nil)
	var progress testenv.Buffer
	_, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 1_000_000,
		Strategies: []string{"token"}, Duration: 2 * time.Second, Concurrency: 4,
		Progress: &progress, ProgressEvery: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	out := progress.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if strings.Contains(out, "\r") || len(lines) < 3 || len(lines) > 8 {
		t.Errorf("progress over 2 s at one line every 500 ms: %d lines; want 3 to 8, without carriage returns:\n%q", len(lines), out)
	}
	for _, l := range lines {
		if !strings.Contains(l, "token") {
			t.Errorf("progress line %q does not name the run", l)
		}
	}
}
