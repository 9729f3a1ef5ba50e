package controller

import (
	"context"
	"crypto/rand"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

// LogHandler wraps h so that a record logged with a context carries the
// attributes put in that context by WithLogAttrs, after its own. The router
// puts the request ID there for every request, and product, user, strategy
// and, when the body has one, purchase_request_id for a purchase: whatever
// is logged with the request's context, by the router, a handler or the
// service, carries them.
func LogHandler(h slog.Handler) slog.Handler { return contextHandler{h} }

type contextHandler struct{ slog.Handler }

type logAttrsKey struct{}

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
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
// in the request's context for the log (request_id).
func requestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader(RequestIDHeader)
		if !validRequestID(id) {
			id = rand.Text()
		}
		c.Header(RequestIDHeader, id)
		addLogAttrs(c, slog.String("request_id", id))
		c.Next()
	}
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

// sampleKey is what the sampler counts apart.
type sampleKey struct {
	route  string
	status int
}

// logSampler counts the access log's lines of the current second, per
// route and status. Routes are the router's (or "unmatched"), so the
// counts stay few.
type logSampler struct {
	mu     sync.Mutex
	second int64
	counts map[sampleKey]int
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
			s.counts = make(map[sampleKey]int)
		}
	}
	key := sampleKey{route, status}
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
