package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
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

// Latencies are recorded in microseconds, from 1µs to histMax.
const (
	histMax     = int64(10 * time.Minute / time.Microsecond)
	histSigFigs = 3
	maxSamples  = 5 // transport error messages kept per run
)

// plan is one run of the load: n requests at the targets.
type plan struct {
	client   *http.Client
	targets  []string // full URL per instance
	purchase bool     // POST a purchase; else GET
	// The body of purchase i is head + i + mid + i + tail.
	head, mid, tail []byte
	n               int
	rate            float64 // > 0: open loop
	workers         int
	progress        io.Writer
	label           string
	// captureStrategy asks for the strategy named by the first 201.
	captureStrategy bool
}

// tally is what a run measured.
type tally struct {
	counts       [numOutcomes]int64
	hist         *hdrhistogram.Histogram
	elapsed      time.Duration
	firstSoldOut time.Duration // since the start; -1: none
	lastCreated  time.Duration // since the start; -1: none
	maxSendDelay time.Duration // open loop: the latest a request left after its intended time
	codes        map[string]int64
	samples      []string
	// overrideDisabled is the URL of an instance that answered 403
	// strategy_override_disabled.
	overrideDisabled string
	orderStrategy    string
}

func newTally() *tally {
	return &tally{
		hist:         hdrhistogram.New(1, histMax, histSigFigs),
		firstSoldOut: -1,
		lastCreated:  -1,
		codes:        map[string]int64{},
	}
}

func (t *tally) merge(o *tally) {
	for i := range t.counts {
		t.counts[i] += o.counts[i]
	}
	t.hist.Merge(o.hist)
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

// shard is a tally behind a lock; workers share a few of them, so that a
// thousand workers do not need a thousand histograms.
type shard struct {
	mu sync.Mutex
	t  *tally
	_  [64]byte // keep shards on cache lines of their own
}

// answer is what one request came back with.
type answer struct {
	out      outcome
	code     string // status and error code, for other_4xx, 5xx and other
	sample   string // transport error
	override bool   // 403 strategy_override_disabled
	strategy string // of the captured 201
}

// run executes p and returns what it measured. It stops early when ctx
// ends or an instance answers 403 strategy_override_disabled.
func (p *plan) run(ctx context.Context) *tally {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := max(1, min(p.workers, p.n))
	shards := make([]shard, min(workers, 4*runtime.GOMAXPROCS(0)))
	for i := range shards {
		shards[i].t = newTally()
	}
	var (
		next, done atomic.Int64
		captured   atomic.Bool
		wg         sync.WaitGroup
	)
	if !p.captureStrategy {
		captured.Store(true)
	}
	stopProgress := p.showProgress(&done)
	var interval float64
	if p.rate > 0 {
		interval = float64(time.Second) / p.rate
	}
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sh := &shards[w%len(shards)]
			wk := worker{plan: p, buf: make([]byte, 512)}
			if !p.purchase {
				wk.gets = make([]*http.Request, len(p.targets))
				for i, u := range p.targets {
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
					if err != nil {
						panic(err) // the targets were checked by Config
					}
					wk.gets[i] = req
				}
			}
			var timer *time.Timer
			for {
				i := int(next.Add(1) - 1)
				if i >= p.n || ctx.Err() != nil {
					return
				}
				intended := time.Now()
				var delay time.Duration
				if p.rate > 0 {
					intended = start.Add(time.Duration(float64(i) * interval))
					if wait := time.Until(intended); wait > 0 {
						if timer == nil {
							timer = time.NewTimer(wait)
						} else {
							timer.Reset(wait)
						}
						select {
						case <-timer.C:
						case <-ctx.Done():
							return
						}
					} else {
						delay = -wait
					}
				}
				a := wk.do(ctx, i, &captured)
				end := time.Now()
				if a.out == outTransport && ctx.Err() != nil {
					return // cancelled, not an answer
				}
				if a.override {
					cancel()
				}
				sh.mu.Lock()
				t := sh.t
				t.counts[a.out]++
				us := max(1, min(end.Sub(intended).Microseconds(), histMax))
				_ = t.hist.RecordValue(us) // us is within the histogram's range
				since := end.Sub(start)
				switch a.out {
				case outCreated:
					t.lastCreated = max(t.lastCreated, since)
				case outSoldOut:
					if t.firstSoldOut < 0 || since < t.firstSoldOut {
						t.firstSoldOut = since
					}
				case outTransport:
					if len(t.samples) < maxSamples {
						t.samples = append(t.samples, a.sample)
					}
				}
				if a.code != "" {
					t.codes[a.code]++
				}
				if a.override && t.overrideDisabled == "" {
					t.overrideDisabled = p.targets[i%len(p.targets)]
				}
				if a.strategy != "" {
					t.orderStrategy = a.strategy
				}
				t.maxSendDelay = max(t.maxSendDelay, delay)
				sh.mu.Unlock()
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	total := newTally()
	total.elapsed = time.Since(start)
	stopProgress()
	for i := range shards {
		total.merge(shards[i].t)
	}
	return total
}

// showProgress draws a progress bar of done out of p.n until the returned
// function is called. The workers only bump a counter; the bar is drawn
// from here, ten times a second.
func (p *plan) showProgress(done *atomic.Int64) (stop func()) {
	if p.progress == nil {
		return func() {}
	}
	bar := progressbar.NewOptions64(int64(p.n),
		progressbar.OptionSetWriter(p.progress),
		progressbar.OptionSetDescription(fmt.Sprintf("%-12s", p.label)),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("req"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.progress) }),
	)
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				_ = bar.Set64(done.Load()) // a progress bar that cannot draw is no reason to stop
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
		_ = bar.Set64(done.Load())
		if !bar.IsFinished() {
			_ = bar.Exit()
			fmt.Fprintln(p.progress)
		}
	}
}

// worker sends one request at a time.
type worker struct {
	plan *plan
	buf  []byte          // reads error bodies
	gets []*http.Request // raw mode: one request per target, reused
}

func (w *worker) do(ctx context.Context, i int, captured *atomic.Bool) answer {
	p := w.plan
	k := i % len(p.targets)
	var req *http.Request
	if p.purchase {
		body := make([]byte, 0, len(p.head)+len(p.mid)+len(p.tail)+40)
		body = append(body, p.head...)
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, p.mid...)
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, p.tail...)
		var err error
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, p.targets[k], bytes.NewReader(body))
		if err != nil {
			panic(err) // the targets were checked by Config
		}
		req.Header["Content-Type"] = jsonContentType
	} else {
		req = w.gets[k]
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return answer{out: outTransport, sample: transportMessage(err)}
	}
	defer resp.Body.Close()
	var a answer
	switch s := resp.StatusCode; {
	case s == http.StatusCreated && p.purchase:
		a.out = outCreated
		if !captured.Load() && captured.CompareAndSwap(false, true) {
			var o struct{ Strategy string }
			if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&o) == nil {
				a.strategy = o.Strategy
			}
		}
	case s/100 == 2 && !p.purchase:
		a.out = outOK
	case s == http.StatusConflict, s == http.StatusServiceUnavailable, s/100 == 4, s/100 == 5:
		n, _ := io.ReadFull(resp.Body, w.buf) // a short body is the usual case
		code := errorCode(w.buf[:n])
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
	drain(resp.Body, w.buf)
	return a
}

var (
	jsonContentType      = []string{"application/json"}
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

// drain reads what is left of a body (up to 1 MiB) so that its connection
// goes back to the pool; buf saves an allocation per request.
func drain(body io.Reader, buf []byte) {
	for left := 1 << 20; left > 0; {
		n, err := body.Read(buf)
		left -= n
		if err != nil {
			return // io.EOF, or a broken body that only costs its connection
		}
	}
}

// transportMessage shortens a client error to what went wrong.
func transportMessage(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	return err.Error()
}

// newClient returns a client whose pool keeps a connection per worker and
// instance, that never goes through a proxy and never asks for gzip.
func newClient(concurrency, instances int, timeout time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          concurrency*instances + 16,
		MaxIdleConnsPerHost:   concurrency + 4,
		MaxConnsPerHost:       concurrency + 4,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		DisableCompression:    true,
	}}
}
