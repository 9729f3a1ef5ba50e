// Package apptest is the one harness of the end-to-end tests: it starts
// instances of the service and makes the calls of a sale against them
// (create a product, buy, audit, read the metrics), raw requests for the
// tests of the contract's statuses and bodies, and the per-user limit's
// checks.
//
// An instance starts one of three ways, each giving a Service (URL, admin
// token, client, calls), and a second instance of the same sale (the same
// database, Redis nodes and key prefix) with Another:
//   - Start: in the test's process, with the program's wiring
//     (internal/app), over a database of the test's own on the test MySQL
//     server and a key prefix of its own on the test Redis nodes;
//   - Run: the program's run function in a goroutine (the main package's
//     own tests, which alone can name it);
//   - Exec: the program's binary in a process of its own, built once per
//     test binary, which a test can kill, pause or stop with a signal.
//
// Each listens on a free port of 127.0.0.1.
package apptest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// Instance is one instance started in the test's process, its stores at
// hand.
type Instance struct {
	Service
	Config config.Config
	Stores *app.Stores
	// vars are the settings it was opened with, defaults included.
	vars map[string]string
}

// Start starts an instance with env over the defaults: the test's own
// database, the test Redis nodes with a key prefix of the test's own, a
// random admin token and the strategy override on (SECKILL_* variables as
// the program reads them; one given as "" is unset). It stops when t ends.
func Start(t testing.TB, env map[string]string) *Instance {
	t.Helper()
	in := Open(t, env)
	in.serve(t)
	return in
}

// Open is Start without serving: the configuration and the stores of an
// instance, closed when t ends, for a test that wires a service or a router
// over them itself. Its URL is empty.
func Open(t testing.TB, env map[string]string) *Instance {
	t.Helper()
	vars := withDefaults(t, env, func() string { return "127.0.0.1:0" }, // Start listens on a port of its own
		func() string { return strings.Join(testenv.RedisAddrs(t), ",") })
	in := openVars(t, vars)
	in.keyPrefix = testenv.KeyPrefix(t, in.Config.RedisAddrs)
	return in
}

// openVars opens an instance's stores with the settings vars.
func openVars(t testing.TB, vars map[string]string) *Instance {
	t.Helper()
	cfg, err := app.LoadConfig(func(k string) string { return vars[k] }, false)
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	st, err := app.OpenStores(context.Background(), cfg, quietLog())
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("apptest: close stores: %v", err)
		}
	})
	return &Instance{
		Service: Service{AdminToken: cfg.AdminToken, redisAddrs: cfg.RedisAddrs},
		Config:  cfg,
		Stores:  st,
		vars:    vars,
	}
}

// AnotherOn starts a second instance of the same sale (the same Redis
// nodes, key prefix and admin token) with stores of its own, opened with
// env over the first's settings: its database reached through another
// node of a cluster, say.
func (in *Instance) AnotherOn(t testing.TB, env map[string]string) *Instance {
	t.Helper()
	vars := maps.Clone(in.vars)
	maps.Copy(vars, env)
	other := openVars(t, vars)
	other.keyPrefix = in.keyPrefix
	other.serve(t)
	return other
}

// Another starts a second instance of the same sale: the same database,
// Redis nodes and key prefix, its own process-local state (the local lock).
func (in *Instance) Another(t testing.TB) *Instance {
	t.Helper()
	other := *in
	other.serve(t)
	return &other
}

func (in *Instance) serve(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("apptest: listen: %v", err)
	}
	in.URL = "http://" + ln.Addr().String()
	log := quietLog()
	buyers, err := app.OpenBuyers(t.Context(), in.Config, log)
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	srv := app.NewServer(t.Context(), in.Config, in.Stores, log, app.Options{KeyPrefix: in.keyPrefix, Buyers: buyers})
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, srv, ln, in.Config, log) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("apptest: serve: %v", err)
		}
	})
}

// withDefaults returns env over the defaults: a database of the test's
// own, a random admin token, the strategy override on, and the address and
// Redis nodes that addr and redisAddrs make, which differ from one kind of
// start to another. A default is made only for a variable env does not
// name (a database, Redis nodes); a variable env gives as "" stays "",
// which the program reads as unset (its own default).
func withDefaults(t testing.TB, env map[string]string, addr, redisAddrs func() string) map[string]string {
	t.Helper()
	defaults := map[string]func() string{
		"SECKILL_ADDR":              addr,
		"SECKILL_REDIS_ADDRS":       redisAddrs,
		"SECKILL_MYSQL_DSN":         func() string { return testenv.MySQL(t) },
		"SECKILL_ADMIN_TOKEN":       func() string { return testenv.RandomName("admin-") },
		"SECKILL_STRATEGY_OVERRIDE": func() string { return "true" },
	}
	vars := maps.Clone(env)
	if vars == nil {
		vars = map[string]string{}
	}
	for k, def := range defaults {
		if _, ok := vars[k]; !ok {
			vars[k] = def()
		}
	}
	return vars
}

// quietLog is the instances' log: nothing, unless SECKILL_TEST_LOG names
// a level (debug, info, warn, error), from which it goes to stderr.
func quietLog() *slog.Logger {
	var level slog.Level
	if v := os.Getenv("SECKILL_TEST_LOG"); v != "" && level.UnmarshalText([]byte(v)) == nil {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
