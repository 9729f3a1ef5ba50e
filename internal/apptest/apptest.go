// Package apptest starts real instances of the service for end-to-end
// tests: the same wiring as the program (internal/app), over a database of
// the test's own on the test MySQL server and a key prefix of its own on the
// test Redis nodes, listening on a free port of 127.0.0.1.
package apptest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testenv"
)

// Instance is one running instance of the service.
type Instance struct {
	// URL is the instance's base URL, http://127.0.0.1:port.
	URL        string
	AdminToken string
	Config     config.Config
	Stores     *app.Stores
	keyPrefix  string
}

// Start starts an instance with strategy override on, the test's own
// database and Redis key prefix, and env on top (SECKILL_* variables as the
// program reads them). It stops when t ends.
func Start(t testing.TB, env map[string]string) *Instance {
	t.Helper()
	addrs := testenv.RedisAddrs(t)
	vars := map[string]string{
		"SECKILL_ADDR":              "127.0.0.1:0",
		"SECKILL_MYSQL_DSN":         testenv.MySQL(t),
		"SECKILL_REDIS_ADDRS":       strings.Join(addrs, ","),
		"SECKILL_ADMIN_TOKEN":       testenv.RandomName("admin-"),
		"SECKILL_STRATEGY_OVERRIDE": "true",
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := app.LoadConfig(func(k string) string { return vars[k] }, false)
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	st, err := app.OpenStores(t.Context(), cfg, quietLog())
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("apptest: close stores: %v", err)
		}
	})
	in := &Instance{AdminToken: cfg.AdminToken, Config: cfg, Stores: st, keyPrefix: testenv.KeyPrefix(t, addrs)}
	in.serve(t)
	return in
}

// Another starts a second instance of the same sale: the same database,
// Redis nodes and key prefix, its own process-local state (the local lock).
func (in *Instance) Another(t testing.TB) *Instance {
	t.Helper()
	other := *in
	other.serve(t)
	return &other
}

// LockKey is the Redis key of a product's lock under strategy on the
// instance's nodes.
func (in *Instance) LockKey(strategy string, productID int64) string {
	return in.keyPrefix + "lock:" + strategy + ":product:" + strconv.FormatInt(productID, 10)
}

func (in *Instance) serve(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("apptest: listen: %v", err)
	}
	in.URL = "http://" + ln.Addr().String()
	log := quietLog()
	srv := app.NewServer(t.Context(), in.Config, in.Stores, log, app.Options{KeyPrefix: in.keyPrefix})
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

func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
