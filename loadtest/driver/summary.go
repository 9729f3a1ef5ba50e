package driver

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/loadtest/report"
)

// result turns a tally into a report.Result without the audit.
func result(p *plan, t *tally, raw bool) report.Result {
	res := report.Result{
		Requests:         int(t.total()),
		Outcomes:         outcomeMap(t.counts, raw),
		Dropped:          int(t.dropped),
		Codes:            map[string]int{},
		Elapsed:          t.elapsed,
		MaxSendDelay:     t.maxSendDelay,
		Samples:          t.samples,
		Raw:              raw,
		Latency:          latency(t.all()),
		LatencyByOutcome: map[string]report.Latency{},
	}
	for k, v := range t.codes {
		res.Codes[k] = int(v)
	}
	successes := func(c [numOutcomes]int64) int {
		if raw {
			return int(c[outOK])
		}
		return int(c[outCreated] + c[outAccepted])
	}
	res.Successes = successes(t.counts)
	if t.counts[outAccepted] > 0 {
		var h *hdrhistogram.Histogram
		mergeHist(&h, t.hists[outCreated], histSigFigs)
		mergeHist(&h, t.hists[outAccepted], histSigFigs)
		res.SuccessLatency = latency(h)
	}
	if s := t.elapsed.Seconds(); s > 0 {
		res.Throughput = float64(res.Requests) / s
		res.SuccessThroughput = float64(res.Successes) / s
	}
	for i, h := range t.hists {
		if h != nil {
			res.LatencyByOutcome[outcomeNames[i]] = latency(h)
		}
	}
	res.Warmup = warmupOf(p, t, raw, successes)
	res.Steps = stepsOf(p, t, raw, successes)
	for _, s := range t.series {
		res.Series = append(res.Series, s.summarize(raw))
	}
	for i, tt := range t.targets {
		res.Instances = append(res.Instances, report.Instance{URL: p.bases[i], Requests: int(tt.answers), Transport: int(tt.transport)})
	}
	return res
}

// warmupOf counts the warmup's answers apart: nil for a plan without one.
func warmupOf(p *plan, t *tally, raw bool, successes func([numOutcomes]int64) int) *report.Warmup {
	if p.warmup() <= 0 {
		return nil
	}
	w := &report.Warmup{Outcomes: outcomeMap(t.warm, raw), Successes: successes(t.warm), Dropped: int(t.warmDropped)}
	for _, n := range t.warm {
		w.Requests += int(n)
	}
	return w
}

// stepsOf sums up each step of an open plan's rates after the warmup: nil
// for a closed plan.
func stepsOf(p *plan, t *tally, raw bool, successes func([numOutcomes]int64) int) []report.Step {
	if !p.open {
		return nil
	}
	var steps []report.Step
	for i, ph := range p.phases {
		if ph.warm {
			continue
		}
		st := t.steps[i]
		step := report.Step{Rate: ph.rate, Scheduled: ph.n, Dropped: int(st.dropped), Outcomes: outcomeMap(st.counts, raw),
			Successes: successes(st.counts), Latency: latency(st.hist)}
		for _, n := range st.counts {
			step.Requests += int(n)
		}
		step.Throughput = float64(step.Requests) / ph.length.Seconds()
		steps = append(steps, step)
	}
	return steps
}

// summarize sums up one second of the run: its answers by outcome and by
// column, and its latency.
func (s *secAgg) summarize(raw bool) report.Second {
	sec := report.Second{Second: s.sec, Dropped: int(s.dropped), Outcomes: map[string]int{}}
	for i, n := range s.counts {
		if n > 0 {
			sec.Outcomes[outcomeNames[i]] = int(n)
		}
		sec.Answers += int(n)
		switch outcome(i) {
		case outCreated, outAccepted, outOK:
			sec.Created += int(n)
		case outSoldOut:
			sec.SoldOut += int(n)
		case outLockTimeout, outLockLost:
			sec.LockFailures += int(n)
		default:
			sec.OtherFailures += int(n)
		}
	}
	if raw {
		sec.Created = 0 // the 201 column counts purchases only
	}
	if l := latency(s.hist); l.Count > 0 {
		sec.P50, sec.P99, sec.Max = l.P50, l.P99, l.Max
	}
	return sec
}

// setStock fills in each second's stock left, from the stock before the
// run and the units of each second's successes (201s and 202s).
func setStock(series []report.Second, before, quantity int64) {
	stock := before
	for i := range series {
		stock -= int64(series[i].Created) * quantity
		left := stock
		series[i].Stock = &left
	}
}

// outcomeMap names the counts of c: every failure that has a column of its
// own, the 201s, and any other that is not 0 (the 202s of reserve, 2xx of
// the raw mode, other).
func outcomeMap(c [numOutcomes]int64, raw bool) map[string]int {
	m := map[string]int{}
	for i, n := range c {
		if n > 0 || (raw && i == int(outOK)) || (!raw && i != int(outOK) && i != int(outOther) && i != int(outAccepted)) {
			m[outcomeNames[i]] = int(n)
		}
	}
	return m
}

func latency(h *hdrhistogram.Histogram) report.Latency {
	if h == nil || h.TotalCount() == 0 {
		return report.Latency{}
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return report.Latency{
		Count: int(h.TotalCount()),
		Min:   us(h.Min()),
		Mean:  time.Duration(h.Mean() * float64(time.Microsecond)),
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P95:   us(h.ValueAtQuantile(95)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
	}
}

func targets(bases []string, path string) []string {
	out := make([]string, len(bases))
	for i, b := range bases {
		out[i] = b + path
	}
	return out
}

func label(st client.Strategy) string {
	if st.Name == "" {
		return "default"
	}
	return st.Name
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b)
}

// settings echoes cfg, and the products of a catalogue.
func settings(cfg Config, products []client.Product) report.Settings {
	s := report.Settings{
		URLs: cfg.URLs, ProductID: cfg.ProductID, Products: cfg.Products, Stock: cfg.Stock, Strategies: cfg.Strategies,
		Mode: "closed", Requests: cfg.Requests, Concurrency: cfg.Concurrency, Rates: cfg.Rates,
		Duration: cfg.Duration, Warmup: cfg.Warmup, Hold: cfg.Hold, Pause: cfg.Pause, Batch: cfg.Batch,
		Fencing: cfg.Fencing, Quantity: cfg.Quantity, Endpoint: cfg.Endpoint, Timeout: cfg.Timeout,
	}
	if cfg.Open() {
		s.Mode = "open"
		s.Requests = cfg.scheduled()
	}
	if cfg.Products > 0 {
		s.Zipf = cfg.Zipf
		s.Catalogue = make([]report.CatalogueProduct, len(products))
		for k, p := range products {
			s.Catalogue[k] = report.CatalogueProduct{ID: p.ID, Name: p.Name}
		}
	}
	return s
}

func environment() report.Environment {
	host, _ := os.Hostname() // a report without a host name is still a report
	return report.Environment{
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Hostname:   host,
	}
}
