package driver

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

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
	URLs        []string      `json:"urls"`
	ProductID   int64         `json:"product_id,omitempty"`
	Stock       int64         `json:"stock,omitempty"`
	Strategies  []string      `json:"strategies,omitempty"`
	Mode        string        `json:"mode"` // "closed" or "open"
	Requests    int           `json:"requests"`
	Concurrency int           `json:"concurrency"`
	Rate        float64       `json:"rate,omitempty"`
	Duration    time.Duration `json:"duration_ns,omitempty"`
	Hold        time.Duration `json:"hold_ns,omitempty"`
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

// Result is one run under one strategy.
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
	// Outcomes counts every request under one of the Outcome* keys.
	Outcomes map[string]int `json:"outcomes"`
	// Codes details other_4xx, 5xx and other by status and error code,
	// e.g. "503 unavailable".
	Codes map[string]int `json:"codes,omitempty"`
	// Samples are a few transport error messages.
	Samples []string `json:"transport_samples,omitempty"`

	// Elapsed runs from the first request to the last answer.
	Elapsed time.Duration `json:"elapsed_ns"`
	// TimeToSoldOut runs from the start to the first sold_out answer, or
	// to the last 201 when the stock reached 0 without one; 0: not sold
	// out.
	TimeToSoldOut time.Duration `json:"time_to_sold_out_ns"`
	// Throughput is Requests per second of Elapsed, SuccessThroughput
	// Successes per second of Elapsed.
	Throughput        float64 `json:"throughput"`
	SuccessThroughput float64 `json:"success_throughput"`
	// MaxSendDelay is, in the open loop, the latest a request left after
	// its intended send time (every latency includes that delay).
	MaxSendDelay time.Duration `json:"max_send_delay_ns,omitempty"`
	Latency      Latency       `json:"latency"`

	// Audited says Audit and AuditBefore were read (not in the raw mode).
	Audited bool `json:"audited"`
	// Audit is the server's audit after the run, AuditBefore the one
	// before it (after the stock reset).
	Audit       Audit `json:"audit"`
	AuditBefore Audit `json:"audit_before"`
	// RunOrders and RunUnits are the orders and units the audit gained
	// during the run.
	RunOrders int64 `json:"run_orders"`
	RunUnits  int64 `json:"run_units"`
	// CountsAgree says the audit gained exactly one order of Quantity
	// units per 201 the driver saw.
	CountsAgree bool `json:"counts_agree"`
	// Verdict says in a few words how the run went: "held", "oversold, as
	// expected", "BROKEN: ...".
	Verdict string `json:"verdict"`
}

// Latency is the distribution of a run's latencies, from the send time
// (the intended send time in the open loop) to the answer's headers and
// body.
type Latency struct {
	Min  time.Duration `json:"min_ns"`
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P95  time.Duration `json:"p95_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
}

// Failures says why the run should exit non-zero: a strategy marked safe
// broke the stock invariant, the audit disagrees with the driver's count
// of 201s, or no request got through. It is empty when all went well.
func (r *Report) Failures() []string {
	var out []string
	for _, res := range r.Results {
		out = append(out, res.failures()...)
	}
	return out
}

// failures are the reasons this result fails the run.
func (r Result) failures() []string {
	var out []string
	name := r.Strategy
	if name == "" {
		name = "default strategy"
	}
	if r.Requests > 0 && r.Outcomes[OutcomeTransport] == r.Requests {
		msg := fmt.Sprintf("%s: no request got through (%d transport errors)", name, r.Requests)
		if len(r.Samples) > 0 {
			msg += ", e.g. " + r.Samples[0]
		}
		out = append(out, msg)
	}
	if !r.Audited {
		return out
	}
	if !r.CountsAgree {
		msg := fmt.Sprintf("%s: counts disagree: the audit gained %d orders (%d units) during the run, the driver saw %d 201s",
			name, r.RunOrders, r.RunUnits, r.Successes)
		if n := r.Outcomes[OutcomeTransport]; n > 0 {
			msg += fmt.Sprintf(" (and %d requests without an answer)", n)
		}
		out = append(out, msg)
	}
	if r.Safe && !r.Audit.Held() {
		out = append(out, fmt.Sprintf("%s (marked safe) broke the stock invariant: initial stock %d, final stock %d, units sold %d, oversold %d, consistent %t",
			name, r.Audit.InitialStock, r.Audit.Stock, r.Audit.UnitsSold, r.Audit.OversoldUnits, r.Audit.Consistent))
	}
	return out
}

// verdict sums the result up in a few words.
func (r Result) verdict() string {
	switch {
	case r.Requests > 0 && r.Outcomes[OutcomeTransport] == r.Requests:
		return "BROKEN: no answer"
	case r.Raw:
		return "ok"
	case !r.CountsAgree:
		return "BROKEN: counts disagree"
	case r.Safe && r.Audit.OversoldUnits > 0:
		return fmt.Sprintf("BROKEN: oversold %d", r.Audit.OversoldUnits)
	case r.Safe && !r.Audit.Consistent:
		return "BROKEN: audit inconsistent"
	case r.Audit.OversoldUnits > 0:
		return "oversold, as expected"
	case !r.Audit.Consistent:
		return "lost updates, as expected"
	case !r.Safe:
		return "held this time (unsafe)"
	}
	return "held"
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
