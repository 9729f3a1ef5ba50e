package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/controller"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/service"
)

// routed is the real router over a service of its own, on the test's own
// database and key prefix on the test Redis nodes, served in-process.
type routed struct {
	http.Handler
	svc   *service.Seckill
	token string
}

// newRouted wires a router as the program does (internal/app), with log
// and opts (AdminToken, Registerer, Gatherer and Strategy are filled in),
// over the stores of an instance as the harness opens them, env over its
// defaults. Everything is closed when tb ends.
func newRouted(tb testing.TB, log *slog.Logger, env map[string]string, opts controller.Options) *routed {
	tb.Helper()
	in := apptest.Open(tb, env)
	cfg, st, prefix := in.Config, in.Stores, in.KeyPrefix()
	releases := locker.NewReleases()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := releases.Subscribe(ctx, st.Redis, prefix+"lock:"); err != nil {
		tb.Fatalf("Releases.Subscribe: %v", err)
	}
	reg := prometheus.NewRegistry()
	svc := service.New(st.DB, app.NewLockers(config.Config{LockTTL: cfg.LockTTL, LockWait: cfg.LockWait}, st.Redis, releases),
		st.Redis, service.Config{
			Strategy:     cfg.Strategy,
			PerUserLimit: int64(cfg.PerUserLimit),
			Fencing:      cfg.Fencing,
			LockWait:     cfg.LockWait,
			KeyPrefix:    prefix,
			Batch:        cfg.Batch,
			LockTTL:      cfg.LockTTL,
			Watchdog:     cfg.Watchdog,
		}, service.NewMetrics(reg), log)
	tb.Cleanup(func() {
		svc.Close()
		if err := releases.Close(); err != nil {
			tb.Errorf("close releases: %v", err)
		}
	})
	opts.AdminToken = cfg.AdminToken
	opts.Registerer, opts.Gatherer = reg, reg
	opts.Strategy = cfg.Strategy
	return &routed{Handler: controller.NewRouter(svc, log, opts), svc: svc, token: cfg.AdminToken}
}

// product creates a product with stock units.
func (r *routed) product(tb testing.TB, stock int64) int64 {
	tb.Helper()
	p, err := r.svc.CreateProduct(context.Background(), testenv.RandomName("bench-"), stock)
	if err != nil {
		tb.Fatalf("CreateProduct: %v", err)
	}
	return p.ID
}

// exchange is one request and its answer, both reused from one request to
// the next so that what a benchmark counts is the router's own work.
type exchange struct {
	req    *http.Request
	body   bytes.Reader
	header http.Header
	status int
	out    bytes.Buffer
	// buf is the body of the next request, for the caller to fill.
	buf []byte
}

func newExchange(method, path string) *exchange {
	req, err := http.NewRequest(method, path, nil)
	if err != nil {
		panic(fmt.Sprintf("NewRequest(%s, %s): %v", method, path, err)) // a bug of the benchmark
	}
	req.RemoteAddr = "127.0.0.1:1234"
	req.Body = http.NoBody // as a server's request without one
	return &exchange{req: req, header: http.Header{}}
}

func (e *exchange) Header() http.Header { return e.header }

func (e *exchange) Write(b []byte) (int, error) {
	if e.status == 0 {
		e.status = http.StatusOK
	}
	return e.out.Write(b)
}

func (e *exchange) WriteHeader(status int) {
	if e.status == 0 {
		e.status = status
	}
}

// serve sends the request, with body if not nil, to h and returns the
// status; the answer's body is in e.out.
func (e *exchange) serve(h http.Handler, body []byte) int {
	clear(e.header)
	e.status = 0
	e.out.Reset()
	if body != nil {
		e.body.Reset(body)
		e.req.Body = io.NopCloser(&e.body)
		e.req.ContentLength = int64(len(body))
	}
	h.ServeHTTP(e, e.req)
	return e.status
}

// BenchmarkHandler measures the HTTP layer in-process, through the real
// router (request ID, metrics, the access log at info level into a text
// handler that discards, as the program's), with allocations: /healthz, a
// sold_out answer from the sold-out memory, and a purchase of one hot
// product under redlock with the default batch against the real MariaDB
// and Redis nodes, from about benchGoroutines concurrent buyers.
func BenchmarkHandler(b *testing.B) {
	r := newRouted(b, app.NewLogger(io.Discard, "text"), nil, controller.Options{})
	// Each goroutine sends its requests through an exchange of its own.
	parallel := func(b *testing.B, op func(e *exchange, n int64) error) {
		testenv.RunParallel(b, benchGoroutines, func() func(int64) error {
			e := newExchange(http.MethodGet, "/")
			return func(n int64) error { return op(e, n) }
		})
	}
	want := func(e *exchange, status int, what string) error {
		if e.status != status {
			return fmt.Errorf("%s = %d %s; want %d", what, e.status, e.out.Bytes(), status)
		}
		return nil
	}

	b.Run("healthz", func(b *testing.B) {
		parallel(b, func(e *exchange, _ int64) error {
			e.req.Method, e.req.URL.Path = http.MethodGet, "/healthz"
			e.serve(r, nil)
			return want(e, http.StatusOK, "GET /healthz")
		})
	})

	b.Run("sold_out", func(b *testing.B) {
		id := r.product(b, 0)
		path := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/purchase"
		// The first purchase reads the stock; from then on the memory answers.
		e := newExchange(http.MethodPost, path)
		if e.serve(r, []byte(`{"user_id":"u-0","quantity":1}`)); e.status != http.StatusConflict {
			b.Fatalf("POST %s = %d %s; want 409 sold_out", path, e.status, e.out.Bytes())
		}
		body := []byte(`{"user_id":"u-1","quantity":1}`)
		parallel(b, func(e *exchange, _ int64) error {
			e.req.Method, e.req.URL.Path = http.MethodPost, path
			e.serve(r, body)
			return want(e, http.StatusConflict, "POST "+path)
		})
	})

	b.Run("purchase", func(b *testing.B) {
		id := r.product(b, int64(b.N))
		path := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/purchase"
		parallel(b, func(e *exchange, n int64) error {
			e.req.Method, e.req.URL.Path = http.MethodPost, path
			e.buf = strconv.AppendInt(append(e.buf[:0], `{"user_id":"u-`...), n, 10)
			e.buf = append(e.buf, `","quantity":1}`...)
			e.serve(r, e.buf)
			return want(e, http.StatusCreated, "POST "+path)
		})
		b.StopTimer()
		a, err := r.svc.Audit(context.Background(), id)
		if err != nil || a.Stock != 0 || !a.Consistent {
			b.Errorf("Audit(%d) = %+v, %v; want stock 0, consistent", id, a, err)
		}
	})
}

// benchGoroutines is about how many clients RunParallel runs at once.
const benchGoroutines = 32
