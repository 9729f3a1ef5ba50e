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
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
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

// Latencies are recorded in microseconds, from 1µs to histMax.
const (
	histMax     = int64(10 * time.Minute / time.Microsecond)
	histSigFigs = 3
	maxSamples  = 5 // transport error messages kept per run
)

// plan is one run of the load: n requests at the targets.
type plan struct {
	timeout  time.Duration // longest wait for an answer once a request is sent
	targets  []string      // full URL per instance
	purchase bool          // POST a purchase; else GET
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
	lc, err := newLoadClient(ctx, p.targets, workers, p.timeout)
	if err != nil {
		panic(err) // the targets were checked by Config
	}
	defer lc.close()
	// fasthttp knows no context: when ctx ends (Ctrl-C, or an instance
	// refused the override), closing the connections ends the requests in
	// flight at once, as net/http would have.
	stopClose := context.AfterFunc(ctx, lc.close)
	defer stopClose()
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
			wk := newWorker(p, lc)
			defer wk.release()
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

func (w *worker) do(ctx context.Context, i int, captured *atomic.Bool) answer {
	p := w.plan
	k := i % len(p.targets)
	req, resp := w.reqs[k], w.resp
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
	var a answer
	switch s := resp.StatusCode(); {
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
	ctx    context.Context
	hosts  []*fasthttp.HostClient // per target; targets on one host share one
	mu     sync.Mutex
	open   map[*loadConn]struct{}
	closed bool
}

// errLoadClosed is what a dial after close returns.
var errLoadClosed = errors.New("the run is over")

func newLoadClient(ctx context.Context, targets []string, workers int, timeout time.Duration) (*loadClient, error) {
	lc := &loadClient{ctx: ctx, hosts: make([]*fasthttp.HostClient, len(targets)), open: map[*loadConn]struct{}{}}
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

// newClient returns the client of the bookkeeping calls (health, admin,
// strategies, audit): net/http, never through a proxy, never asking for
// gzip. The load itself goes through a loadClient.
func newClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}).DialContext,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       idleTimeout,
		ResponseHeaderTimeout: timeout,
		DisableCompression:    true,
	}}
}
