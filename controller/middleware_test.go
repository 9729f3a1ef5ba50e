package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/controller"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestLogHandlerAddsContextAttrs: a record logged with a context carries
// the attributes put in it, in order, after its own; contexts made from the
// same parent do not see each other's; a logger without them is unchanged.
func TestLogHandlerAddsContextAttrs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(controller.LogHandler(slog.NewJSONHandler(&buf, nil))).With("svc", "seckill")
	parent := context.Background()
	for _, a := range []slog.Attr{slog.String("request_id", "r-1"), slog.Int("product", 7), slog.String("user", "u")} {
		// One at a time, so that the slice grows with room to spare.
		parent = controller.WithLogAttrs(parent, a)
	}
	a := controller.WithLogAttrs(parent, slog.String("strategy", "token"))
	b := controller.WithLogAttrs(parent, slog.String("strategy", "redlock"))

	record := func(ctx context.Context) map[string]any {
		t.Helper()
		buf.Reset()
		log.InfoContext(ctx, "m", "own", 1)
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("record %q: %v", buf.String(), err)
		}
		return rec
	}
	for _, tc := range []struct {
		ctx      context.Context
		strategy any
	}{{a, "token"}, {b, "redlock"}, {parent, nil}} {
		rec := record(tc.ctx)
		if rec["request_id"] != "r-1" || rec["product"] != float64(7) || rec["user"] != "u" || rec["strategy"] != tc.strategy ||
			rec["own"] != float64(1) || rec["svc"] != "seckill" {
			t.Errorf("record = %v; want request_id r-1, product 7, user u, strategy %v, own 1, svc seckill", rec, tc.strategy)
		}
	}
	if rec := record(context.Background()); len(rec) != 5 { // time, level, msg, svc, own
		t.Errorf("record without context attributes = %v; want only its own", rec)
	}
}

// records decodes every JSON line written so far whose msg is msg.
func records(t testing.TB, b *testenv.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range bytes.Lines(b.Bytes()) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// stepClock is a clock that moves only when told: by step at every
// reading, or to a time set.
type stepClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now
	c.now = c.now.Add(c.step)
	return now
}

func (c *stepClock) set(now time.Time, step time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.step = now, step
}

// TestLogSampler: through the real router, the access log keeps, per
// second and per route and status, the first 100 lines, then one in 100
// marked sampled=100; a 5xx and a request slower than 500 ms are always
// logged; a new second starts the count again.
func TestLogSampler(t *testing.T) {
	t.Parallel()
	var out testenv.Buffer
	log := slog.New(controller.LogHandler(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	clock := &stepClock{}
	drain := &controller.Drain{}
	r := newRouted(t, log, nil, controller.Options{Clock: clock.Now, Drain: drain})
	sampledTraffic(t, r, clock, drain)

	lines, sampled, slow := accessLogCounts(t, &out)
	for _, want := range []struct {
		key            accessLogKey
		lines, sampled int
	}{
		// 100 + the 200th (sampled) + the slow one, then 100 the next second.
		{accessLogKey{"/api/v1/strategies", 200}, 202, 1},
		{accessLogKey{"/api/v1/products/:id", 400}, 10, 0},
		{accessLogKey{"/api/v1/products/:id", 404}, 10, 0},
		{accessLogKey{"unmatched", 404}, 3, 0},
		{accessLogKey{"/readyz", 503}, 150, 0},
	} {
		if lines[want.key] != want.lines || sampled[want.key] != want.sampled {
			t.Errorf("access log of %v: %d lines, %d sampled; want %d, %d sampled",
				want.key, lines[want.key], sampled[want.key], want.lines, want.sampled)
		}
	}
	if slow != 1 {
		t.Errorf("access log has %d lines with a latency of 500 ms or more; want 1", slow)
	}
}

// sampledTraffic sends TestLogSampler's requests to h, reading the time
// from clock and starting drain on the way.
func sampledTraffic(t *testing.T, h http.Handler, clock *stepClock, drain *controller.Drain) {
	t.Helper()
	second := time.Unix(1_800_000_000, 0)
	clock.set(second, 0)

	get := func(path string, n, status int) {
		t.Helper()
		e := newExchange(http.MethodGet, path)
		for range n {
			if got := e.serve(h, nil); got != status {
				t.Fatalf("GET %s = %d %s; want %d", path, got, e.out.Bytes(), status)
			}
		}
	}
	// In one second: 250 of one route and status, a few of others.
	get("/api/v1/strategies", 250, http.StatusOK)
	get("/api/v1/products/0", 10, http.StatusBadRequest)
	get("/api/v1/products/999999999", 10, http.StatusNotFound)
	get("/no/such/route", 3, http.StatusNotFound)
	drain.Start()
	get("/readyz", 150, http.StatusServiceUnavailable)
	// A slow one, still in that second: each reading of the clock is 600
	// ms later, so it starts at the second's start and ends 600 ms in.
	clock.set(second, 600*time.Millisecond)
	get("/api/v1/strategies", 1, http.StatusOK)
	// The next second: 100 more.
	clock.set(second.Add(time.Second), 0)
	get("/api/v1/strategies", 100, http.StatusOK)
}

// accessLogKey is the route and status of an access log line.
type accessLogKey struct {
	route  string
	status float64
}

// accessLogCounts counts the access log lines in out by route and status,
// all of them and those marked sampled (which must be sampled=100), and
// the lines with a latency of 500 ms or more.
func accessLogCounts(t *testing.T, out *testenv.Buffer) (lines, sampled map[accessLogKey]int, slow int) {
	t.Helper()
	lines, sampled = map[accessLogKey]int{}, map[accessLogKey]int{}
	for _, rec := range records(t, out, "request") {
		k := accessLogKey{fmt.Sprint(rec["route"]), rec["status"].(float64)}
		lines[k]++
		if v, ok := rec["sampled"]; ok {
			if v != float64(100) {
				t.Errorf("line %v: sampled = %v; want 100", rec, v)
			}
			sampled[k]++
		}
		if lat, _ := rec["latency"].(float64); time.Duration(lat) >= 500*time.Millisecond {
			slow++
		}
	}
	return lines, sampled, slow
}
