package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// wantOrder fails t unless a is a 201 with an order of strategy leaving
// remaining.
func wantOrder(t *testing.T, what string, a apptest.Answer, strategy string, remaining int64) {
	t.Helper()
	if a.Status != http.StatusCreated || a.Err != nil {
		t.Fatalf("%s = %d, %v; want 201 and an order", what, a.Status, a.Err)
	}
	if o := a.Order; o.OrderID <= 0 || o.Strategy != strategy || o.RemainingStock != remaining {
		t.Errorf("%s = %+v; want an order by %s leaving %d", what, o, strategy, remaining)
	}
}

// TestRun runs the program as main does, buys once end to end and shuts it
// down.
func TestRun(t *testing.T) {
	t.Parallel()
	p := apptest.Run(t, run, map[string]string{
		"SECKILL_DRAIN_DELAY": "1m",
		// The program's own defaults: an admin token it makes up, no override.
		"SECKILL_ADMIN_TOKEN":       "",
		"SECKILL_STRATEGY_OVERRIDE": "",
	})

	// No SECKILL_ADMIN_TOKEN: the program made one up and printed it.
	m := regexp.MustCompile(`admin token[^\n]*: ([0-9a-f]{32})\n`).FindStringSubmatch(p.Out.String())
	if m == nil {
		t.Fatalf("output has no generated admin token:\n%s", p.Out)
	}
	p.AdminToken = m[1]
	if n := strings.Count(p.Out.String(), p.AdminToken); n != 1 {
		t.Errorf("the admin token is in the output %d times; want once, on its own line", n)
	}
	if r := p.Get(t, "/readyz"); r.Status != http.StatusOK {
		t.Errorf("GET /readyz = %v; want 200", r)
	}
	r := p.Do(t, http.MethodPost, "/api/v1/admin/products", `{"name":"x","stock":1}`, map[string]string{"Authorization": "Bearer wrong"})
	apptest.WantError(t, "POST /api/v1/admin/products with a wrong token", r, http.StatusUnauthorized, "unauthorized")

	id := p.Create(t, "phone", 10)
	wantOrder(t, "purchase", p.Buy(t.Context(), id, client.Purchase{UserID: "u-1", Quantity: 1}, client.Override{}), "redlock", 9)
	// The program serves without the strategy override by default.
	r = p.PostPurchase(t, id, "strategy=token", `{"user_id":"u-2","quantity":1}`)
	apptest.WantError(t, "purchase with ?strategy=token", r, http.StatusForbidden, "strategy_override_disabled")

	begin := time.Now()
	if err := p.Stop(t); err != nil {
		t.Fatalf("run() after its context ended = %v; want nil (graceful shutdown)", err)
	}
	if d := time.Since(begin); d > 20*time.Second {
		t.Errorf("run() took %v to stop with nothing in flight; want it at once, not after SECKILL_DRAIN_DELAY (1m)", d)
	}
	if _, err := http.Get(p.URL + "/healthz"); err == nil {
		t.Errorf("GET /healthz after run returned succeeded; want the listener closed")
	}
	for _, want := range []string{"seckill listening", "seckill shutting down", "seckill stopped"} {
		if !strings.Contains(p.Out.String(), want) {
			t.Errorf("output has no %q:\n%s", want, p.Out)
		}
	}
}

// TestRunShutdownFinishesInFlightPurchase ends run's context while a
// purchase holds its lock (hold_ms): the purchase completes with 201, run
// returns nil, and no lock is left behind on the Redis nodes.
func TestRunShutdownFinishesInFlightPurchase(t *testing.T) {
	t.Parallel()
	// Redis nodes of its own (the harness's for a program): the program
	// uses the default key prefix.
	p := apptest.Run(t, run, map[string]string{"SECKILL_ADMIN_TOKEN": "test-admin-token", "SECKILL_DRAIN_DELAY": "1s"})
	if strings.Contains(p.Out.String(), "test-admin-token") {
		t.Errorf("output shows the admin token it was given:\n%s", p.Out)
	}
	id := p.Create(t, "phone", 5)

	inflight := make(chan apptest.Answer, 1)
	go func() {
		inflight <- p.Buy(context.Background(), id, client.Purchase{UserID: "u-1", Quantity: 1, RequestID: "in-flight"},
			client.Override{Hold: 5 * time.Second})
	}()

	// Wait until the purchase holds its lock: a majority of the nodes have
	// the product's lock key.
	testenv.Eventually(t, 30*time.Second, "the purchase to take its lock (a lock key on 2 of 3 nodes)",
		func() bool { return p.LockHolders(t, "redlock", id) >= 2 })

	p.Terminate() // as SIGTERM does
	wantDrainWhileInFlight(t, p, id, inflight)
	wantOrder(t, "in-flight purchase during shutdown", <-inflight, "redlock", 4)
	if err := p.Stop(t); err != nil {
		t.Fatalf("run() after its context ended = %v; want nil (graceful shutdown)", err)
	}

	wantNoKeysLeft(t, p)
	wantNewInstanceSells(t, p, id)
}

// wantDrainWhileInFlight checks the drain once run's context has ended:
// /readyz turns 503 at once, the instance stops accepting after
// SECKILL_DRAIN_DELAY, and all the while the purchase of product id holds
// its lock.
func wantDrainWhileInFlight(t *testing.T, p *apptest.Program, id int64, inflight <-chan apptest.Answer) {
	t.Helper()
	// The drain has begun: /readyz says so at once, while the purchase is
	// still in flight and the instance still accepts requests.
	if r := p.Get(t, "/readyz"); r.Status != http.StatusServiceUnavailable ||
		!strings.Contains(string(r.Body), `"down":"instance"`) {
		t.Errorf("GET /readyz once the drain began = %v; want 503 naming the instance as down", r)
	}
	select {
	case a := <-inflight:
		t.Fatalf("the purchase (hold_ms=5000) answered %d %v before /readyz turned 503; want it still in flight", a.Status, a.Err)
	default:
	}
	// SECKILL_DRAIN_DELAY later the instance stops accepting, though the
	// purchase is still in flight.
	refused := testenv.Until(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := p.Send(ctx, http.MethodGet, "/healthz", "", nil)
		return err != nil
	})
	if !refused {
		t.Errorf("the instance still accepts connections 30s into its drain; want it to stop after SECKILL_DRAIN_DELAY (1s)")
	}
	// The purchase still holds its lock (it releases it before it answers).
	if n := p.LockHolders(t, "redlock", id); n < 2 {
		t.Errorf("%d of 3 nodes hold the purchase's lock when the instance stops accepting; want the purchase still in flight (a majority)", n)
	}
}

// wantNoKeysLeft checks that no node of p holds a key of the default
// prefix.
func wantNoKeysLeft(t *testing.T, p *apptest.Program) {
	t.Helper()
	for _, n := range p.Nodes {
		keys, err := testenv.Clients(t, []string{n.Addr})[0].Keys(context.Background(), config.DefaultKeyPrefix+"*").Result()
		if err != nil {
			t.Fatalf("KEYS on %s: %v", n.Addr, err)
		}
		// The reserve writers' streams stay: they are where the next
		// instance reads reservations from, not a lock.
		keys = slices.DeleteFunc(keys, func(k string) bool {
			return strings.HasPrefix(k, config.DefaultKeyPrefix+"reserve:") && strings.HasSuffix(k, ":stream")
		})
		if len(keys) != 0 {
			t.Errorf("after shutdown, node %s still has %q; want the lock released", n.Addr, keys)
		}
	}
}

// wantNewInstanceSells starts another instance of p's sale and checks that
// it sells product id at once and replays the in-flight purchase.
func wantNewInstanceSells(t *testing.T, p *apptest.Program, id int64) {
	t.Helper()
	// A new instance sells at once: nothing holds the product's lock (its
	// lease is 8s, longer than this wait).
	p2 := p.AnotherWith(t, map[string]string{"SECKILL_LOCK_WAIT": "1s"})
	wantOrder(t, "purchase on a new instance", p2.Buy(t.Context(), id, client.Purchase{UserID: "u-2", Quantity: 1}, client.Override{}), "redlock", 3)
	// The in-flight order was written: its request ID replays.
	a := p2.Buy(t.Context(), id, client.Purchase{UserID: "u-1", Quantity: 1, RequestID: "in-flight"}, client.Override{})
	if a.Status != http.StatusOK {
		t.Errorf("replay of the in-flight purchase = %d, %v; want 200", a.Status, a.Err)
	}
	if err := p2.Stop(t); err != nil {
		t.Errorf("second run() = %v; want nil", err)
	}
}

// TestRunRejectsBadSettings: a setting that does not parse stops run at
// once with an error naming the variable; nothing starts, nothing listens.
// The test holds SECKILL_ADDR's port itself, so that no other test can take
// it: a run that got as far as listening would fail there instead, with an
// error of its own.
func TestRunRejectsBadSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"SECKILL_MYSQL_DSN":   testenv.MySQL(t),
		"SECKILL_REDIS_ADDRS": strings.Join(testenv.RedisAddrs(t), ","),
	}
	for _, tc := range []struct{ variable, value string }{
		{"SECKILL_LOCK_TTL", "abc"},
		{"SECKILL_LOCK_WAIT", "0s"},
		{"SECKILL_LOCK", "bogus"},
		{"SECKILL_ADDR", "127.0.0.1:abc"},
		{"SECKILL_ADDR", "nowhere"},
		{"SECKILL_REDIS_ADDRS", "localhost"},
		{"SECKILL_MYSQL_DSN", "not a dsn"},
		{"SECKILL_STRATEGY_OVERRIDE", "maybe"},
		{"SECKILL_PER_USER_LIMIT", "-1"},
		{"SECKILL_FENCING", "sometimes"},
		{"SECKILL_LOG_FORMAT", "xml"},
		{"SECKILL_MYSQL_MAX_CONNS", "0"},
		{"SECKILL_DRAIN_DELAY", "-1s"},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"SECKILL_ADDR": ln.Addr().String()}
		for k, v := range base {
			env[k] = v
		}
		env[tc.variable] = tc.value
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out testenv.Buffer
		err = run(ctx, nil, func(k string) string { return env[k] }, &out)
		cancel()
		ln.Close()
		if err == nil || !strings.Contains(err.Error(), tc.variable) {
			t.Errorf("run(%s=%q) = %v; want an error naming %s", tc.variable, tc.value, err, tc.variable)
		}
		if err != nil && strings.Contains(err.Error(), "address already in use") {
			t.Errorf("run(%s=%q) = %v; want it stopped before listening", tc.variable, tc.value, err)
		}
		if out.String() != "" {
			t.Errorf("run(%s=%q) wrote %q; want nothing started", tc.variable, tc.value, out.String())
		}
	}
}

// TestRunHelp: -h and --help print the usage, of the program and of the
// demo, and return nil (exit 0).
func TestRunHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"usage: seckill", "seckill demo", "SECKILL_ADDR", "SECKILL_LOG_FORMAT"}},
		{[]string{"--help"}, []string{"usage: seckill", "SECKILL_MYSQL_MAX_CONNS"}},
		{[]string{"demo", "-h"}, []string{"-scenario", "-list", "-web"}},
		{[]string{"demo", "--help"}, []string{"-scenario", "lease-overrun"}},
	} {
		var out testenv.Buffer
		err := run(t.Context(), tc.args, func(string) string { return "" }, &out)
		if err != nil {
			t.Errorf("run(%q) = %v; want nil", tc.args, err)
		}
		for _, want := range tc.want {
			if !strings.Contains(out.String(), want) {
				t.Errorf("run(%q) printed %q; want it to contain %q", tc.args, out.String(), want)
			}
		}
	}
	// The usage names every variable the program reads.
	var out testenv.Buffer
	if err := run(t.Context(), []string{"-h"}, func(string) string { return "" }, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(func(k string) string {
		if !strings.Contains(out.String(), k) {
			t.Errorf("run(-h) does not name %s", k)
		}
		return ""
	}, false); err != nil {
		t.Fatal(err)
	}
}

func TestRunUnknownCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"bogus"}, {"serve"}, {"--demo"}} {
		var out testenv.Buffer
		err := run(t.Context(), args, func(string) string { return "" }, &out)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", args[0])) {
			t.Errorf("run(%q) = %v; want an error naming the command", args, err)
		}
		if out.String() != "" {
			t.Errorf("run(%q) wrote %q; want nothing", args, out.String())
		}
	}
}

// TestRunDoesNotPrintSecrets starts the program with a password in its DSN
// and an admin token, against a database that does not answer: the config
// it prints and the error it returns show neither.
func TestRunDoesNotPrintSecrets(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"SECKILL_ADDR":        testenv.FreeAddr(t),
		"SECKILL_MYSQL_DSN":   "app:pw-SECRET-1@tcp(" + testenv.FreeAddr(t) + ")/seckill",
		"SECKILL_REDIS_ADDRS": strings.Join(testenv.RedisAddrs(t), ","),
		"SECKILL_ADMIN_TOKEN": "tok-SECRET-2",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out testenv.Buffer
	err := run(ctx, nil, func(k string) string { return env[k] }, &out)
	if err == nil {
		t.Fatalf("run() with a database that does not answer = nil; want an error")
	}
	if !strings.Contains(out.String(), "seckill starting") || !strings.Contains(out.String(), "app:***@tcp(") {
		t.Errorf("output = %q; want the config printed with the password masked", out.String())
	}
	for _, secret := range []string{"pw-SECRET-1", "tok-SECRET-2"} {
		if strings.Contains(out.String(), secret) || strings.Contains(err.Error(), secret) {
			t.Errorf("run() = %v, output %q; want no %q in either", err, out.String(), secret)
		}
	}
}

// TestRunLogsJSON runs the program with SECKILL_LOG_FORMAT=json: every line
// it prints is a JSON record; each request is logged at info with its
// request ID (the X-Request-ID it came with, or one made up, echoed in the
// answer), and the lines about a purchase, its error line included, name
// the product, the user and the strategy.
func TestRunLogsJSON(t *testing.T) {
	t.Parallel()
	p := apptest.Run(t, run, map[string]string{"SECKILL_LOG_FORMAT": "json", "SECKILL_ADMIN_TOKEN": ""})
	p.AdminToken = loggedAdminToken(t, p)
	id := p.Create(t, "phone", 10)

	if r := purchaseWithID(t, p, id, "", `{"user_id":"u-1","quantity":1}`, "trace-42"); r.Status != http.StatusCreated || r.Header.Get("X-Request-ID") != "trace-42" {
		t.Errorf("purchase with X-Request-ID trace-42 = %v, X-Request-ID %q; want 201 and trace-42 echoed", r, r.Header.Get("X-Request-ID"))
	}
	r := purchaseWithID(t, p, id, "", `{"user_id":"u-2","quantity":1}`, "has a space")
	made := r.Header.Get("X-Request-ID")
	if r.Status != http.StatusCreated || made == "" || made == "has a space" {
		t.Errorf("purchase with X-Request-ID %q = %v, X-Request-ID %q; want 201 and an ID made up", "has a space", r, made)
	}
	// The token lock's node down: 503, logged with its cause.
	p.Nodes[0].Stop()
	r = purchaseWithID(t, p, id, "strategy=token", `{"user_id":"u-3","quantity":1}`, "")
	failed := r.Header.Get("X-Request-ID")
	if r.Status != http.StatusServiceUnavailable || failed == "" {
		t.Fatalf("purchase by token with its node down = %v, X-Request-ID %q; want 503 and an ID", r, failed)
	}

	wantPurchaseRecords(t, p, id, made, failed)
	// The health checks that the harness made at start are not at info.
	for _, rec := range records(t, p) {
		if rec["route"] == "/healthz" {
			t.Errorf("record %v: want the health checks' access log at debug level only", rec)
		}
	}
}

// purchaseWithID posts a purchase of product id, with query (and then the
// admin token), and X-Request-ID requestID ("" sends none).
func purchaseWithID(t *testing.T, p *apptest.Program, id int64, query, body, requestID string) apptest.Response {
	t.Helper()
	header := map[string]string{}
	if requestID != "" {
		header["X-Request-ID"] = requestID
	}
	if query != "" {
		maps.Copy(header, p.AdminHeader()) // the override's parameters are an admin's
	}
	return p.Do(t, http.MethodPost, apptest.PurchasePath(id, query), body, header)
}

// records parses every line the program printed as a JSON record.
func records(t *testing.T, p *apptest.Program) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.Lines(p.Out.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("output line %q is not JSON: %v", l, err)
		}
		out = append(out, rec)
	}
	return out
}

// loggedAdminToken returns the admin token the program made up, read from
// the record that carries it.
func loggedAdminToken(t *testing.T, p *apptest.Program) string {
	t.Helper()
	var token string
	for _, rec := range records(t, p) {
		if tok, ok := rec["admin_token"].(string); ok {
			token = tok
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(token) {
		t.Fatalf("no record carries the generated admin token; output:\n%s", p.Out)
	}
	return token
}

// wantPurchaseRecords checks the access and error records of
// TestRunLogsJSON's purchases of product id: trace-42's, the one with the
// ID made up and the one that failed.
func wantPurchaseRecords(t *testing.T, p *apptest.Program, id int64, made, failed string) {
	t.Helper()
	rec := find(t, p, "request", "trace-42")
	wantFields(t, rec, map[string]any{"level": "INFO", "method": "POST", "route": "/api/v1/products/:id/purchase",
		"path": fmt.Sprintf("/api/v1/products/%d/purchase", id), "status": 201, "product": id, "user": "u-1", "strategy": "redlock"})
	if lat, ok := rec["latency"].(float64); rec != nil && (!ok || lat <= 0) {
		t.Errorf("access log record %v; want a latency", rec)
	}
	wantFields(t, find(t, p, "request", made), map[string]any{"status": 201, "user": "u-2"})
	wantFields(t, find(t, p, "request", failed), map[string]any{"level": "INFO", "status": 503, "product": id, "user": "u-3", "strategy": "token"})
	rec = find(t, p, "request failed", failed)
	wantFields(t, rec, map[string]any{"level": "ERROR", "code": "unavailable", "product": id, "user": "u-3", "strategy": "token"})
	if rec != nil && rec["err"] == nil {
		t.Errorf("error record %v has no err (the cause)", rec)
	}
}

// find returns the record with message msg and request ID requestID, or
// nil (and an error) when there is none.
func find(t *testing.T, p *apptest.Program, msg, requestID string) map[string]any {
	t.Helper()
	for _, rec := range records(t, p) {
		if rec["msg"] == msg && rec["request_id"] == requestID {
			return rec
		}
	}
	t.Errorf("no %q record with request_id %q; output:\n%s", msg, requestID, p.Out)
	return nil
}

// wantFields checks that rec, when there is one, has each of fields with
// its value.
func wantFields(t *testing.T, rec map[string]any, fields map[string]any) {
	t.Helper()
	for k, v := range fields {
		if rec != nil && fmt.Sprint(rec[k]) != fmt.Sprint(v) {
			t.Errorf("record %v has %s = %v; want %v", rec, k, rec[k], v)
		}
	}
}
