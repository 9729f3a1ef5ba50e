package driver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/history"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// dbFigures reads what the database holds for a product: its order rows,
// the units they sold, its stock and initial stock.
func dbFigures(t *testing.T, in *apptest.Instance, id int64) (orders, units, stock, initial int64) {
	t.Helper()
	db := in.Stores.DB.WithContext(t.Context())
	if err := db.Table("orders").Where("product_id = ?", id).Count(&orders).Error; err != nil {
		t.Fatalf("count orders: %v", err)
	}
	if err := db.Table("orders").Where("product_id = ?", id).Select("COALESCE(SUM(quantity), 0)").Scan(&units).Error; err != nil {
		t.Fatalf("sum orders: %v", err)
	}
	row := struct{ Stock, InitialStock int64 }{}
	if err := db.Table("products").Select("stock, initial_stock").Where("id = ?", id).Scan(&row).Error; err != nil {
		t.Fatalf("read product: %v", err)
	}
	return orders, units, row.Stock, row.InitialStock
}

// checkAgainstDB compares a result with the database, for the last run on
// a product (every run deletes the orders of the one before).
func checkAgainstDB(t *testing.T, in *apptest.Instance, id int64, res report.Result) {
	t.Helper()
	orders, units, stock, initial := dbFigures(t, in, id)
	if orders != int64(res.Successes) || orders != res.Audit.Orders {
		t.Errorf("%s: database has %d orders; driver saw %d 201s, audit says %d", res.Strategy, orders, res.Successes, res.Audit.Orders)
	}
	if units != res.Audit.UnitsSold || stock != res.Audit.Stock || initial != res.Audit.InitialStock {
		t.Errorf("%s: database units %d, stock %d, initial %d; audit %+v", res.Strategy, units, stock, initial, res.Audit)
	}
}

// readHistory reads the history file at path, which a run wrote.
func readHistory(t *testing.T, path string) []history.Line {
	t.Helper()
	lines, err := history.ReadFile(path)
	if err != nil {
		t.Fatalf("read the history: %v", err)
	}
	return lines
}

func sumOutcomes(res report.Result) int {
	n := 0
	for _, v := range res.Outcomes {
		n += v
	}
	return n
}

func has500(res report.Result) bool {
	for code := range res.Codes {
		if strings.HasPrefix(code, "500") {
			return true
		}
	}
	return false
}

func TestRunAllStrategies(t *testing.T) {
	in := apptest.Start(t, nil)
	const stock, requests = 20, 200
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: stock,
		Strategies: []string{"all"}, Requests: requests, Concurrency: 16, Hold: 2 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("Failures() = %q; want none", f)
	}
	names := map[string]bool{}
	for _, res := range rep.Results {
		names[res.Strategy] = true
		checkStrategyResult(t, res, stock, requests)
	}
	for _, want := range []string{"none", "local", "setnx", "token", "redlock", "pessimistic", "optimistic", "reserve"} {
		if !names[want] {
			t.Errorf("no result for strategy %s; got %v", want, names)
		}
	}
	checkAgainstDB(t, in, rep.Config.ProductID, rep.Results[len(rep.Results)-1])

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatalf("WriteTable = %v", err)
	}
	for _, want := range []string{"STRATEGY", "201/S", "LOCK_TIMEOUT", "FINAL_STOCK", "OVERSOLD", "redlock", "held"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	checkWidth(t, rep)
}

// checkStrategyResult checks one strategy's result of a run of requests
// new buyers for stock units: its outcomes add up and agree with the audit,
// a safe strategy sold exactly the stock, an unsafe one that oversold says
// so, and its latencies and time to sell out make sense.
func checkStrategyResult(t *testing.T, res report.Result, stock, requests int) {
	t.Helper()
	if res.Requests != requests || sumOutcomes(res) != requests {
		t.Errorf("%s: %d requests, outcomes add up to %d; want %d", res.Strategy, res.Requests, sumOutcomes(res), requests)
	}
	if made := res.Outcomes[report.OutcomeCreated] + res.Outcomes[report.OutcomeAccepted]; made != res.Successes {
		t.Errorf("%s: created %d, accepted %d, successes %d", res.Strategy, res.Outcomes[report.OutcomeCreated], res.Outcomes[report.OutcomeAccepted], res.Successes)
	}
	if res.Strategy == "reserve" && (res.Promises == nil || res.Promises.Made != res.Successes || res.Promises.Kept != res.Successes) {
		t.Errorf("reserve: promises %+v; want every one of the %d 202s made and kept", res.Promises, res.Successes)
	}
	if res.Outcomes[report.OutcomeLimitExceeded] != 0 || has500(res) {
		t.Errorf("%s: outcomes %v, codes %v; want no limit_exceeded (every buyer is new) and no 500", res.Strategy, res.Outcomes, res.Codes)
	}
	if !res.CountsAgree || res.RunOrders != int64(res.Successes) {
		t.Errorf("%s: audit gained %d orders, driver saw %d 201s", res.Strategy, res.RunOrders, res.Successes)
	}
	if res.Audit.InitialStock != int64(stock) {
		t.Errorf("%s: initial stock %d; want %d (reset before each run)", res.Strategy, res.Audit.InitialStock, stock)
	}
	switch {
	case res.Safe:
		if res.Successes != stock || res.Audit.Stock != 0 || !res.Audit.Held() || res.Verdict != "held" {
			t.Errorf("%s (safe): %d sold, audit %+v, verdict %q; want exactly %d sold and held", res.Strategy, res.Successes, res.Audit, res.Verdict, stock)
		}
	case res.Audit.OversoldUnits > 0:
		if res.Verdict != "oversold, as expected" {
			t.Errorf("%s (unsafe) oversold %d: verdict %q", res.Strategy, res.Audit.OversoldUnits, res.Verdict)
		}
	}
	if res.Latency.P50 <= 0 || res.Latency.P50 > res.Latency.P99 || res.Latency.P99 > res.Latency.Max {
		t.Errorf("%s: latency %+v out of order", res.Strategy, res.Latency)
	}
	if res.Successes > 0 && res.Audit.Stock <= 0 && res.TimeToSoldOut <= 0 {
		t.Errorf("%s: sold out but TimeToSoldOut = %s", res.Strategy, res.TimeToSoldOut)
	}
}

// TestRunTwoInstances spreads one strategy over two instances of one sale
// and checks every figure against the database.
func TestRunTwoInstances(t *testing.T) {
	// Purchases of 2 units: the per-user limit (1 by default) is lifted.
	a := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"})
	b := a.Another(t)
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{a.URL, b.URL}, AdminToken: a.AdminToken, Stock: 30,
		Strategies: []string{"redlock", "optimistic"}, Requests: 90, Concurrency: 12, Quantity: 2,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Strategy != "redlock" || rep.Results[1].Strategy != "optimistic" {
		t.Fatalf("results %+v; want redlock, then optimistic", rep.Results)
	}
	for _, res := range rep.Results {
		if res.Successes != 15 || res.Audit.UnitsSold != 30 || res.Audit.Stock != 0 || !res.CountsAgree {
			t.Errorf("%s: %d orders of 2 units, audit %+v; want 15 orders selling all 30", res.Strategy, res.Successes, res.Audit)
		}
		if len(res.Instances) != 2 || res.Instances[0].Requests+res.Instances[1].Requests != res.Requests {
			t.Errorf("%s: instances %+v; want both, adding up to %d requests", res.Strategy, res.Instances, res.Requests)
		}
	}
	checkWidth(t, rep)
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("Failures() = %q; want none", f)
	}
	checkAgainstDB(t, a, rep.Config.ProductID, rep.Results[1])
}

func TestRunCreatesProduct(t *testing.T) {
	in := apptest.Start(t, nil)
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 7,
		Strategies: []string{""}, Requests: 25, Concurrency: 5,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	id := rep.Config.ProductID
	if id <= 0 {
		t.Fatalf("Config.ProductID = %d; want the created product", id)
	}
	_, _, stock, initial := dbFigures(t, in, id)
	if initial != 7 || stock != 0 {
		t.Errorf("created product: stock %d of %d; want 0 of 7", stock, initial)
	}
	res := rep.Results[0]
	// The server's default strategy is redlock; the driver learns it from
	// the orders.
	if !res.Default || res.Strategy != in.Config.Strategy || res.Successes != 7 {
		t.Errorf("result %q (default %t) with %d orders; want %q with 7", res.Strategy, res.Default, res.Successes, in.Config.Strategy)
	}
	checkAgainstDB(t, in, id, res)
}

func TestRunOpenLoop(t *testing.T) {
	in := apptest.Start(t, nil)
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 40,
		Strategies: []string{"optimistic"}, Rates: []float64{100, 200}, Duration: 500 * time.Millisecond, Concurrency: 8,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if rep.Config.Mode != "open" || rep.Config.Requests != 150 {
		t.Errorf("settings %+v; want the open loop with 50 + 100 requests", rep.Config)
	}
	res := rep.Results[0]
	if res.Requests+res.Dropped != 150 || res.Successes != 40 || res.Outcomes[report.OutcomeSoldOut] != res.Requests-40 {
		t.Errorf("open loop: %d requests, %d dropped, outcomes %v; want 150 in all: 40 created, the rest sold_out or dropped",
			res.Requests, res.Dropped, res.Outcomes)
	}
	if len(res.Steps) != 2 || res.Steps[0].Rate != 100 || res.Steps[0].Scheduled != 50 || res.Steps[1].Scheduled != 100 {
		t.Fatalf("steps %+v; want 50 at 100/s, then 100 at 200/s", res.Steps)
	}
	for _, s := range res.Steps {
		if s.Requests+s.Dropped != s.Scheduled {
			t.Errorf("step at %g/s: %d answered + %d dropped; want its %d scheduled", s.Rate, s.Requests, s.Dropped, s.Scheduled)
		}
	}
	// The last request is due at 995ms: the run cannot end before it.
	if res.Elapsed < 990*time.Millisecond {
		t.Errorf("open loop of 1s took %s; it must follow its schedule", res.Elapsed)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("Failures() = %q; want none", f)
	}
	checkAgainstDB(t, in, rep.Config.ProductID, res)
}

// TestRunOpenLoopDrops: one request in flight, each taking at least 20ms,
// scheduled every 10ms for 400ms. One slot cannot send more than about one
// request in two on time: the others are dropped, never sent, and the
// verdict says so. Those sent are charged from their intended time.
func TestRunOpenLoopDrops(t *testing.T) {
	in := apptest.Start(t, nil)
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 100,
		Strategies: []string{"optimistic"}, Rates: []float64{100}, Duration: 400 * time.Millisecond,
		Concurrency: 1, Hold: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	res := rep.Results[0]
	// Each request sent holds the only slot for 20ms or more, and a
	// request may leave at most one interval (10ms) late: of the 40 due
	// from 0 to 390ms, at most 1 + 400/20 = 21 can be sent.
	if res.Requests+res.Dropped != 40 || res.Dropped < 19 || res.Successes != res.Requests {
		t.Errorf("%d sent (%d created), %d dropped; want 40 in all, at least 19 dropped", res.Requests, res.Successes, res.Dropped)
	}
	if !strings.Contains(res.Verdict, fmt.Sprintf("%d dropped", res.Dropped)) {
		t.Errorf("verdict %q does not say %d were dropped", res.Verdict, res.Dropped)
	}
	if res.MaxSendDelay > 10*time.Millisecond {
		t.Errorf("a request left %s late; one more than an interval (10ms) late must be dropped", res.MaxSendDelay)
	}
	if !res.CountsAgree {
		t.Errorf("the audit gained %d orders; the driver saw %d 201s", res.RunOrders, res.Successes)
	}
	checkWidth(t, rep)
}

func TestRunUnreachableInstance(t *testing.T) {
	in := apptest.Start(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL, dead}, AdminToken: in.AdminToken, Stock: 5, Requests: 10,
	})
	if err == nil && len(rep.Failures()) == 0 {
		t.Fatalf("Run with %s down = a report without failures; want an error", dead)
	}
	if err == nil || !strings.Contains(err.Error(), dead) {
		t.Errorf("Run = %v; want an error naming %s", err, dead)
	}
}

// TestRunCancelled: cancelling the run ends the requests in flight (the
// load's client knows no context; the driver closes its connections) and
// counts none of them as an answer.
func TestRunCancelled(t *testing.T) {
	in := apptest.Start(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const requests = 400
	progress := &onWrite{n: 3, do: cancel}
	rep, err := driver.Run(ctx, driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: requests,
		Strategies: []string{"redlock"}, Requests: requests, Concurrency: 4,
		Hold: 2 * time.Second, Progress: progress,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v; want context.Canceled", err)
	}
	// Every purchase holds the lock for 2 s and the run is cancelled at
	// its third progress write, well before: no purchase can have been
	// answered, and the cut ones must not count as transport errors.
	if rep == nil || len(rep.Results) != 1 {
		t.Fatalf("Run returned %+v; want the report of the cancelled run", rep)
	}
	if res := rep.Results[0]; sumOutcomes(res) != 0 {
		t.Errorf("outcomes %v after the cancel; want none (the requests in flight ended uncounted)", res.Outcomes)
	}
}

func TestRunOverrideDisabled(t *testing.T) {
	in := apptest.Start(t, map[string]string{"SECKILL_STRATEGY_OVERRIDE": "false"})
	_, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 5,
		Strategies: []string{"token"}, Requests: 20, Concurrency: 4,
	})
	if !errors.Is(err, driver.ErrOverrideDisabled) || !strings.Contains(err.Error(), "SECKILL_STRATEGY_OVERRIDE=true") {
		t.Errorf("Run = %v; want ErrOverrideDisabled telling to set SECKILL_STRATEGY_OVERRIDE=true", err)
	}
}

func TestRunRawMode(t *testing.T) {
	in := apptest.Start(t, nil)
	rep, err := driver.Run(t.Context(), driver.Config{URLs: []string{in.URL, in.URL}, Endpoint: "/healthz", Requests: 300, Concurrency: 8})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	res := rep.Results[0]
	if !res.Raw || res.Requests != 300 || res.Successes != 300 || res.Outcomes[report.OutcomeOK] != 300 || res.Audited {
		t.Errorf("raw mode: %+v; want 300 GETs answered 2xx and no audit", res)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("Failures() = %q; want none", f)
	}
}

func TestRunBadConfig(t *testing.T) {
	for _, cfg := range []driver.Config{
		{},
		{URLs: []string{"127.0.0.1:8080"}, ProductID: 1},
		{URLs: []string{"http://127.0.0.1:1"}},                                     // no product, no token
		{URLs: []string{"http://127.0.0.1:1"}, ProductID: 1, Stock: 5},             // reset without token
		{URLs: []string{"http://127.0.0.1:1"}, ProductID: 1, Rates: []float64{10}}, // open loop without duration
		{URLs: []string{"http://127.0.0.1:1"}, ProductID: 1, Hold: 1500000},        // 1.5ms
	} {
		if _, err := driver.Run(context.Background(), cfg); !errors.Is(err, driver.ErrConfig) {
			t.Errorf("Run(%+v) = %v; want ErrConfig", cfg, err)
		}
	}
}

// TestReportOutputs: the JSON of a run of one product reads back as the
// report, neither it nor the table has a catalogue, the HTML page is
// complete and self-contained, and neither holds the admin token.
func TestReportOutputs(t *testing.T) {
	in := apptest.Start(t, nil)
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 10,
		Strategies: []string{"none", "token"}, Requests: 60, Concurrency: 8, Hold: time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatalf("WriteJSON = %v", err)
	}
	checkJSONReadsBack(t, rep, js.Bytes())
	checkNoCatalogue(t, rep, js.Bytes())
	if strings.Contains(js.String(), in.AdminToken) {
		t.Error("the JSON report holds the admin token")
	}
	checkHTMLReport(t, rep, in.AdminToken)
}

// checkJSONReadsBack: the report's JSON parses back into its two results,
// with their figures, the figures per outcome and the series.
func checkJSONReadsBack(t *testing.T, rep *report.Report, js []byte) {
	t.Helper()
	var back report.Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("WriteJSON wrote what does not parse: %v", err)
	}
	if len(back.Results) != 2 {
		t.Fatalf("JSON has %d results; want 2", len(back.Results))
	}
	for i, got := range back.Results {
		want := rep.Results[i]
		if got.Strategy != want.Strategy || got.Successes != want.Successes || got.Audit != want.Audit ||
			got.Latency != want.Latency || got.Outcomes[report.OutcomeSoldOut] != want.Outcomes[report.OutcomeSoldOut] || got.Verdict != want.Verdict {
			t.Errorf("JSON result %d = %+v; want %+v", i, got, want)
		}
		if got.LatencyByOutcome[report.OutcomeCreated] != want.LatencyByOutcome[report.OutcomeCreated] ||
			got.LatencyByOutcome[report.OutcomeSoldOut].Count != want.Outcomes[report.OutcomeSoldOut] ||
			got.SellRate != want.SellRate || got.TimeToSoldOut != want.TimeToSoldOut || len(got.Series) != len(want.Series) || len(got.Series) == 0 {
			t.Errorf("JSON result %d lacks the figures per outcome or the series: %+v", i, got)
		}
	}
}

// checkNoCatalogue: for a run of one product, neither the JSON's settings
// nor its results nor the table say anything of a catalogue.
func checkNoCatalogue(t *testing.T, rep *report.Report, js []byte) {
	t.Helper()
	var generic struct {
		Config  map[string]any   `json:"config"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(js, &generic); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"products", "zipf", "catalogue"} {
		if _, ok := generic.Config[key]; ok {
			t.Errorf("the JSON config of a run of one product has %q: %v", key, generic.Config)
		}
	}
	for i, res := range generic.Results {
		if _, ok := res["catalogue"]; ok {
			t.Errorf("JSON result %d of a run of one product has a catalogue: %v", i, res["catalogue"])
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || strings.Contains(table.String(), "HOTTEST") || strings.Contains(table.String(), "catalogue") {
		t.Errorf("WriteTable = %v:\n%s\nwant no catalogue for a run of one product", err, table.String())
	}
}

// checkHTMLReport: the HTML page has its figures and both strategies, no
// catalogue (the run is of one product), loads nothing from elsewhere and
// does not hold token.
func checkHTMLReport(t *testing.T, rep *report.Report, token string) {
	t.Helper()
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatalf("WriteHTML = %v", err)
	}
	html := page.String()
	for _, want := range []string{"<!DOCTYPE html>", "<svg", "Throughput", "Latency by outcome", "<table", "none", "token", "</html>",
		"201s per second", "p99 latency of each second", "Stock left", "<polyline"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if strings.Contains(html, "Hottest") || strings.Contains(html, "Zipf") {
		t.Error("the HTML report of a run of one product has a catalogue's hottest products")
	}
	for _, external := range []string{"<script src", "<link", "@import", "cdn"} {
		if strings.Contains(strings.ToLower(html), external) {
			t.Errorf("HTML report loads something (%q); it must be self-contained", external)
		}
	}
	if strings.Contains(html, token) {
		t.Error("the HTML report holds the admin token")
	}
}

// TestRunHistory: with a history, two instances, a safe strategy's run is
// linearizable and none's, which oversells, is not; the history file holds
// every purchase, and -check agrees with the run's own verdict.
func TestRunHistory(t *testing.T) {
	a := apptest.Start(t, nil)
	b := a.Another(t)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{a.URL, b.URL}, AdminToken: a.AdminToken, Stock: 10, History: path,
		Strategies: []string{"redlock", "none"}, Requests: 60, Concurrency: 12, Hold: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	safe, none := rep.Results[0], rep.Results[1]
	if h := safe.History; h == nil || !h.Checked || !h.Linearizable || h.Purchases != 60 || h.UndersoldAnswers != 0 {
		t.Errorf("redlock's history verdict %+v; want 60 purchases, linearizable, none undersold", h)
	}
	if safe.UnsoldUnits == nil || *safe.UnsoldUnits != 0 {
		t.Errorf("redlock's unsold units %v; want 0 (60 buyers for 10 units)", safe.UnsoldUnits)
	}
	if none.Audit.OversoldUnits == 0 {
		t.Skipf("none did not oversell this time (audit %+v): nothing to show", none.Audit)
	}
	if h := none.History; h == nil || !h.Checked || h.Linearizable || h.Violation == "" {
		t.Errorf("none's history verdict %+v; want not linearizable, with its violation", h)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("Failures() = %q; want none: none is not marked safe", f)
	}
	lines := readHistory(t, path)
	if len(lines) != 2+120 {
		t.Errorf("the history has %d lines; want 2 stock lines and 120 purchases", len(lines))
	}
	res, err := history.Check(lines)
	if err != nil || res.Linearizable {
		t.Errorf("Check(the file) = %v, %v; want not linearizable (none's run)", res, err)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "LINEARIZABLE") {
		t.Errorf("WriteTable = %v:\n%s\nwant the history block", err, table.String())
	}
	checkWidth(t, rep)
}

// TestRunCancels: -cancel cancels a third of the orders while the run
// goes on, on two instances; the units come back and sell again, the
// history records the cancels and is linearizable, and the audit counts
// the units back.
func TestRunCancels(t *testing.T) {
	a := apptest.Start(t, nil)
	b := a.Another(t)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	const stock, requests = 20, 150
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{a.URL, b.URL}, AdminToken: a.AdminToken, Stock: stock, History: path, Cancel: 1.0 / 3,
		Strategies: []string{"redlock"}, Requests: requests, Concurrency: 12,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	res := rep.Results[0]
	c := res.Cancels
	if c == nil || c.Sent == 0 || c.Returned != c.Sent || int64(c.Returned) != res.RunReturned {
		t.Fatalf("cancels %+v, audit counted %d units back; want every cancel answered 200 and counted", c, res.RunReturned)
	}
	if res.Successes > stock+c.Returned {
		t.Errorf("%d orders made, %d cancelled, of a stock of %d; want no more than stock + cancelled", res.Successes, c.Returned, stock)
	}
	if res.Successes <= stock {
		t.Errorf("%d orders made of a stock of %d with %d cancelled; want the cancelled units sold again", res.Successes, stock, c.Returned)
	}
	if h := res.History; h == nil || !h.Checked || !h.Linearizable {
		t.Errorf("the history verdict %+v; want checked, linearizable", h)
	}
	if !res.CountsAgree || !res.Audit.Consistent || res.Audit.UnitsReturned != int64(c.Returned) {
		t.Errorf("audit %+v, counts agree %v; want consistent, %d units returned", res.Audit, res.CountsAgree, c.Returned)
	}
	lines := readHistory(t, path)
	cancels := 0
	for _, l := range lines {
		if l.Cancel() {
			cancels++
		}
	}
	if cancels != c.Sent {
		t.Errorf("the history has %d cancel lines; want %d", cancels, c.Sent)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "cancels: ") {
		t.Errorf("WriteTable = %v:\n%s\nwant the cancels' line", err, table.String())
	}
}

// TestRunOverrideNeedsToken: override flags without the admin token stop
// the run before it starts, saying what is missing.
func TestRunOverrideNeedsToken(t *testing.T) {
	in := apptest.Start(t, nil)
	c := &client.Client{BaseURL: in.URL, AdminToken: in.AdminToken}
	p, err := c.CreateProduct(t.Context(), "phone", 5)
	if err != nil {
		t.Fatal(err)
	}
	_, err = driver.Run(t.Context(), driver.Config{URLs: []string{in.URL}, ProductID: p.ID, Strategies: []string{"none"}, Requests: 5})
	if !errors.Is(err, driver.ErrConfig) || !strings.Contains(err.Error(), "admin token") {
		t.Errorf("Run without the token = %v; want a config error naming the admin token", err)
	}
}

// TestRunClients: with SECKILL_IP_LIMIT=5/30s, the load from one address
// gets 5 purchases through; from four loopback addresses (-clients 4), more
// than one address's 5 and at most 20. (Not exactly 20: the workers take
// the requests as they come, and an address whose two connections sent
// fewer than 5 gets fewer through.) A count Redis does not answer in time
// lets its request through, by design, and the service's metric says how
// many did.
func TestRunClients(t *testing.T) {
	for _, tc := range []struct{ clients, most int }{{0, 5}, {4, 20}} {
		in := apptest.Start(t, map[string]string{"SECKILL_IP_LIMIT": "5/30s", "SECKILL_PER_USER_LIMIT": "0"})
		rep, err := driver.Run(t.Context(), driver.Config{URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 100,
			Strategies: []string{""}, Requests: 40, Concurrency: 8, Clients: tc.clients})
		if err != nil {
			t.Fatalf("Run(clients %d) = %v", tc.clients, err)
		}
		res := rep.Results[0]
		uncounted := ipLimitUnavailable(t, in.URL)
		least := 5
		if tc.clients > 0 {
			least = 6 + uncounted // more than one address got through
		}
		if res.Successes < least || res.Successes > tc.most+uncounted || res.Successes+res.Codes["429 rate_limited"] != 40 {
			t.Errorf("clients %d: %d created, codes %v, %d let through uncounted; want %d to %d created and the rest 429 rate_limited",
				tc.clients, res.Successes, res.Codes, uncounted, least, tc.most+uncounted)
		}
	}
}

// ipLimitUnavailable reads, from the instance at url, how many requests its
// IP limit let through because Redis did not answer the count in time.
func ipLimitUnavailable(t *testing.T, url string) int {
	t.Helper()
	m, err := (&client.Client{BaseURL: url}).Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["seckill_ip_limit_total"]; !ok {
		t.Fatalf("%s/metrics has no seckill_ip_limit_total", url)
	}
	return int(m.Sum("seckill_ip_limit_total", "result", "unavailable"))
}
