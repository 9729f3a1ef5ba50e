package load

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill/seckill/loadtest/driver/latency"
)

const (
	maxSamples = 5 // transport error messages kept per run
	// ringSize is the number of seconds a shard keeps before the watcher
	// moves them to the series; the watcher moves a second 2 s after it.
	ringSize = 8
	// tick is how often the watcher moves seconds and draws the progress.
	tick = 100 * time.Millisecond
)

// Tally is what a run measured. Times are since the load's start.
type Tally struct {
	counts [numOutcomes]int64                   // measured answers
	hists  [numOutcomes]*hdrhistogram.Histogram // their latency; nil: none
	warm   [numOutcomes]int64                   // answers of the warmup
	// dropped and warmDropped count the open loop's requests that could
	// not be sent on time.
	dropped, warmDropped int64
	// FirstSoldOut is when the first 409 sold_out came; -1: none.
	FirstSoldOut time.Duration
	// LastCreated is when the last success (201 or 202) came, warmup
	// included; -1: none.
	LastCreated  time.Duration
	maxSendDelay time.Duration // open loop: the latest a request left after its intended time
	codes        map[string]int64
	samples      []string
	targets      []targetTally // per target
	steps        []stepTally   // per phase, open loop only
	// Products are the answers per product, in the order of
	// Plan.ProductIDs.
	Products []ProductTally
	// OverrideDisabled is the URL of an instance that answered 403
	// strategy_override_disabled.
	OverrideDisabled string
	// OrderStrategy is the strategy the captured 201 or 202 named
	// (Plan.CaptureStrategy).
	OrderStrategy string
	// Set by Run on the merged tally: its plan, the measured phase's
	// length (from its start to the end of the load), the per-second
	// series and the cancels.
	plan    *Plan
	elapsed time.Duration
	series  []secAgg
	cancels *cancels
}

// ProductTally counts one product's answers in a run: its requests and
// its successes (201s and 202s).
type ProductTally struct {
	Requests, Created         int64 // measured
	WarmRequests, WarmCreated int64 // of the warmup
	// Unknown counts its answers 503 outcome_unknown (the warmup's too):
	// each may or may not have made an order.
	Unknown int64
}

// Made counts the product's successes, the warmup's included.
func (pt ProductTally) Made() int64 { return pt.Created + pt.WarmCreated }

type targetTally struct {
	answers, transport int64
}

type stepTally struct {
	counts  [numOutcomes]int64
	dropped int64
	hist    *hdrhistogram.Histogram
}

func newTally(targets, phases, products int) *Tally {
	return &Tally{
		FirstSoldOut: -1,
		LastCreated:  -1,
		codes:        map[string]int64{},
		targets:      make([]targetTally, targets),
		steps:        make([]stepTally, phases),
		Products:     make([]ProductTally, products),
	}
}

func (t *Tally) merge(o *Tally) {
	for i := range t.counts {
		t.counts[i] += o.counts[i]
		t.warm[i] += o.warm[i]
		latency.Merge(&t.hists[i], o.hists[i], latency.RunSigFigs)
	}
	t.dropped += o.dropped
	t.warmDropped += o.warmDropped
	if o.FirstSoldOut >= 0 && (t.FirstSoldOut < 0 || o.FirstSoldOut < t.FirstSoldOut) {
		t.FirstSoldOut = o.FirstSoldOut
	}
	t.LastCreated = max(t.LastCreated, o.LastCreated)
	t.maxSendDelay = max(t.maxSendDelay, o.maxSendDelay)
	for k, v := range o.codes {
		t.codes[k] += v
	}
	for _, s := range o.samples {
		if len(t.samples) < maxSamples {
			t.samples = append(t.samples, s)
		}
	}
	for i := range t.targets {
		t.targets[i].answers += o.targets[i].answers
		t.targets[i].transport += o.targets[i].transport
	}
	for i, pt := range o.Products {
		q := &t.Products[i]
		q.Requests += pt.Requests
		q.Created += pt.Created
		q.WarmRequests += pt.WarmRequests
		q.WarmCreated += pt.WarmCreated
		q.Unknown += pt.Unknown
	}
	for i := range t.steps {
		for j := range t.steps[i].counts {
			t.steps[i].counts[j] += o.steps[i].counts[j]
		}
		t.steps[i].dropped += o.steps[i].dropped
		latency.Merge(&t.steps[i].hist, o.steps[i].hist, latency.RunSigFigs)
	}
	if t.OverrideDisabled == "" {
		t.OverrideDisabled = o.OverrideDisabled
	}
	if t.OrderStrategy == "" {
		t.OrderStrategy = o.OrderStrategy
	}
}

// Promised counts the 202s, the warmup's included.
func (t *Tally) Promised() int64 { return t.counts[outAccepted] + t.warm[outAccepted] }

// total counts the measured answers.
func (t *Tally) total() int64 {
	var n int64
	for _, c := range t.counts {
		n += c
	}
	return n
}

// WithWarmup counts every answer, the warmup's included.
func (t *Tally) WithWarmup() int64 {
	n := t.total()
	for _, c := range t.warm {
		n += c
	}
	return n
}

// all merges the latency of every outcome.
func (t *Tally) all() *hdrhistogram.Histogram {
	var h *hdrhistogram.Histogram
	for _, o := range t.hists {
		latency.Merge(&h, o, latency.RunSigFigs)
	}
	return h
}

// secAgg is what one second of the load saw: the answers that came in
// during it, and the requests due in it that were dropped.
type secAgg struct {
	sec     int // 0 is the first second after the warmup
	counts  [numOutcomes]int64
	dropped int64
	hist    *hdrhistogram.Histogram // nil: no answer
}

func (s *secAgg) add(o *secAgg) {
	for i := range s.counts {
		s.counts[i] += o.counts[i]
	}
	s.dropped += o.dropped
	latency.Merge(&s.hist, o.hist, latency.SecondSigFigs)
}

// timeline gathers the seconds the shards hand over.
type timeline struct {
	mu   sync.Mutex
	secs map[int]*secAgg
}

func (s *timeline) add(o *secAgg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.secs[o.sec]
	if a == nil {
		a = &secAgg{sec: o.sec}
		s.secs[o.sec] = a
	}
	a.add(o)
}

// finish returns every second from the first to the last that saw
// anything, the quiet ones included.
func (s *timeline) finish() []secAgg {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.secs) == 0 {
		return nil
	}
	lo, hi := math.MaxInt, math.MinInt
	for k := range s.secs {
		lo, hi = min(lo, k), max(hi, k)
	}
	out := make([]secAgg, 0, hi-lo+1)
	for k := lo; k <= hi; k++ {
		if a := s.secs[k]; a != nil {
			out = append(out, *a)
		} else {
			out = append(out, secAgg{sec: k})
		}
	}
	return out
}

// shard is a tally and the seconds in progress behind a lock; workers
// share a few of them, so that a thousand workers do not need a thousand
// histograms.
type shard struct {
	mu     sync.Mutex
	t      *Tally
	ring   [ringSize]secAgg
	used   [ringSize]bool
	series *timeline
	_      [64]byte // keep shards on cache lines of their own
}

// second returns the slot of second sec; sh.mu is held.
func (sh *shard) second(sec int) *secAgg {
	k := ((sec % ringSize) + ringSize) % ringSize
	s := &sh.ring[k]
	if sh.used[k] && s.sec != sec {
		// The watcher fell behind by ringSize seconds: hand it over here.
		sh.series.add(s)
		sh.used[k] = false
	}
	if !sh.used[k] {
		hist := s.hist
		if hist == nil {
			hist = latency.New(latency.SecondSigFigs)
		} else {
			hist.Reset()
		}
		*s = secAgg{sec: sec, hist: hist}
		sh.used[k] = true
	}
	return s
}

// handOver moves the seconds before second before to the series.
func (sh *shard) handOver(before int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for k := range sh.ring {
		if sh.used[k] && sh.ring[k].sec < before {
			sh.series.add(&sh.ring[k])
			sh.used[k] = false
		}
	}
}

// secondOf is the second of the series that d since the load's start
// falls in.
func secondOf(d, warmup time.Duration) int {
	return int(math.Floor(float64(d-warmup) / float64(time.Second)))
}

// live counts the answers as they come, for the progress line: every
// answer, warmup included.
type live struct {
	counts  [numOutcomes]atomic.Int64
	warm    atomic.Int64 // of the answers, those of the warmup
	dropped atomic.Int64
}

// record counts answer a to request r, answered at since.
func (sh *shard) record(p *Plan, r request, a answer, since, warmup time.Duration) {
	us := latency.Micros(since - r.intended)
	sec := secondOf(since, warmup)
	if r.warm {
		// Sent in the warmup, answered after it: the warmup's, in the
		// seconds (the CSV) as in the table, in its last second.
		sec = min(sec, -1)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.t
	pt := &t.Products[r.product]
	if a.code == codeOutcomeUnknown {
		pt.Unknown++
	}
	if r.warm {
		t.warm[a.out]++
		pt.WarmRequests++
		if a.out.success() {
			pt.WarmCreated++
		}
	} else {
		t.measure(p, r, a, us)
	}
	k := r.i % len(p.Targets)
	t.targets[k].answers++
	switch a.out {
	case outCreated, outAccepted:
		t.LastCreated = max(t.LastCreated, since)
	case outSoldOut:
		if t.FirstSoldOut < 0 || since < t.FirstSoldOut {
			t.FirstSoldOut = since
		}
	case outTransport:
		t.targets[k].transport++
		if len(t.samples) < maxSamples {
			t.samples = append(t.samples, a.sample)
		}
	}
	if a.override && t.OverrideDisabled == "" {
		t.OverrideDisabled = p.Targets[k]
	}
	if a.strategy != "" {
		t.OrderStrategy = a.strategy
	}
	s := sh.second(sec)
	s.counts[a.out]++
	_ = s.hist.RecordValue(us)
}

// measure counts answer a to request r, of the measured load (after the
// warmup), with its latency us in microseconds.
func (t *Tally) measure(p *Plan, r request, a answer, us int64) {
	pt := &t.Products[r.product]
	pt.Requests++
	if a.out.success() {
		pt.Created++
	}
	t.counts[a.out]++
	if t.hists[a.out] == nil {
		t.hists[a.out] = latency.New(latency.RunSigFigs)
	}
	_ = t.hists[a.out].RecordValue(us) // us is within the histogram's range
	t.maxSendDelay = max(t.maxSendDelay, r.delay)
	if a.code != "" {
		t.codes[a.code]++
	}
	if p.Open {
		st := &t.steps[r.phase]
		st.counts[a.out]++
		if st.hist == nil {
			st.hist = latency.New(latency.RunSigFigs)
		}
		_ = st.hist.RecordValue(us)
	}
}
