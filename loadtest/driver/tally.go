package driver

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, from 1µs to histMax: with three
// significant digits in the figures of a run, with two in those of one
// second.
const (
	histMax     = int64(10 * time.Minute / time.Microsecond)
	histSigFigs = 3
	secSigFigs  = 2
	maxSamples  = 5 // transport error messages kept per run
	// ringSize is the number of seconds a shard keeps before the watcher
	// moves them to the series; the watcher moves a second 2 s after it.
	ringSize = 8
	// tick is how often the watcher moves seconds and draws the progress.
	tick = 100 * time.Millisecond
)

func newHist(sigFigs int) *hdrhistogram.Histogram {
	return hdrhistogram.New(1, histMax, sigFigs)
}

// tally is what a run measured. Times are since the load's start.
type tally struct {
	counts [numOutcomes]int64                   // measured answers
	hists  [numOutcomes]*hdrhistogram.Histogram // their latency; nil: none
	warm   [numOutcomes]int64                   // answers of the warmup
	// dropped and warmDropped count the open loop's requests that could
	// not be sent on time.
	dropped, warmDropped int64
	firstSoldOut         time.Duration // -1: none
	lastCreated          time.Duration // of the last success (201 or 202), warmup included; -1: none
	maxSendDelay         time.Duration // open loop: the latest a request left after its intended time
	codes                map[string]int64
	samples              []string
	targets              []targetTally  // per target
	steps                []stepTally    // per phase, open loop only
	products             []productTally // per product
	// overrideDisabled is the URL of an instance that answered 403
	// strategy_override_disabled.
	overrideDisabled string
	orderStrategy    string
	// Set by run on the merged tally: the measured phase's length (from
	// its start to the end of the load) and the per-second series.
	elapsed time.Duration
	series  []secAgg
}

type targetTally struct {
	answers, transport int64
}

type stepTally struct {
	counts  [numOutcomes]int64
	dropped int64
	hist    *hdrhistogram.Histogram
}

func newTally(targets, phases, products int) *tally {
	return &tally{
		firstSoldOut: -1,
		lastCreated:  -1,
		codes:        map[string]int64{},
		targets:      make([]targetTally, targets),
		steps:        make([]stepTally, phases),
		products:     make([]productTally, products),
	}
}

func mergeHist(dst **hdrhistogram.Histogram, src *hdrhistogram.Histogram, sigFigs int) {
	if src == nil {
		return
	}
	if *dst == nil {
		*dst = newHist(sigFigs)
	}
	(*dst).Merge(src)
}

func (t *tally) merge(o *tally) {
	for i := range t.counts {
		t.counts[i] += o.counts[i]
		t.warm[i] += o.warm[i]
		mergeHist(&t.hists[i], o.hists[i], histSigFigs)
	}
	t.dropped += o.dropped
	t.warmDropped += o.warmDropped
	if o.firstSoldOut >= 0 && (t.firstSoldOut < 0 || o.firstSoldOut < t.firstSoldOut) {
		t.firstSoldOut = o.firstSoldOut
	}
	t.lastCreated = max(t.lastCreated, o.lastCreated)
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
	for i, pt := range o.products {
		q := &t.products[i]
		q.requests += pt.requests
		q.created += pt.created
		q.warmRequests += pt.warmRequests
		q.warmCreated += pt.warmCreated
		q.unknown += pt.unknown
	}
	for i := range t.steps {
		for j := range t.steps[i].counts {
			t.steps[i].counts[j] += o.steps[i].counts[j]
		}
		t.steps[i].dropped += o.steps[i].dropped
		mergeHist(&t.steps[i].hist, o.steps[i].hist, histSigFigs)
	}
	if t.overrideDisabled == "" {
		t.overrideDisabled = o.overrideDisabled
	}
	if t.orderStrategy == "" {
		t.orderStrategy = o.orderStrategy
	}
}

// promised counts the 202s, the warmup's included.
func (t *tally) promised() int64 { return t.counts[outAccepted] + t.warm[outAccepted] }

// total counts the measured answers.
func (t *tally) total() int64 {
	var n int64
	for _, c := range t.counts {
		n += c
	}
	return n
}

// withWarmup counts every answer, the warmup's included.
func (t *tally) withWarmup() int64 {
	n := t.total()
	for _, c := range t.warm {
		n += c
	}
	return n
}

// all merges the latency of every outcome.
func (t *tally) all() *hdrhistogram.Histogram {
	var h *hdrhistogram.Histogram
	for _, o := range t.hists {
		mergeHist(&h, o, histSigFigs)
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
	mergeHist(&s.hist, o.hist, secSigFigs)
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
	t      *tally
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
			hist = newHist(secSigFigs)
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
func (sh *shard) record(p *plan, r request, a answer, since, warmup time.Duration) {
	us := max(1, min((since-r.intended).Microseconds(), histMax))
	sec := secondOf(since, warmup)
	if r.warm {
		// Sent in the warmup, answered after it: the warmup's, in the
		// seconds (the CSV) as in the table, in its last second.
		sec = min(sec, -1)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.t
	pt := &t.products[r.product]
	if a.code == codeOutcomeUnknown {
		pt.unknown++
	}
	if r.warm {
		t.warm[a.out]++
		pt.warmRequests++
		if a.out.success() {
			pt.warmCreated++
		}
	} else {
		t.measure(p, r, a, us)
	}
	k := r.i % len(p.targets)
	t.targets[k].answers++
	switch a.out {
	case outCreated, outAccepted:
		t.lastCreated = max(t.lastCreated, since)
	case outSoldOut:
		if t.firstSoldOut < 0 || since < t.firstSoldOut {
			t.firstSoldOut = since
		}
	case outTransport:
		t.targets[k].transport++
		if len(t.samples) < maxSamples {
			t.samples = append(t.samples, a.sample)
		}
	}
	if a.override && t.overrideDisabled == "" {
		t.overrideDisabled = p.targets[k]
	}
	if a.strategy != "" {
		t.orderStrategy = a.strategy
	}
	s := sh.second(sec)
	s.counts[a.out]++
	_ = s.hist.RecordValue(us)
}

// measure counts answer a to request r, of the measured load (after the
// warmup), with its latency us in microseconds.
func (t *tally) measure(p *plan, r request, a answer, us int64) {
	pt := &t.products[r.product]
	pt.requests++
	if a.out.success() {
		pt.created++
	}
	t.counts[a.out]++
	if t.hists[a.out] == nil {
		t.hists[a.out] = newHist(histSigFigs)
	}
	_ = t.hists[a.out].RecordValue(us) // us is within the histogram's range
	t.maxSendDelay = max(t.maxSendDelay, r.delay)
	if a.code != "" {
		t.codes[a.code]++
	}
	if p.open {
		st := &t.steps[r.phase]
		st.counts[a.out]++
		if st.hist == nil {
			st.hist = newHist(histSigFigs)
		}
		_ = st.hist.RecordValue(us)
	}
}
