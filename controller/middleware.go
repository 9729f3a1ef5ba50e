package controller

import (
	"context"
	"crypto/rand"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/service/failure"
)

// The middleware every request passes, in order: its ID (requestID),
// recovery from a panic, the request metrics and the access log; and the
// log's handler that carries a request's attributes into every line logged
// with its context.

// LogHandler wraps h so that a record logged with a context carries, after
// its own attributes, those of the context's request and then those put in
// the context by WithLogAttrs. A request's are its ID (request_id) and, for
// a purchase, product, user, strategy and, when the body has one,
// purchase_request_id: whatever is logged with the request's context, by
// the router, a handler or the service, carries them.
func LogHandler(h slog.Handler) slog.Handler { return contextHandler{h} }

type contextHandler struct{ slog.Handler }

type logAttrsKey struct{}

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if rl, ok := ctx.Value(requestLogKey{}).(*requestLog); ok {
		var buf [5]slog.Attr
		r.AddAttrs(rl.appendAttrs(buf[:0])...)
	}
	if attrs, ok := ctx.Value(logAttrsKey{}).([]slog.Attr); ok {
		r.AddAttrs(attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

// WithLogAttrs returns a context that carries attrs, after those ctx
// carries already, for a logger whose handler is a LogHandler.
func WithLogAttrs(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(logAttrsKey{}).([]slog.Attr)
	return context.WithValue(ctx, logAttrsKey{}, append(slices.Clip(prev), attrs...))
}

// addLogAttrs puts attrs in the request's context (WithLogAttrs).
func addLogAttrs(c *gin.Context, attrs ...slog.Attr) {
	c.Request = c.Request.WithContext(WithLogAttrs(c.Request.Context(), attrs...))
}

// RequestIDHeader carries a request's ID, both ways.
const RequestIDHeader = "X-Request-ID"

// requestID gives every request an ID: the one its X-Request-ID header
// carries when it is 1 to 128 printable ASCII characters without spaces,
// else a random one. The ID is echoed in the answer's X-Request-ID and put
// in the request's context for the log (request_id), in the request's
// requestLog.
func requestID() gin.HandlerFunc {
	// The headers are read and written under the canonical key, as
	// Header.Get and Header.Set would, without canonicalizing it again (and
	// allocating a copy) for every request.
	key := http.CanonicalHeaderKey(RequestIDHeader)
	return func(c *gin.Context) {
		var id string
		if v := c.Request.Header[key]; len(v) > 0 {
			id = v[0]
		}
		if !validRequestID(id) {
			id = rand.Text()
		}
		rl := &requestLog{id: id}
		rl.header[0] = id
		c.Writer.Header()[key] = rl.header[:]
		c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), requestLogKey{}, rl))
		c.Next()
	}
}

// requestLog is what the log knows of one request: its ID and, once its
// handler has read it, its purchase. requestID puts one in every request's
// context, and the purchase is written into it rather than into a context
// of its own; LogHandler makes attributes of it only for a line it writes.
// So a request none of whose lines is written (the access log's sampler
// drops most) builds no attribute and no context for the log but this.
type requestLog struct {
	id string
	// header is the answer's X-Request-ID value, kept here so that the
	// request's one allocation serves both.
	header [1]string
	// purchase is written once, by the handler that claimed it, before
	// purchaseSet is set; it is read only once purchaseSet is, so that a
	// line logged meanwhile, from any goroutine, never reads it half
	// written.
	purchase                     purchaseLog
	purchaseClaimed, purchaseSet atomic.Bool
}

type requestLogKey struct{}

// purchaseLog is what the log says of a purchase.
type purchaseLog struct {
	product                   int64
	user, strategy, requestID string
}

// appendAttrs appends the attributes of the request to dst: request_id,
// then the purchase's product, user, strategy and purchase_request_id (when
// the body has one).
func (rl *requestLog) appendAttrs(dst []slog.Attr) []slog.Attr {
	dst = append(dst, slog.String("request_id", rl.id))
	if !rl.purchaseSet.Load() {
		return dst
	}
	return rl.purchase.appendAttrs(dst)
}

// appendAttrs appends the purchase's attributes to dst: product, user,
// strategy and purchase_request_id (when the body has one).
func (p *purchaseLog) appendAttrs(dst []slog.Attr) []slog.Attr {
	dst = append(dst, slog.Int64("product", p.product), slog.String("user", p.user), slog.String("strategy", p.strategy))
	if p.requestID != "" {
		dst = append(dst, slog.String("purchase_request_id", p.requestID))
	}
	return dst
}

// setPurchaseLog makes p the purchase of the request's log: every line
// logged with the request's context from now on names it. The request's
// requestLog takes it when it has not one already; else (a router without
// requestID, or a second purchase) it goes in a context of its own.
func setPurchaseLog(c *gin.Context, p purchaseLog) {
	rl, ok := c.Request.Context().Value(requestLogKey{}).(*requestLog)
	if ok && rl.purchaseClaimed.CompareAndSwap(false, true) {
		rl.purchase = p
		rl.purchaseSet.Store(true)
		return
	}
	addLogAttrs(c, p.appendAttrs(nil)...)
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// isProbe tells the routes that health checks and Prometheus call every
// few seconds: their access log is at debug level, the rest at info.
func isProbe(route string) bool {
	switch route {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return false
}

// The access log's sampling, per second and per route and status, as zap's
// sampler does: the first sampleFirst lines are logged, then one in
// sampleThereafter, which carries sampled=sampleThereafter (it stands for
// that many). Every 5xx and every request slower than slowRequest is logged.
const (
	sampleFirst      = 100
	sampleThereafter = 100
	slowRequest      = 500 * time.Millisecond
)

// logSampler counts the access log's lines of the current second, per
// route and status. Routes are the router's (or "unmatched"), so the
// counts stay few.
type logSampler struct {
	mu     sync.Mutex
	second int64
	counts map[routeStatus]int
}

// sample counts one line of route and status at now and says whether it
// is logged, and whether as one that stands for sampleThereafter.
func (s *logSampler) sample(now time.Time, route string, status int) (logged, sampled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec := now.Unix(); sec != s.second || s.counts == nil {
		s.second = sec
		clear(s.counts)
		if s.counts == nil {
			s.counts = make(map[routeStatus]int)
		}
	}
	key := routeStatus{route, status}
	n := s.counts[key] + 1
	s.counts[key] = n
	switch {
	case n <= sampleFirst:
		return true, false
	case (n-sampleFirst)%sampleThereafter == 0:
		return true, true
	}
	return false, false
}

// accessLog logs requests once they are answered, with their method,
// route, path, status, size and latency, and whatever their context
// carries (the request ID; product, user, strategy and purchase_request_id
// for a purchase), sampled by logSampler: 5xx and requests slower than
// slowRequest always. now is the clock of the latency and the sampler's
// seconds. Requests other than the probes count as in flight in drain
// while they are served.
func accessLog(log *slog.Logger, drain *Drain, now func() time.Time) gin.HandlerFunc {
	sampler := &logSampler{}
	return func(c *gin.Context) {
		start := now()
		route := c.FullPath()
		level := slog.LevelInfo
		if isProbe(route) {
			level = slog.LevelDebug
		} else {
			drain.inFlight.Add(1)
			defer drain.inFlight.Add(-1)
		}
		c.Next()
		ctx := c.Request.Context()
		if !log.Enabled(ctx, level) {
			return
		}
		if route == "" {
			route = "unmatched"
		}
		end := now()
		latency, status := end.Sub(start), c.Writer.Status()
		logged, sampled := true, false
		if status < 500 && latency <= slowRequest {
			logged, sampled = sampler.sample(end, route, status)
		}
		if !logged {
			return
		}
		attrs := [...]slog.Attr{
			slog.String("method", c.Request.Method),
			slog.String("route", route),
			slog.String("path", c.Request.URL.Path),
			slog.Int("status", status),
			slog.Int("bytes", max(c.Writer.Size(), 0)),
			slog.Duration("latency", latency),
			slog.Int("sampled", sampleThereafter),
		}
		n := len(attrs)
		if !sampled {
			n--
		}
		log.LogAttrs(ctx, level, "request", attrs[:n]...)
	}
}

// Drain is an instance's shutdown as the router sees it: once started,
// /readyz answers 503; until then and after, it counts the requests in
// flight, the probes aside. The zero value is ready to use.
type Drain struct {
	started  atomic.Bool
	inFlight atomic.Int64
}

// Start marks the drain as begun.
func (d *Drain) Start() { d.started.Store(true) }

// Started reports whether the drain has begun.
func (d *Drain) Started() bool { return d.started.Load() }

// InFlight is the number of requests being served, the probes aside.
func (d *Drain) InFlight() int64 { return d.inFlight.Load() }

// recovery turns a panic into the contract's 500 body and logs it.
func recovery(log *slog.Logger) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, v any) {
		log.ErrorContext(c.Request.Context(), "panic", "path", c.Request.URL.Path, "panic", v)
		c.AbortWithStatusJSON(http.StatusInternalServerError,
			api.ErrorBody{Error: api.Error{Code: string(failure.CodeInternal), Message: "internal error"}})
	})
}

// requestMetrics counts requests by route and status.
func requestMetrics(reg prometheus.Registerer) gin.HandlerFunc {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_http_requests_total",
		Help: "HTTP requests by route and status code.",
	}, []string{"route", "code"})
	reg.MustRegister(requests)
	counters := &routeCounters{vec: requests}
	counters.m.Store(&map[routeStatus]prometheus.Counter{})
	return func(c *gin.Context) {
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		counters.get(route, c.Writer.Status()).Inc()
	}
}

// routeCounters keeps the counter of each route and status once looked up
// in vec: a lookup in the vector formats the status, hashes and checks the
// labels, and takes the vector's lock, which costs more than the count.
// The map is copied on write, so that a request reads it with one atomic
// load and writes nothing shared but its count; routes are the router's
// (or "unmatched") and statuses are few, so writes stop early and the map
// stays small.
type routeCounters struct {
	vec *prometheus.CounterVec
	mu  sync.Mutex // held to write m
	m   atomic.Pointer[map[routeStatus]prometheus.Counter]
}

// routeStatus is a route and an answer's status.
type routeStatus struct {
	route  string
	status int
}

func (rc *routeCounters) get(route string, status int) prometheus.Counter {
	key := routeStatus{route, status}
	if counter, ok := (*rc.m.Load())[key]; ok {
		return counter
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if counter, ok := (*rc.m.Load())[key]; ok { // added meanwhile
		return counter
	}
	m := maps.Clone(*rc.m.Load())
	m[key] = rc.vec.WithLabelValues(route, strconv.Itoa(status))
	rc.m.Store(&m)
	return m[key]
}
