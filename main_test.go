package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/testenv"
)

// freeAddr returns 127.0.0.1 and a port nothing listens on just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// program is one run of the program in a goroutine.
type program struct {
	url    string
	out    *testenv.Buffer
	cancel context.CancelFunc
	done   chan error
	err    error
	ended  bool
}

// start runs the program with env (and nothing else) as its environment
// and waits until /healthz answers 200. It is stopped when t ends.
func start(t *testing.T, env map[string]string) *program {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &program{url: "http://" + env["SECKILL_ADDR"], out: &testenv.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- run(ctx, nil, func(k string) string { return env[k] }, p.out) }()
	t.Cleanup(func() {
		if err := p.stop(t); err != nil {
			t.Errorf("run() at cleanup = %v", err)
		}
	})
	var last error
	healthy := testenv.Until(60*time.Second, func() bool {
		res, err := http.Get(p.url + "/healthz")
		if last = err; err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return true
			}
			last = fmt.Errorf("status %d", res.StatusCode)
		}
		select {
		case err := <-p.done:
			p.ended, p.err = true, err
			t.Fatalf("run() = %v before /healthz answered; output:\n%s", err, p.out)
		default:
		}
		return false
	})
	if !healthy {
		t.Fatalf("GET /healthz never answered 200 (last error %v); output:\n%s", last, p.out)
	}
	return p
}

// stop cancels run's context and returns what run returned.
func (p *program) stop(t *testing.T) error {
	t.Helper()
	if p.ended {
		return p.err
	}
	p.cancel()
	select {
	case p.err = <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("run() did not return within a minute of its context ending; output:\n%s", p.out)
	}
	p.ended = true
	return p.err
}

type result struct {
	status int
	body   []byte
}

func request(ctx context.Context, method, url, token, body string) (result, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return result{status: res.StatusCode, body: b}, err
}

func (p *program) do(t *testing.T, method, path, token, body string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := request(ctx, method, p.url+path, token, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (p *program) createProduct(t *testing.T, token string, stock int) int64 {
	t.Helper()
	r := p.do(t, http.MethodPost, "/api/v1/admin/products", token, fmt.Sprintf(`{"name":"phone","stock":%d}`, stock))
	var prod api.Product
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &prod) != nil || prod.ID <= 0 {
		t.Fatalf("POST /api/v1/admin/products = %d %s; want 201 and a product", r.status, r.body)
	}
	return prod.ID
}

func wantOrder(t *testing.T, what string, r result, strategy string, remaining int64) {
	t.Helper()
	var o api.Order
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &o) != nil {
		t.Fatalf("%s = %d %s; want 201 and an order", what, r.status, r.body)
	}
	if o.OrderID <= 0 || o.Strategy != strategy || o.RemainingStock != remaining {
		t.Errorf("%s = %s; want an order by %s leaving %d", what, r.body, strategy, remaining)
	}
}

// TestRun runs the program as main does, buys once end to end and shuts it
// down.
func TestRun(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"SECKILL_ADDR":        freeAddr(t),
		"SECKILL_MYSQL_DSN":   testenv.MySQL(t),
		"SECKILL_REDIS_ADDRS": strings.Join(testenv.RedisAddrs(t), ","),
		"SECKILL_DRAIN_DELAY": "1m",
	}
	p := start(t, env)

	// No SECKILL_ADMIN_TOKEN: the program made one up and printed it.
	m := regexp.MustCompile(`admin token[^\n]*: ([0-9a-f]{32})\n`).FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("output has no generated admin token:\n%s", p.out)
	}
	token := m[1]
	if n := strings.Count(p.out.String(), token); n != 1 {
		t.Errorf("the admin token is in the output %d times; want once, on its own line", n)
	}
	if r := p.do(t, http.MethodGet, "/readyz", "", ""); r.status != http.StatusOK {
		t.Errorf("GET /readyz = %d %s; want 200", r.status, r.body)
	}
	if r := p.do(t, http.MethodPost, "/api/v1/admin/products", "wrong", `{"name":"x","stock":1}`); r.status != http.StatusUnauthorized {
		t.Errorf("POST /api/v1/admin/products with a wrong token = %d %s; want 401", r.status, r.body)
	}

	id := p.createProduct(t, token, 10)
	r := p.do(t, http.MethodPost, fmt.Sprintf("/api/v1/products/%d/purchase", id), "", `{"user_id":"u-1","quantity":1}`)
	wantOrder(t, "purchase", r, "redlock", 9)
	// The program serves without the strategy override by default.
	r = p.do(t, http.MethodPost, fmt.Sprintf("/api/v1/products/%d/purchase?strategy=token", id), "", `{"user_id":"u-2","quantity":1}`)
	if r.status != http.StatusForbidden {
		t.Errorf("purchase with ?strategy=token = %d %s; want 403", r.status, r.body)
	}

	begin := time.Now()
	if err := p.stop(t); err != nil {
		t.Fatalf("run() after its context ended = %v; want nil (graceful shutdown)", err)
	}
	if d := time.Since(begin); d > 20*time.Second {
		t.Errorf("run() took %v to stop with nothing in flight; want it at once, not after SECKILL_DRAIN_DELAY (1m)", d)
	}
	if _, err := http.Get(p.url + "/healthz"); err == nil {
		t.Errorf("GET /healthz after run returned succeeded; want the listener closed")
	}
	for _, want := range []string{"seckill listening", "seckill shutting down", "seckill stopped"} {
		if !strings.Contains(p.out.String(), want) {
			t.Errorf("output has no %q:\n%s", want, p.out)
		}
	}
}

// TestRunShutdownFinishesInFlightPurchase ends run's context while a
// purchase holds its lock (hold_ms): the purchase completes with 201, run
// returns nil, and no lock is left behind on the Redis nodes.
func TestRunShutdownFinishesInFlightPurchase(t *testing.T) {
	t.Parallel()
	// Redis nodes of its own: the program uses the default key prefix.
	addrs, nodes := ownRedisNodes(t)
	dsn := testenv.MySQL(t)
	env := map[string]string{
		"SECKILL_ADDR":              freeAddr(t),
		"SECKILL_MYSQL_DSN":         dsn,
		"SECKILL_REDIS_ADDRS":       strings.Join(addrs, ","),
		"SECKILL_ADMIN_TOKEN":       "test-admin-token",
		"SECKILL_STRATEGY_OVERRIDE": "true",
		"SECKILL_DRAIN_DELAY":       "1s",
	}
	p := start(t, env)
	if strings.Contains(p.out.String(), "test-admin-token") {
		t.Errorf("output shows the admin token it was given:\n%s", p.out)
	}
	id := p.createProduct(t, "test-admin-token", 5)

	inflight := p.purchaseInFlight(id)

	// Wait until the purchase holds its lock: a majority of the nodes have
	// the product's lock key.
	testenv.Eventually(t, 30*time.Second, "the purchase to take its lock (a lock key on 2 of 3 nodes)",
		func() bool { return lockKeys(t, nodes) >= 2 })

	p.cancel() // as SIGTERM does
	wantDrainWhileInFlight(t, p, nodes, inflight)
	a := <-inflight
	if a.err != nil {
		t.Fatalf("in-flight purchase during shutdown: %v", a.err)
	}
	wantOrder(t, "in-flight purchase during shutdown", a.r, "redlock", 4)
	if err := p.stop(t); err != nil {
		t.Fatalf("run() after its context ended = %v; want nil (graceful shutdown)", err)
	}

	wantNoKeysLeft(t, nodes)
	wantNewInstanceSells(t, env, id)
}

// ownRedisNodes starts three Redis nodes for one test and returns their
// addresses and a client of each.
func ownRedisNodes(t *testing.T) ([]string, []*redis.Client) {
	t.Helper()
	var addrs []string
	var nodes []*redis.Client
	for range 3 {
		r := testenv.StartRedis(t)
		addrs = append(addrs, r.Addr)
		c := redis.NewClient(&redis.Options{Addr: r.Addr})
		t.Cleanup(func() { c.Close() })
		nodes = append(nodes, c)
	}
	return addrs, nodes
}

// answer is what a request made in a goroutine got.
type answer struct {
	r   result
	err error
}

// purchaseInFlight starts a purchase of product id that holds its lock for
// 5s (hold_ms) and returns where its answer will come.
func (p *program) purchaseInFlight(id int64) <-chan answer {
	inflight := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := request(ctx, http.MethodPost, fmt.Sprintf("%s/api/v1/products/%d/purchase?hold_ms=5000", p.url, id), "test-admin-token",
			`{"user_id":"u-1","quantity":1,"request_id":"in-flight"}`)
		inflight <- answer{r, err}
	}()
	return inflight
}

// wantDrainWhileInFlight checks the drain once run's context has ended:
// /readyz turns 503 at once, the instance stops accepting after
// SECKILL_DRAIN_DELAY, and all the while the purchase holds its lock.
func wantDrainWhileInFlight(t *testing.T, p *program, nodes []*redis.Client, inflight <-chan answer) {
	t.Helper()
	// The drain has begun: /readyz says so at once, while the purchase is
	// still in flight and the instance still accepts requests.
	if r := p.do(t, http.MethodGet, "/readyz", "", ""); r.status != http.StatusServiceUnavailable ||
		!strings.Contains(string(r.body), `"down":"instance"`) {
		t.Errorf("GET /readyz once the drain began = %d %s; want 503 naming the instance as down", r.status, r.body)
	}
	select {
	case a := <-inflight:
		t.Fatalf("the purchase (hold_ms=5000) answered %v before /readyz turned 503; want it still in flight", a)
	default:
	}
	// SECKILL_DRAIN_DELAY later the instance stops accepting, though the
	// purchase is still in flight.
	refused := testenv.Until(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := request(ctx, http.MethodGet, p.url+"/healthz", "", "")
		return err != nil
	})
	if !refused {
		t.Errorf("the instance still accepts connections 30s into its drain; want it to stop after SECKILL_DRAIN_DELAY (1s)")
	}
	// The purchase still holds its lock (it releases it before it answers).
	if n := lockKeys(t, nodes); n < 2 {
		t.Errorf("%d of 3 nodes hold the purchase's lock when the instance stops accepting; want the purchase still in flight (a majority)", n)
	}
}

// wantNoKeysLeft checks that no node holds a key of the default prefix.
func wantNoKeysLeft(t *testing.T, nodes []*redis.Client) {
	t.Helper()
	for _, n := range nodes {
		keys, err := n.Keys(context.Background(), "seckill:*").Result()
		if err != nil {
			t.Fatalf("KEYS on %s: %v", n.Options().Addr, err)
		}
		if len(keys) != 0 {
			t.Errorf("after shutdown, node %s still has %q; want the lock released", n.Options().Addr, keys)
		}
	}
}

// wantNewInstanceSells starts a second instance with env on a new address
// and checks that it sells product id at once and replays the in-flight
// purchase.
func wantNewInstanceSells(t *testing.T, env map[string]string, id int64) {
	t.Helper()
	// A new instance sells at once: nothing holds the product's lock (its
	// lease is 8s, longer than this wait).
	env["SECKILL_ADDR"] = freeAddr(t)
	env["SECKILL_LOCK_WAIT"] = "1s"
	p2 := start(t, env)
	r := p2.do(t, http.MethodPost, fmt.Sprintf("/api/v1/products/%d/purchase", id), "", `{"user_id":"u-2","quantity":1}`)
	wantOrder(t, "purchase on a new instance", r, "redlock", 3)
	// The in-flight order was written: its request ID replays.
	r = p2.do(t, http.MethodPost, fmt.Sprintf("/api/v1/products/%d/purchase", id), "", `{"user_id":"u-1","quantity":1,"request_id":"in-flight"}`)
	if r.status != http.StatusOK {
		t.Errorf("replay of the in-flight purchase = %d %s; want 200", r.status, r.body)
	}
	if err := p2.stop(t); err != nil {
		t.Errorf("second run() = %v; want nil", err)
	}
}

// lockKeys counts the lock keys of the default prefix on nodes.
func lockKeys(t *testing.T, nodes []*redis.Client) int {
	t.Helper()
	locked := 0
	for _, n := range nodes {
		keys, err := n.Keys(context.Background(), "seckill:lock:*").Result()
		if err != nil {
			t.Fatalf("KEYS on %s: %v", n.Options().Addr, err)
		}
		locked += len(keys)
	}
	return locked
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
		"SECKILL_ADDR":        freeAddr(t),
		"SECKILL_MYSQL_DSN":   "app:pw-SECRET-1@tcp(" + freeAddr(t) + ")/seckill",
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
	var addrs []string
	var nodes []*testenv.Redis
	for range 3 {
		n := testenv.StartRedis(t)
		nodes = append(nodes, n)
		addrs = append(addrs, n.Addr)
	}
	p := start(t, map[string]string{
		"SECKILL_ADDR":              freeAddr(t),
		"SECKILL_MYSQL_DSN":         testenv.MySQL(t),
		"SECKILL_REDIS_ADDRS":       strings.Join(addrs, ","),
		"SECKILL_STRATEGY_OVERRIDE": "true",
		"SECKILL_LOG_FORMAT":        "json",
	})
	token := p.loggedAdminToken(t)
	id := p.createProduct(t, token, 10)

	if status, rid := p.send(t, id, token, "", `{"user_id":"u-1","quantity":1}`, "trace-42"); status != http.StatusCreated || rid != "trace-42" {
		t.Errorf("purchase with X-Request-ID trace-42 = %d, X-Request-ID %q; want 201 and trace-42 echoed", status, rid)
	}
	status, made := p.send(t, id, token, "", `{"user_id":"u-2","quantity":1}`, "has a space")
	if status != http.StatusCreated || made == "" || made == "has a space" {
		t.Errorf("purchase with X-Request-ID %q = %d, X-Request-ID %q; want 201 and an ID made up", "has a space", status, made)
	}
	// The token lock's node down: 503, logged with its cause.
	nodes[0].Stop()
	status, failed := p.send(t, id, token, "?strategy=token", `{"user_id":"u-3","quantity":1}`, "")
	if status != http.StatusServiceUnavailable || failed == "" {
		t.Fatalf("purchase by token with its node down = %d, X-Request-ID %q; want 503 and an ID", status, failed)
	}

	p.wantPurchaseRecords(t, id, made, failed)
	// The health checks that start() made are not at info.
	for _, rec := range p.records(t) {
		if rec["route"] == "/healthz" {
			t.Errorf("record %v: want the health checks' access log at debug level only", rec)
		}
	}
}

// records parses every line the program printed as a JSON record.
func (p *program) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.Lines(p.out.String()) {
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
func (p *program) loggedAdminToken(t *testing.T) string {
	t.Helper()
	var token string
	for _, rec := range p.records(t) {
		if tok, ok := rec["admin_token"].(string); ok {
			token = tok
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(token) {
		t.Fatalf("no record carries the generated admin token; output:\n%s", p.out)
	}
	return token
}

// send makes a purchase and returns the answer's status and X-Request-ID.
func (p *program) send(t *testing.T, id int64, token, query, body, requestID string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/v1/products/%d/purchase%s", p.url, id, query), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if requestID != "" {
		req.Header.Set("X-Request-ID", requestID)
	}
	if query != "" {
		req.Header.Set("Authorization", "Bearer "+token) // the override's parameters are an admin's
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header.Get("X-Request-ID")
}

// wantPurchaseRecords checks the access and error records of
// TestRunLogsJSON's purchases of product id: trace-42's, the one with the
// ID made up and the one that failed.
func (p *program) wantPurchaseRecords(t *testing.T, id int64, made, failed string) {
	t.Helper()
	rec := p.find(t, "request", "trace-42")
	wantFields(t, rec, map[string]any{"level": "INFO", "method": "POST", "route": "/api/v1/products/:id/purchase",
		"path": fmt.Sprintf("/api/v1/products/%d/purchase", id), "status": 201, "product": id, "user": "u-1", "strategy": "redlock"})
	if lat, ok := rec["latency"].(float64); rec != nil && (!ok || lat <= 0) {
		t.Errorf("access log record %v; want a latency", rec)
	}
	wantFields(t, p.find(t, "request", made), map[string]any{"status": 201, "user": "u-2"})
	wantFields(t, p.find(t, "request", failed), map[string]any{"level": "INFO", "status": 503, "product": id, "user": "u-3", "strategy": "token"})
	rec = p.find(t, "request failed", failed)
	wantFields(t, rec, map[string]any{"level": "ERROR", "code": "unavailable", "product": id, "user": "u-3", "strategy": "token"})
	if rec != nil && rec["err"] == nil {
		t.Errorf("error record %v has no err (the cause)", rec)
	}
}

// find returns the record with message msg and request ID requestID, or
// nil (and an error) when there is none.
func (p *program) find(t *testing.T, msg, requestID string) map[string]any {
	t.Helper()
	for _, rec := range p.records(t) {
		if rec["msg"] == msg && rec["request_id"] == requestID {
			return rec
		}
	}
	t.Errorf("no %q record with request_id %q; output:\n%s", msg, requestID, p.out)
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
