package driver

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
)

// Audit is the server's audit of a product (see client.Audit).
type Audit = client.Audit

// Strategy is one entry of GET /api/v1/strategies (see client.Strategy).
type Strategy = client.Strategy

// APIError is an answer of the service that is not 2xx (see client.Error).
type APIError = client.Error

// Report is everything one Run measured.
type Report struct {
	// Config echoes the settings of the run (the admin token left out).
	Config      Settings    `json:"config"`
	Start       time.Time   `json:"start"`
	Environment Environment `json:"environment"`
	// Results has one entry per strategy, in the order they ran.
	Results []Result `json:"results"`
}

// Settings is the Config a report was made with, defaults filled in.
type Settings struct {
	URLs      []string `json:"urls"`
	ProductID int64    `json:"product_id,omitempty"`
	// Products and Zipf are Config's: a catalogue of Products products,
	// each request's product drawn by a Zipf law of exponent Zipf (0:
	// uniform); Products is 0 for a run of one product.
	Products int     `json:"products,omitempty"`
	Zipf     float64 `json:"zipf,omitempty"`
	// Catalogue are the products of a catalogue, the hottest by the law
	// first.
	Catalogue  []CatalogueProduct `json:"catalogue,omitempty"`
	Stock      int64              `json:"stock,omitempty"`
	Strategies []string           `json:"strategies,omitempty"`
	Mode       string             `json:"mode"` // "closed" or "open"
	// Requests is the closed loop's request count (0: it ran for
	// Duration), or the number of requests the open loop scheduled after
	// its warmup.
	Requests    int           `json:"requests"`
	Concurrency int           `json:"concurrency"`
	Rates       []float64     `json:"rates,omitempty"`
	Duration    time.Duration `json:"duration_ns,omitempty"`
	Warmup      time.Duration `json:"warmup_ns,omitempty"`
	Hold        time.Duration `json:"hold_ns,omitempty"`
	Pause       time.Duration `json:"pause_ns,omitempty"`
	Batch       int           `json:"batch,omitempty"`
	Fencing     *bool         `json:"fencing,omitempty"`
	Quantity    int64         `json:"quantity,omitempty"`
	Endpoint    string        `json:"endpoint,omitempty"`
	Timeout     time.Duration `json:"timeout_ns"`
}

// Environment is where the driver ran.
type Environment struct {
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Hostname   string `json:"hostname,omitempty"`
}

// Result is one run under one strategy. Its figures leave the warmup out.
type Result struct {
	// Strategy is the strategy's name; under the server's default
	// (Default), the one the orders named, if any.
	Strategy    string `json:"strategy"`
	Description string `json:"description,omitempty"`
	Safe        bool   `json:"safe"`
	Default     bool   `json:"default,omitempty"`
	// Raw says the run fired GETs at Settings.Endpoint, not purchases.
	Raw bool `json:"raw,omitempty"`

	// Requests counts the answered requests (transport errors included).
	Requests int `json:"requests"`
	// Successes counts the 201s (2xx in the raw mode).
	Successes int `json:"successes"`
	// Outcomes counts every answer under one of the Outcome* keys.
	Outcomes map[string]int `json:"outcomes"`
	// Dropped counts the open loop's requests that could not be sent
	// within one interval of their time because every slot was busy: they
	// were never sent.
	Dropped int `json:"dropped"`
	// Codes details other_4xx, 5xx and other by status and error code,
	// e.g. "503 unavailable".
	Codes map[string]int `json:"codes,omitempty"`
	// Samples are a few transport error messages.
	Samples []string `json:"transport_samples,omitempty"`
	// Warmup counts what the warmup's answers were, left out of every
	// other figure; nil without a warmup.
	Warmup *Warmup `json:"warmup,omitempty"`

	// Elapsed runs from the end of the warmup (the first request without
	// one) to the last answer.
	Elapsed time.Duration `json:"elapsed_ns"`
	// SoldOut says the stock ran out: a sold_out answer came, or the
	// audit found none left; over a catalogue, the audit found none left
	// of any of its products.
	SoldOut bool `json:"sold_out"`
	// TimeToSoldOut runs from the end of the warmup to the 201 that took
	// the last unit (the last 201 of a run that sold out); 0: not sold
	// out, negative: sold out during the warmup.
	TimeToSoldOut time.Duration `json:"time_to_sold_out_ns"`
	// Throughput is Requests per second of Elapsed, SuccessThroughput
	// Successes per second of Elapsed.
	Throughput        float64 `json:"throughput"`
	SuccessThroughput float64 `json:"success_throughput"`
	// SellRate is the purchase rate while stock lasted: 201s per second
	// of TimeToSoldOut, or of Elapsed when the stock lasted the whole run.
	SellRate float64 `json:"sell_rate"`
	// MaxSendDelay is, in the open loop, the latest a request that was
	// sent left after its intended send time (its latency includes that
	// delay).
	MaxSendDelay time.Duration `json:"max_send_delay_ns,omitempty"`
	// Latency is the distribution of every answer's latency;
	// LatencyByOutcome that of each outcome's answers.
	Latency          Latency            `json:"latency"`
	LatencyByOutcome map[string]Latency `json:"latency_by_outcome"`
	// Steps has one entry per rate of the open loop.
	Steps []Step `json:"steps,omitempty"`
	// Series has one entry per second of the run, from its first to its
	// last answer: the answers that came in during it, whatever their
	// send time. The warmup's seconds are numbered below 0.
	Series []Second `json:"series"`
	// Instances says how each instance fared.
	Instances []Instance `json:"instances"`

	// Audited says Audit and AuditBefore were read (not in the raw mode).
	Audited bool `json:"audited"`
	// AuditError says why the audit after the run could not be read.
	AuditError string `json:"audit_error,omitempty"`
	// Audit is the server's audit after the run, AuditBefore the one
	// before it (after the stock reset).
	Audit       Audit `json:"audit"`
	AuditBefore Audit `json:"audit_before"`
	// RunOrders and RunUnits are the orders and units the audit gained
	// during the run.
	RunOrders int64 `json:"run_orders"`
	RunUnits  int64 `json:"run_units"`
	// CountsAgree says the audit gained exactly one order of Quantity
	// units per 201 the driver saw (the warmup's included).
	CountsAgree bool `json:"counts_agree"`
	// UnsoldUnits are the units left at the end of a run whose demand
	// (requests times quantity) exceeded the stock it began with: stock
	// that a sale which ended early, or answered sold_out wrongly, left
	// behind. Absent when demand did not exceed the stock.
	UnsoldUnits *int64 `json:"unsold_units,omitempty"`
	// History is the check of the run's own history (-history).
	History *HistoryVerdict `json:"history,omitempty"`
	// Catalogue is what a run over a catalogue (Settings.Products) saw
	// product by product; nil for a run of one product.
	Catalogue *CatalogueRun `json:"catalogue,omitempty"`
	// Verdict says in a few words how the run went: "held", "oversold, as
	// expected", "BROKEN: ...", with the dropped requests if any.
	Verdict string `json:"verdict"`
}

// CatalogueProduct is one product of a catalogue.
type CatalogueProduct struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// CatalogueRun is what a run over a catalogue saw product by product. Its
// sell rate and latency are the Result's: the catalogue counts as one
// product there, and its audit is the sum of its products' audits.
type CatalogueRun struct {
	// SoldOutProducts counts the products whose audit found no stock left.
	SoldOutProducts int `json:"sold_out_products"`
	// Hottest are the products that drew the most requests, at most five.
	Hottest []HotProduct `json:"hottest"`
	// Broken are the products whose audit broke the stock invariant or
	// disagrees with the driver's count of their 201s.
	Broken []ProductAudit `json:"broken,omitempty"`
}

// HotProduct is one of the hottest products of a run: its requests (the
// warmup's left out), their share of the run's, and its 201s.
type HotProduct struct {
	Rank      int     `json:"rank"`
	ProductID int64   `json:"product_id"`
	Name      string  `json:"name"`
	Requests  int     `json:"requests"`
	Share     float64 `json:"share"`
	Created   int     `json:"created"`
}

// ProductAudit is a product's audit after a run, with the 201s the driver
// saw of it (the warmup's included).
type ProductAudit struct {
	Name    string `json:"name"`
	Audit   Audit  `json:"audit"`
	Created int    `json:"created"`
}

// String says how the product broke the invariant, for a person.
func (p ProductAudit) String() string {
	a := p.Audit
	s := fmt.Sprintf("product %s (id %d): initial stock %d, final stock %d, units sold %d, oversold %d, consistent %t",
		p.Name, a.ProductID, a.InitialStock, a.Stock, a.UnitsSold, a.OversoldUnits, a.Consistent)
	if a.Orders != int64(p.Created) {
		s += fmt.Sprintf("; %d orders, the driver saw %d 201s", a.Orders, p.Created)
	}
	return s
}

// Warmup is what the warmup's answers were.
type Warmup struct {
	Requests  int            `json:"requests"`
	Successes int            `json:"successes"`
	Outcomes  map[string]int `json:"outcomes"`
	Dropped   int            `json:"dropped"`
}

// Step is one rate of the open loop.
type Step struct {
	Rate       float64        `json:"rate"`
	Scheduled  int            `json:"scheduled"`
	Requests   int            `json:"requests"`
	Dropped    int            `json:"dropped"`
	Successes  int            `json:"successes"`
	Outcomes   map[string]int `json:"outcomes"`
	Throughput float64        `json:"throughput"` // answers per second of the step's length
	Latency    Latency        `json:"latency"`
}

// Second is one second of a run: the answers that came in during it, and
// the open loop's requests due in it that were dropped. Stock is the stock
// left at its end as the driver counts it: the stock before the run less
// the units of every 201 so far.
type Second struct {
	Second        int            `json:"second"`
	Answers       int            `json:"answers"`
	Created       int            `json:"created"`
	SoldOut       int            `json:"sold_out"`
	LockFailures  int            `json:"lock_failures"`  // lock_timeout and lock_lost
	OtherFailures int            `json:"other_failures"` // every other answer but 201 and sold_out
	Dropped       int            `json:"dropped,omitempty"`
	Outcomes      map[string]int `json:"outcomes,omitempty"`
	P50           time.Duration  `json:"p50_ns"`
	P99           time.Duration  `json:"p99_ns"`
	Max           time.Duration  `json:"max_ns"`
	Stock         *int64         `json:"stock,omitempty"`
}

// Instance is how one instance fared in a run.
type Instance struct {
	URL       string `json:"url"`
	Requests  int    `json:"requests"`
	Transport int    `json:"transport_errors"`
	// Down says it did not answer /healthz after the run; Error says how.
	Down  bool   `json:"down"`
	Error string `json:"error,omitempty"`
}

// Latency is the distribution of latencies, from the send time (the
// intended send time in the open loop) to the answer's headers and body.
type Latency struct {
	Count int           `json:"count"`
	Min   time.Duration `json:"min_ns"`
	Mean  time.Duration `json:"mean_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P95   time.Duration `json:"p95_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Failures says why the run should exit non-zero: a strategy marked safe
// broke the stock invariant (over a catalogue, each product that broke it
// is named) or left a history that is not linearizable, a history could
// not be checked, the audit disagrees with the driver's count of 201s or
// could not be read, an instance went down, or no request got through. It
// is empty when all went well.
func (r *Report) Failures() []string {
	var out []string
	for _, res := range r.Results {
		out = append(out, res.failures()...)
	}
	return out
}

// name is how the failures call the result's strategy.
func (r Result) name() string {
	if r.Strategy == "" {
		return "default strategy"
	}
	return r.Strategy
}

// failures are the reasons this result fails the run.
func (r Result) failures() []string {
	var out []string
	name := r.name()
	if r.Requests > 0 && r.Outcomes[OutcomeTransport] == r.Requests {
		msg := fmt.Sprintf("%s: no request got through (%d transport errors)", name, r.Requests)
		if len(r.Samples) > 0 {
			msg += ", e.g. " + r.Samples[0]
		}
		out = append(out, msg)
	}
	for _, in := range r.Instances {
		if in.Down {
			out = append(out, fmt.Sprintf("%s: instance %s went down during the run (%d of its %d requests got no answer): %s",
				name, in.URL, in.Transport, in.Requests, in.Error))
		}
	}
	if r.AuditError != "" {
		out = append(out, fmt.Sprintf("%s: the audit after the run failed: %s", name, r.AuditError))
	}
	if !r.Audited {
		return out
	}
	if !r.CountsAgree {
		msg := fmt.Sprintf("%s: counts disagree: the audit gained %d orders (%d units) during the run, the driver saw %d 201s",
			name, r.RunOrders, r.RunUnits, r.Successes+r.warmSuccesses())
		if n := r.Outcomes[OutcomeTransport]; n > 0 {
			msg += fmt.Sprintf(" (and %d requests without an answer)", n)
		}
		out = append(out, msg)
	}
	if h := r.History; h != nil && !h.Checked {
		out = append(out, fmt.Sprintf("%s: its history could not be checked: %s", name, h.Error))
	}
	if h := r.History; h != nil && h.Checked && r.Safe && !h.Linearizable {
		out = append(out, fmt.Sprintf("%s (marked safe): its history is not linearizable: %s", name, h.Violation))
	}
	if r.Safe && !r.Audit.Held() {
		out = append(out, fmt.Sprintf("%s (marked safe) broke the stock invariant: initial stock %d, final stock %d, units sold %d, oversold %d, consistent %t",
			name, r.Audit.InitialStock, r.Audit.Stock, r.Audit.UnitsSold, r.Audit.OversoldUnits, r.Audit.Consistent))
	}
	if r.Safe && r.Catalogue != nil {
		for _, b := range r.Catalogue.Broken {
			out = append(out, name+": "+b.String())
		}
	}
	return out
}

func (r Result) warmRequests() int {
	if r.Warmup == nil {
		return 0
	}
	return r.Warmup.Requests
}

func (r Result) warmSuccesses() int {
	if r.Warmup == nil {
		return 0
	}
	return r.Warmup.Successes
}

func (r Result) instanceDown() bool {
	for _, in := range r.Instances {
		if in.Down {
			return true
		}
	}
	return false
}

// verdict sums the result up in a few words.
func (r Result) verdict() string {
	v := "held"
	switch {
	case r.Requests > 0 && r.Outcomes[OutcomeTransport] == r.Requests:
		v = "BROKEN: no answer"
	case r.instanceDown():
		v = "BROKEN: instance down"
	case r.Raw:
		v = "ok"
	case r.AuditError != "":
		v = "BROKEN: audit failed"
	case !r.Audited:
		v = "not audited"
	case !r.CountsAgree:
		v = "BROKEN: counts disagree"
	case r.Safe && r.Audit.OversoldUnits > 0:
		v = fmt.Sprintf("BROKEN: oversold %d", r.Audit.OversoldUnits)
	case r.Safe && !r.Audit.Consistent:
		v = "BROKEN: audit inconsistent"
	case r.Safe && r.History != nil && r.History.Checked && !r.History.Linearizable:
		v = "BROKEN: not linearizable"
	case r.Audit.OversoldUnits > 0:
		v = "oversold, as expected"
	case !r.Audit.Consistent:
		v = "lost updates, as expected"
	case !r.Safe:
		v = "held this time (unsafe)"
	}
	if r.Dropped > 0 {
		v += fmt.Sprintf("; %d dropped", r.Dropped)
	}
	return v
}

// WriteJSON writes the report as indented JSON; durations are in
// nanoseconds (keys ending in _ns).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("driver: write json: %w", err)
	}
	return nil
}

// WriteCSV writes one row per second of each run: strategy, second (0 is
// the first after the warmup), answers, 201s, sold_out, lock failures
// (lock_timeout and lock_lost), other failures, and the p50 and p99 of
// that second's answers in milliseconds (empty when none came).
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
		return fmt.Errorf("driver: write csv: %w", ew.err)
	}
	return nil
}
