package report

import (
	"fmt"
	"time"

	"github.com/seckill/seckill/api"
)

// Outcomes: the keys of Result.Outcomes. Every answer counts under exactly
// one of them.
const (
	OutcomeCreated       = "created"        // 201: a purchase made an order
	OutcomeAccepted      = "accepted"       // 202: a purchase under reserve took its units; its order comes later (a promise)
	OutcomeOK            = "ok"             // any other 2xx in the raw mode (-endpoint)
	OutcomeSoldOut       = "sold_out"       // 409 sold_out
	OutcomeLimitExceeded = "limit_exceeded" // 409 limit_exceeded
	OutcomeLockTimeout   = "lock_timeout"   // 503 lock_timeout
	OutcomeLockLost      = "lock_lost"      // 503 lock_lost
	OutcomeOther4xx      = "other_4xx"      // any other 4xx
	Outcome5xx           = "5xx"            // any other 5xx
	OutcomeTransport     = "transport"      // no answer: connection refused, reset, timeout
	OutcomeOther         = "other"          // anything else (a 200 replay, a 3xx)
)

// Report is everything one run of the driver measured.
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
	// Successes counts the 201s and the 202s (reserve's promises); 2xx in
	// the raw mode.
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
	// TimeToSoldOut runs from the end of the warmup to the success (201
	// or 202) that took the last unit (the last of a run that sold out);
	// 0: not sold out, negative: sold out during the warmup.
	TimeToSoldOut time.Duration `json:"time_to_sold_out_ns"`
	// Throughput is Requests per second of Elapsed, SuccessThroughput
	// Successes per second of Elapsed.
	Throughput        float64 `json:"throughput"`
	SuccessThroughput float64 `json:"success_throughput"`
	// SellRate is the purchase rate while stock lasted: successes (201s
	// and 202s) per second of TimeToSoldOut, or of Elapsed when the stock
	// lasted the whole run.
	SellRate float64 `json:"sell_rate"`
	// MaxSendDelay is, in the open loop, the latest a request that was
	// sent left after its intended send time (its latency includes that
	// delay).
	MaxSendDelay time.Duration `json:"max_send_delay_ns,omitempty"`
	// Latency is the distribution of every answer's latency;
	// LatencyByOutcome that of each outcome's answers.
	Latency          Latency            `json:"latency"`
	LatencyByOutcome map[string]Latency `json:"latency_by_outcome"`
	// SuccessLatency is the latency of the 201s and the 202s together, for
	// a run that had 202s; absent otherwise, where the successes' latency
	// is LatencyByOutcome's created.
	SuccessLatency Latency `json:"success_latency,omitzero"`
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
	Audit       api.Audit `json:"audit"`
	AuditBefore api.Audit `json:"audit_before"`
	// RunOrders and RunUnits are the orders and units the audit gained
	// during the run.
	RunOrders int64 `json:"run_orders"`
	RunUnits  int64 `json:"run_units"`
	// CountsAgree says the audit gained exactly one order of Quantity
	// units per 201 the driver saw (the warmup's included) and per promise
	// kept (a 202 whose order the drain saw; see Promises).
	CountsAgree bool `json:"counts_agree"`
	// UnsoldUnits are the units left at the end of a run whose demand
	// (requests times quantity) exceeded the stock it began with: stock
	// that a sale which ended early, or answered sold_out wrongly, left
	// behind. Absent when demand did not exceed the stock.
	UnsoldUnits *int64 `json:"unsold_units,omitempty"`
	// History is the check of the run's own history (-history).
	History *HistoryVerdict `json:"history,omitempty"`
	// RunReturned are the units the audit counted back during the run
	// (cancels and expiries); RunUnits counts them among those taken.
	RunReturned int64 `json:"run_returned"`
	// Cancels is what the run's cancels (-cancel) were answered; nil for
	// a run without.
	Cancels *Cancels `json:"cancels,omitempty"`
	// Promises is what became of the run's 202s (the warmup's included),
	// asked for after the run (-drain); nil for a run without any.
	Promises *Promises `json:"promises,omitempty"`
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
	// disagrees with the driver's count of their 201s and promises kept.
	Broken []ProductAudit `json:"broken,omitempty"`
}

// HotProduct is one of the hottest products of a run: its requests (the
// warmup's left out), their share of the run's, and its successes (201s,
// and 202s under reserve).
type HotProduct struct {
	Rank      int     `json:"rank"`
	ProductID int64   `json:"product_id"`
	Name      string  `json:"name"`
	Requests  int     `json:"requests"`
	Share     float64 `json:"share"`
	Created   int     `json:"created"`
}

// ProductAudit is a product's audit after a run, with the orders the
// driver expected of it: one per 201 it saw (the warmup's included) and
// per promise kept (a 202 whose order the drain saw).
type ProductAudit struct {
	Name    string    `json:"name"`
	Audit   api.Audit `json:"audit"`
	Created int       `json:"created"`
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
// the open loop's requests due in it that were dropped. Created counts its
// successes: 201s, and 202s under reserve. Stock is the stock left at its
// end as the driver counts it: the stock before the run less the units of
// every success so far.
type Second struct {
	Second        int            `json:"second"`
	Answers       int            `json:"answers"`
	Created       int            `json:"created"`
	SoldOut       int            `json:"sold_out"`
	LockFailures  int            `json:"lock_failures"`  // lock_timeout and lock_lost
	OtherFailures int            `json:"other_failures"` // every other answer but 201, 202 and sold_out
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

// Cancels is what a run's cancels (-cancel) were answered: 200, the
// order cancelled and its units back on sale; a refusal (a 4xx: an order
// paid or expired); no answer or a 5xx.
type Cancels struct {
	Sent     int `json:"sent"`
	Returned int `json:"returned"`
	Refused  int `json:"refused"`
	Failed   int `json:"failed"`
}

// note is the line under the table about a run's cancels.
func (c *Cancels) note(returnedUnits int64) string {
	return fmt.Sprintf("cancels: %d sent as their buyers, %d answered 200 (their units back on sale), %d refused, %d without an answer; the audit counted %d units back",
		c.Sent, c.Returned, c.Refused, c.Failed, returnedUnits)
}

// Promises is what became of a run's 202s: under reserve a 202 is a
// promise that the order will be written. The driver asks
// GET /api/v1/purchases/{request_id} for each, in rounds, from its arrival
// until it became an order or the drain after the run ran out.
type Promises struct {
	// Made counts the 202s. Each ended as one of Kept (it became an
	// order), Failed (the database refused it: state failed), Lost (404
	// purchase_not_found) or Pending (still pending when the drain ran
	// out, or never answered a poll).
	Made    int `json:"made"`
	Kept    int `json:"kept"`
	Failed  int `json:"failed"`
	Lost    int `json:"lost"`
	Pending int `json:"pending"`
	// Drain is how long the driver waited after the load, DrainLimit the
	// most it would have (-drain).
	Drain      time.Duration `json:"drain_ns"`
	DrainLimit time.Duration `json:"drain_limit_ns"`
	// Polls counts the requests asking for a promise's state; PollErrors
	// those that got no state (no answer, or an error other than 404
	// purchase_not_found): their promise was asked again the next round.
	Polls      int `json:"polls"`
	PollErrors int `json:"poll_errors"`
	// PollPause is the pause between two rounds of polls.
	PollPause time.Duration `json:"poll_pause_ns"`
	// WriteLag is the write lag of the kept promises followed from their
	// 202 (at most 64 at a time while the load runs): from the 202's arrival to
	// the answer of the first poll that found the order. The order carries
	// no time of its own, so this is an upper bound of the time to the
	// order's row, at the polls' resolution (a round and a pause).
	WriteLag Latency `json:"write_lag"`
	// Samples are a few of the promises not kept, for a person: request
	// ID and what became of it.
	Samples []string `json:"samples,omitempty"`
}

// Broken counts the promises not kept: failed, lost or still pending.
func (p *Promises) Broken() int { return p.Failed + p.Lost + p.Pending }

// HistoryVerdict is the check of a run's history (-history).
type HistoryVerdict struct {
	// Checked says the check could decide; Error says why not.
	Checked bool   `json:"checked"`
	Error   string `json:"error,omitempty"`
	// Linearizable: every answer fits one stock counter (package history).
	Linearizable bool `json:"linearizable"`
	// Violation is the first one, for a person.
	Violation string `json:"violation,omitempty"`
	// UndersoldAnswers counts the sold_out answers given while stock surely
	// remained.
	UndersoldAnswers int `json:"undersold_answers"`
	Purchases        int `json:"purchases"`
}
