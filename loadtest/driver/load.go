package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
)

// Outcomes: the keys of Result.Outcomes. Every answer counts under exactly
// one of them.
const (
	OutcomeCreated       = "created"        // 201: a purchase made an order
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

type outcome int

const (
	outCreated outcome = iota
	outOK
	outSoldOut
	outLimit
	outLockTimeout
	outLockLost
	out4xx
	out5xx
	outTransport
	outOther
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	OutcomeCreated, OutcomeOK, OutcomeSoldOut, OutcomeLimitExceeded, OutcomeLockTimeout,
	OutcomeLockLost, OutcomeOther4xx, Outcome5xx, OutcomeTransport, OutcomeOther,
}

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

// plan is one run of the load at the targets.
type plan struct {
	timeout  time.Duration // longest wait for an answer once a request is sent
	bases    []string      // base URL per instance
	targets  []string      // full URL per instance
	purchase bool          // POST a purchase; else GET
	// The body of purchase i is head + i + mid + i + tail.
	head, mid, tail []byte
	phases          []phase
	open            bool
	// requests is the closed loop's measured request count; 0: it runs
	// its measured phase's length.
	requests int
	workers  int
	progress io.Writer
	label    string
	// stock and quantity let the progress show the stock left; stock < 0:
	// unknown.
	stock, quantity int64
	// captureStrategy asks for the strategy named by the first 201.
	captureStrategy bool
	// history, when not nil, records every purchase (-history).
	history *recorder
	// productIDs are the products on sale (none in the raw mode); draw,
	// when not nil, picks each request's (else the first's), and
	// productURLs[k][j] is the URL of a purchase of product j at
	// instance k.
	productIDs  []int64
	draw        *draw
	productURLs [][]string
	// authorization, when not empty, is every request's Authorization
	// header: the admin token, which the override's parameters need.
	authorization string
	// sources are the local addresses the load's connections come from
	// (-clients); empty: the system's choice.
	sources []net.IP
}

// products is the number of products the plan counts apart (1 in the
// raw mode).
func (p *plan) products() int { return max(1, len(p.productIDs)) }

// warmup is the length of the plan's warmup, 0 for none.
func (p *plan) warmup() time.Duration {
	if p.phases[0].warm {
		return p.phases[0].length
	}
	return 0
}

// length is the planned length of the load; 0 when it runs a request
// count.
func (p *plan) length() time.Duration {
	last := p.phases[len(p.phases)-1]
	if !p.open && p.requests > 0 {
		return 0
	}
	return last.start + last.length
}

// scheduled is the open loop's number of requests, warmup included.
func (p *plan) scheduled() int {
	last := p.phases[len(p.phases)-1]
	return last.first + last.n
}

// phaseOf returns the phase of the open loop's request i and its intended
// send time since the load's start.
func (p *plan) phaseOf(i int) (int, time.Duration) {
	k := len(p.phases) - 1
	for k > 0 && i < p.phases[k].first {
		k--
	}
	ph := p.phases[k]
	return k, ph.start + time.Duration(float64(i-ph.first)*float64(time.Second)/ph.rate)
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
	lastCreated          time.Duration // warmup included; -1: none
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

func (t *tally) total() int64 {
	var n int64
	for _, c := range t.counts {
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

// answer is what one request came back with.
type answer struct {
	out      outcome
	code     string // status and error code, for other_4xx, 5xx and other
	sample   string // transport error
	override bool   // 403 strategy_override_disabled
	strategy string // of the captured 201
	// status and errCode are the answer's HTTP status (0: none came) and
	// error code, for the history.
	status  int
	errCode string
}

// request is one request of the load as a worker sees it.
type request struct {
	i        int           // its index: the body's and the target's
	product  int           // the product it buys: p.draw.pick(i)
	phase    int           // open loop: its phase
	warm     bool          // of the warmup
	intended time.Duration // since the load's start
	delay    time.Duration // open loop: how late it left
}

// run executes p and returns what it measured. It stops early when ctx
// ends or an instance answers 403 strategy_override_disabled.
func (p *plan) run(ctx context.Context) *tally {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := max(1, p.workers)
	switch {
	case p.open:
		workers = min(workers, p.scheduled())
	case p.requests > 0 && p.warmup() == 0:
		workers = min(workers, p.requests)
	}
	ser := &timeline{secs: map[int]*secAgg{}}
	shards := make([]shard, min(workers, 4*runtime.GOMAXPROCS(0)))
	for i := range shards {
		shards[i].t = newTally(len(p.targets), len(p.phases), p.products())
		shards[i].series = ser
	}
	var (
		next, measured atomic.Int64
		captured       atomic.Bool
		counts         live
		wg             sync.WaitGroup
	)
	if !p.captureStrategy {
		captured.Store(true)
	}
	lc, err := newLoadClient(ctx, p.targets, workers, p.timeout, p.sources)
	if err != nil {
		panic(err) // the targets were checked by Config
	}
	defer lc.close()
	// fasthttp knows no context: when ctx ends (Ctrl-C, or an instance
	// refused the override), closing the connections ends the requests in
	// flight at once, as net/http would have.
	stopClose := context.AfterFunc(ctx, lc.close)
	defer stopClose()
	warmup := p.warmup()
	start := time.Now()
	stopWatch := p.watch(start, shards, &counts)
	// next claims the next request; ok false: the worker is done.
	claim := func(timer **time.Timer) (r request, ok bool) {
		if !p.open {
			since := time.Since(start)
			switch {
			case since < warmup:
				r.warm = true
			case p.requests > 0:
				if measured.Add(1) > int64(p.requests) {
					return r, false
				}
			case since >= p.length():
				return r, false
			}
			r.i, r.intended = int(next.Add(1)-1), since
			return r, true
		}
		for {
			r.i = int(next.Add(1) - 1)
			if r.i >= p.scheduled() {
				return r, false
			}
			r.phase, r.intended = p.phaseOf(r.i)
			ph := p.phases[r.phase]
			r.warm = ph.warm
			wait := r.intended - time.Since(start)
			if wait > 0 {
				if *timer == nil {
					*timer = time.NewTimer(wait)
				} else {
					(*timer).Reset(wait)
				}
				select {
				case <-(*timer).C:
				case <-ctx.Done():
					return r, false
				}
				return r, true
			}
			r.delay = -wait
			if r.delay <= max(time.Millisecond, time.Duration(float64(time.Second)/ph.rate)) {
				return r, true
			}
			sh := &shards[r.i%len(shards)]
			sh.mu.Lock()
			if r.warm {
				sh.t.warmDropped++
			} else {
				sh.t.dropped++
				sh.t.steps[r.phase].dropped++
			}
			sh.second(secondOf(r.intended, warmup)).dropped++
			sh.mu.Unlock()
			counts.dropped.Add(1)
		}
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sh := &shards[w%len(shards)]
			wk := newWorker(p, lc)
			defer wk.release()
			var timer *time.Timer
			for {
				r, ok := claim(&timer)
				if !ok || ctx.Err() != nil {
					return
				}
				r.product = p.draw.pick(r.i)
				sent := time.Now()
				a := wk.do(ctx, r.i, r.product, &captured)
				since := time.Since(start)
				if a.out == outTransport && ctx.Err() != nil {
					return // cancelled, not an answer
				}
				if p.history != nil {
					p.history.purchase(r.i, p.productIDs[r.product], p.quantity, sent, time.Now(), a, wk.resp.Body())
				}
				if a.override {
					cancel()
				}
				sh.record(p, r, a, since, warmup)
				counts.counts[a.out].Add(1)
				if r.warm {
					counts.warm.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	end := time.Since(start)
	stopWatch()
	total := newTally(len(p.targets), len(p.phases), p.products())
	for i := range shards {
		shards[i].handOver(math.MaxInt)
		total.merge(shards[i].t)
	}
	total.elapsed = max(0, end-warmup)
	total.series = ser.finish()
	return total
}

// record counts answer a to request r, answered at since.
func (sh *shard) record(p *plan, r request, a answer, since, warmup time.Duration) {
	us := max(1, min((since-r.intended).Microseconds(), histMax))
	sec := secondOf(since, warmup)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.t
	pt := &t.products[r.product]
	if r.warm {
		t.warm[a.out]++
		pt.warmRequests++
		if a.out == outCreated {
			pt.warmCreated++
		}
	} else {
		pt.requests++
		if a.out == outCreated {
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
	k := r.i % len(p.targets)
	t.targets[k].answers++
	switch a.out {
	case outCreated:
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

// worker sends one request at a time. Its requests (one per target, their
// URI, method and headers set once) and its response are reused from one
// request to the next; nothing of a response is kept past the next one.
type worker struct {
	plan *plan
	lc   *loadClient
	reqs []*fasthttp.Request
	resp *fasthttp.Response
	body []byte // the purchase being built
}

func newWorker(p *plan, lc *loadClient) *worker {
	w := &worker{plan: p, lc: lc, reqs: make([]*fasthttp.Request, len(p.targets)), resp: fasthttp.AcquireResponse()}
	for i, u := range p.targets {
		req := fasthttp.AcquireRequest()
		req.SetRequestURI(u)
		if p.purchase {
			req.Header.SetMethod(fasthttp.MethodPost)
			req.Header.SetContentTypeBytes(jsonContentType)
			if p.authorization != "" {
				req.Header.Set("Authorization", p.authorization)
			}
		} else {
			req.Header.SetMethod(fasthttp.MethodGet)
		}
		w.reqs[i] = req
	}
	if p.purchase {
		w.body = make([]byte, 0, len(p.head)+len(p.mid)+len(p.tail)+40)
	}
	return w
}

// release hands the worker's request and response back to fasthttp's
// pools; the worker must not be used afterwards.
func (w *worker) release() {
	for _, req := range w.reqs {
		fasthttp.ReleaseRequest(req)
	}
	fasthttp.ReleaseResponse(w.resp)
	w.reqs, w.resp = nil, nil
}

// Of an error answer's body, the part searched for the code.
const errorBodyPeek = 512

func (w *worker) do(ctx context.Context, i, product int, captured *atomic.Bool) answer {
	p := w.plan
	k := i % len(p.targets)
	req, resp := w.reqs[k], w.resp
	if p.productURLs != nil {
		req.SetRequestURI(p.productURLs[k][product])
	}
	if p.purchase {
		body := append(w.body[:0], p.head...)
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, p.mid...)
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, p.tail...)
		w.body = body
		req.SetBody(body) // copies into the request's own buffer
	}
	var err error
	deadline, ok := ctx.Deadline()
	if ok {
		err = w.lc.hosts[k].DoDeadline(req, resp, deadline)
	} else {
		err = w.lc.hosts[k].Do(req, resp)
	}
	if err != nil {
		if ok && !time.Now().Before(deadline) {
			// ctx's deadline cut the request short: wait for ctx to say so,
			// so that the run does not count it (net/http ends such a
			// request from ctx.Done, after ctx.Err is set).
			<-ctx.Done()
		}
		return answer{out: outTransport, sample: transportMessage(err, p.purchase, p.targets[k])}
	}
	// body belongs to resp: it is only read here, and what is kept of it
	// (the code, the strategy) is copied into strings.
	body := resp.Body()
	a := answer{status: resp.StatusCode()}
	switch s := a.status; {
	case s == http.StatusCreated && p.purchase:
		a.out = outCreated
		if !captured.Load() && captured.CompareAndSwap(false, true) {
			var o struct{ Strategy string }
			if json.NewDecoder(bytes.NewReader(body[:min(len(body), 1<<16)])).Decode(&o) == nil {
				a.strategy = o.Strategy
			}
		}
	case s/100 == 2 && !p.purchase:
		a.out = outOK
	case s == http.StatusConflict, s == http.StatusServiceUnavailable, s/100 == 4, s/100 == 5:
		code := errorCode(body[:min(len(body), errorBodyPeek)])
		if p.history != nil {
			a.errCode = string(code)
		}
		switch {
		case s == http.StatusConflict && bytes.Equal(code, codeSoldOut):
			a.out = outSoldOut
		case s == http.StatusConflict && bytes.Equal(code, codeLimitExceeded):
			a.out = outLimit
		case s == http.StatusServiceUnavailable && bytes.Equal(code, codeLockTimeout):
			a.out = outLockTimeout
		case s == http.StatusServiceUnavailable && bytes.Equal(code, codeLockLost):
			a.out = outLockLost
		case s/100 == 4:
			a.out = out4xx
			a.override = s == http.StatusForbidden && bytes.Equal(code, codeOverrideDisabled)
		default:
			a.out = out5xx
		}
		if a.out == out4xx || a.out == out5xx {
			a.code = strconv.Itoa(s)
			if len(code) > 0 {
				a.code += " " + string(code)
			}
		}
	default:
		a.out = outOther
		a.code = strconv.Itoa(s)
	}
	return a
}

var (
	jsonContentType      = []byte("application/json")
	codeSoldOut          = []byte("sold_out")
	codeLimitExceeded    = []byte("limit_exceeded")
	codeLockTimeout      = []byte("lock_timeout")
	codeLockLost         = []byte("lock_lost")
	codeOverrideDisabled = []byte("strategy_override_disabled")
	codeKey              = []byte(`"code"`)
)

// errorCode finds the code of the contract's error body
// {"error": {"code": "...", ...}} without decoding the whole body.
func errorCode(body []byte) []byte {
	i := bytes.Index(body, codeKey)
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(body[i+len(codeKey):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return nil
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return nil
	}
	rest = rest[1:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil
	}
	return rest[:end]
}

// transportMessage shortens a client error to what went wrong: a network
// error as it is, any other one after its request, as net/http words it.
func transportMessage(err error, post bool, target string) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	msg := err.Error()
	switch {
	case errors.Is(err, fasthttp.ErrTimeout):
		msg = "timeout awaiting the answer"
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF):
		msg = "the server closed the connection before answering"
	}
	method := "Get"
	if post {
		method = "Post"
	}
	return method + " " + strconv.Quote(target) + ": " + msg
}

// Of the load's connections.
const (
	dialTimeout = 5 * time.Second
	keepAlive   = 30 * time.Second
	idleTimeout = 90 * time.Second
)

// loadClient sends the load: a fasthttp.HostClient per instance, whose
// pool holds a connection per worker, that never goes through a proxy and
// never asks for gzip. It opens every connection itself, so that close can
// end them all, the busy ones included.
type loadClient struct {
	ctx   context.Context
	hosts []*fasthttp.HostClient // per target; targets on one host share one
	// sources, when not empty, are the local addresses new connections
	// are made from, in turn (-clients): each looks like a client of its
	// own to a per-IP limit.
	sources []net.IP
	dials   atomic.Int64
	mu      sync.Mutex
	open    map[*loadConn]struct{}
	closed  bool
}

// errLoadClosed is what a dial after close returns.
var errLoadClosed = errors.New("the run is over")

func newLoadClient(ctx context.Context, targets []string, workers int, timeout time.Duration, sources []net.IP) (*loadClient, error) {
	lc := &loadClient{ctx: ctx, hosts: make([]*fasthttp.HostClient, len(targets)), open: map[*loadConn]struct{}{},
		sources: sources}
	byHost := map[string]*fasthttp.HostClient{}
	for i, t := range targets {
		u, err := url.Parse(t)
		if err != nil {
			return nil, err
		}
		tls := u.Scheme == "https"
		addr := fasthttp.AddMissingPort(u.Host, tls)
		key := u.Scheme + "://" + addr
		hc := byHost[key]
		if hc == nil {
			hc = &fasthttp.HostClient{
				Addr:                   addr,
				IsTLS:                  tls,
				DialTimeout:            lc.dial,
				MaxConns:               workers + 4,
				MaxIdleConnDuration:    idleTimeout,
				ReadTimeout:            timeout, // from the request's end to the answer's
				DisablePathNormalizing: true,    // send the path as given
				RetryIfErr:             retryIfErr,
			}
			byHost[key] = hc
		}
		lc.hosts[i] = hc
	}
	return lc, nil
}

// retryIfErr sends a GET again (never a purchase, which may have been
// served) when its connection was closed before any byte of an answer, as
// net/http does when a kept-alive connection turns out to be closed. A
// timeout, or any other error, is counted at once.
func retryIfErr(req *fasthttp.Request, _ int, err error) (resetTimeout, retry bool) {
	return false, req.Header.IsGet() && (errors.Is(err, io.EOF) || errors.Is(err, fasthttp.ErrConnectionClosed))
}

// dial opens a connection of the load; it gives up when the run's context
// ends.
func (lc *loadClient) dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	if n := len(lc.sources); n > 0 {
		d.LocalAddr = &net.TCPAddr{IP: lc.sources[int(lc.dials.Add(1)-1)%n]}
	}
	if timeout > 0 && timeout < d.Timeout {
		d.Timeout = timeout
	}
	conn, err := d.DialContext(lc.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &loadConn{Conn: conn, lc: lc}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		conn.Close()
		return nil, errLoadClosed
	}
	lc.open[c] = struct{}{}
	return c, nil
}

// close closes every connection of the load, idle or busy: a request in
// flight fails at once. It may be called more than once.
func (lc *loadClient) close() {
	lc.mu.Lock()
	if lc.closed {
		lc.mu.Unlock()
		return
	}
	lc.closed = true
	open := lc.open
	lc.open = nil
	lc.mu.Unlock()
	for c := range open {
		_ = c.Conn.Close() // closing is all that is asked of it
	}
	for _, hc := range lc.hosts {
		hc.CloseIdleConnections()
	}
}

// loadConn is a connection of the load; it leaves the set of open ones
// when fasthttp closes it.
type loadConn struct {
	net.Conn
	lc *loadClient
}

func (c *loadConn) Close() error {
	c.lc.mu.Lock()
	delete(c.lc.open, c)
	c.lc.mu.Unlock()
	return c.Conn.Close()
}
