package report_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/loadtest/report"
)

// sampleResult is a run that sold sold of stock units in three seconds,
// the first of them a warmup's, with an answer of every outcome.
func sampleResult(name string, safe bool, stock, sold int64) report.Result {
	lat := func(d time.Duration) report.Latency {
		return report.Latency{Count: 10, Min: d / 2, Mean: d, P50: d, P90: 2 * d, P95: 3 * d, P99: 4 * d, P999: 5 * d, Max: 6 * d}
	}
	res := report.Result{Strategy: name, Description: name + " guards the stock its own way", Safe: safe,
		Requests: 90, Successes: int(sold), Elapsed: 2 * time.Second, SoldOut: true, TimeToSoldOut: 1500 * time.Millisecond,
		Outcomes: map[string]int{report.OutcomeCreated: int(sold), report.OutcomeSoldOut: 60 - int(sold),
			report.OutcomeLockTimeout: 20, report.OutcomeLockLost: 5, report.OutcomeTransport: 5},
		Codes: map[string]int{"503 unavailable": 2}, Warmup: &report.Warmup{Requests: 4, Successes: 1},
		Throughput: 45, SuccessThroughput: float64(sold) / 2, SellRate: float64(sold) / 1.5,
		Latency: lat(3 * time.Millisecond), LatencyByOutcome: map[string]report.Latency{
			report.OutcomeCreated: lat(40 * time.Millisecond), report.OutcomeSoldOut: lat(700 * time.Microsecond)},
		Instances: []report.Instance{{URL: "http://127.0.0.1:8080", Requests: 90, Transport: 5}},
		Audited:   true, AuditBefore: api.Audit{InitialStock: stock, Stock: stock, Consistent: true},
		Audit: api.Audit{InitialStock: stock, Stock: stock - sold, Orders: sold, UnitsSold: sold,
			OversoldUnits: max(0, sold-stock), Consistent: sold <= stock},
		RunOrders: sold + 1, RunUnits: sold + 1, CountsAgree: true}
	left := stock
	for s := -1; s < 2; s++ {
		sec := report.Second{Second: s, Answers: 30, Created: int(sold) / 3, SoldOut: 20 - int(sold)/3, LockFailures: 8,
			OtherFailures: 2, P50: 2 * time.Millisecond, P99: 30 * time.Millisecond, Max: 50 * time.Millisecond}
		left -= int64(sec.Created)
		sec.Stock = &left
		res.Series = append(res.Series, sec)
	}
	res.Verdict = res.Judge()
	return res
}

// sampleReports are reports of every shape: a closed loop of one product,
// an open loop of two rates, and the raw mode.
func sampleReports() map[string]*report.Report {
	settings := report.Settings{URLs: []string{"http://127.0.0.1:8080"}, ProductID: 7, Stock: 30, Mode: "closed",
		Requests: 90, Concurrency: 8, Warmup: time.Second, Quantity: 1, Timeout: 30 * time.Second}
	env := report.Environment{GoVersion: "go1.26", OS: "linux", Arch: "amd64", NumCPU: 2, GOMAXPROCS: 2}
	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	closed := &report.Report{Config: settings, Start: start, Environment: env, Results: []report.Result{
		sampleResult("none", false, 30, 33), sampleResult(`to,k"en`, true, 30, 30)}}

	open := &report.Report{Config: settings, Start: start, Environment: env}
	open.Config.Mode, open.Config.Rates, open.Config.Duration = "open", []float64{50, 100}, 2*time.Second
	res := sampleResult("redlock", true, 30, 30)
	res.Dropped, res.MaxSendDelay = 12, 4*time.Millisecond
	res.Steps = []report.Step{{Rate: 50, Scheduled: 100, Requests: 100, Throughput: 50}, {Rate: 100, Scheduled: 200, Requests: 188, Dropped: 12, Throughput: 94}}
	res.Verdict = res.Judge()
	open.Results = []report.Result{res}

	raw := &report.Report{Config: report.Settings{URLs: settings.URLs, Mode: "closed", Requests: 500, Concurrency: 8,
		Endpoint: "/healthz", Timeout: time.Second}, Start: start, Environment: env}
	get := report.Result{Strategy: "GET /healthz", Raw: true, Requests: 500, Successes: 500, Throughput: 2500,
		Outcomes: map[string]int{report.OutcomeOK: 500}, Latency: sampleResult("", true, 1, 1).Latency}
	get.Verdict = get.Judge()
	raw.Results = []report.Result{get}
	promised := &report.Report{Config: settings, Start: start, Environment: env, Results: []report.Result{
		sampleResult("optimistic", true, 30, 30), samplePromised(30, 0)}}
	return map[string]*report.Report{"closed": closed, "open": open, "raw": raw, "promised": promised}
}

// samplePromised is a run under reserve that sold stock units as 202s, of
// which broken were not kept (one failed, the rest still pending).
func samplePromised(stock int64, broken int) report.Result {
	res := sampleResult("reserve", true, stock, stock)
	res.Outcomes[report.OutcomeAccepted] = res.Outcomes[report.OutcomeCreated]
	res.Outcomes[report.OutcomeCreated] = 0
	res.LatencyByOutcome[report.OutcomeAccepted] = res.LatencyByOutcome[report.OutcomeCreated]
	delete(res.LatencyByOutcome, report.OutcomeCreated)
	res.SuccessLatency = res.LatencyByOutcome[report.OutcomeAccepted]
	made := res.Successes + res.Warmup.Successes
	res.Promises = &report.Promises{Made: made, Kept: made - broken, Drain: 420 * time.Millisecond, DrainLimit: 30 * time.Second,
		Polls: 3 * made, PollPause: 150 * time.Millisecond, WriteLag: report.Latency{Count: made - broken,
			P50: 80 * time.Millisecond, P99: 310 * time.Millisecond, Max: 400 * time.Millisecond}}
	if broken > 0 {
		res.Promises.Failed, res.Promises.Pending = 1, broken-1
		res.Promises.Samples = []string{"lt1-0-7: failed: 409 sold_out: the database refused it"}
	}
	res.Verdict = res.Judge()
	return res
}

// TestOutputsOfEveryShape: for every shape of report, the table fits
// TableWidth and the wide table does not, the JSON reads back as the
// report, the CSV has a row per second with a strategy's name quoted as
// CSV quotes it, and the page loads nothing from elsewhere.
func TestOutputsOfEveryShape(t *testing.T) {
	for name, rep := range sampleReports() {
		var table, wide, js, rows, page bytes.Buffer
		for _, err := range []error{rep.WriteTable(&table), rep.WriteWideTable(&wide), rep.WriteJSON(&js),
			rep.WriteCSV(&rows), rep.WriteHTML(&page)} {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		widest := func(text string) (w int) {
			for _, line := range strings.Split(text, "\n") {
				w = max(w, utf8.RuneCountInString(line))
			}
			return w
		}
		if w := widest(table.String()); w > report.TableWidth {
			t.Errorf("%s: the table has a line of %d columns; want at most %d:\n%s", name, w, report.TableWidth, table.String())
		}
		if w := widest(wide.String()); w <= report.TableWidth && name != "raw" {
			t.Errorf("%s: the wide table's widest line has %d columns; want more than %d", name, w, report.TableWidth)
		}
		var back report.Report
		if err := json.Unmarshal(js.Bytes(), &back); err != nil || !reflect.DeepEqual(&back, rep) {
			t.Errorf("%s: the JSON reads back as %+v (%v); want %+v", name, back, err, *rep)
		}
		checkCSV(t, name, rep, rows.Bytes())
		for _, external := range []string{"<script", "<link", "@import", "http://", "https://"} {
			if strings.Contains(strings.ReplaceAll(page.String(), "http://127.0.0.1:8080", ""), external) {
				t.Errorf("%s: the page holds %q; it must load nothing", name, external)
			}
		}
	}
}

// checkCSV: the CSV of rep parses, with a row per second of each run under
// the run's strategy.
func checkCSV(t *testing.T, name string, rep *report.Report, data []byte) {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("%s: the CSV does not parse: %v", name, err)
	}
	var want []string
	for _, res := range rep.Results {
		for range res.Series {
			want = append(want, res.Strategy)
		}
	}
	var got []string
	for _, row := range rows[1:] {
		got = append(got, row[0])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: the CSV's rows are of %q; want %q", name, got, want)
	}
}
