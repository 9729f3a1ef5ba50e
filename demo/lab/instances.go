package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/app"
)

// Clock is the clock one instance's setnx lock reads: real time, moved
// ahead on demand.
type Clock struct{ ahead atomic.Int64 }

func (c *Clock) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// Jump moves the clock d ahead of real time.
func (c *Clock) Jump(d time.Duration) { c.ahead.Store(int64(d)) }

// Setup is how an instance differs from the world's configuration.
type Setup struct {
	// TTL, when not 0, is its lock lease (SECKILL_LOCK_TTL).
	TTL time.Duration
	// Watchdog, when not nil, turns the watchdog on or off
	// (SECKILL_WATCHDOG), whatever the environment says: a scenario whose
	// lesson needs it says so.
	Watchdog *bool
	// Clock, when not nil, is what its setnx lock reads.
	Clock *Clock
	// IPLimit and IPWindow, when not 0, are its SECKILL_IP_LIMIT.
	IPLimit  int
	IPWindow time.Duration
	// Reserve, when not empty, is its SECKILL_RESERVE_REDIS (one node, or
	// cluster:seeds); NoWriter runs no reserve writer on it.
	Reserve  string
	NoWriter bool
	// Acks and AckWait, when not 0, are its SECKILL_RESERVE_ACKS.
	Acks    int
	AckWait time.Duration
	// PaymentTimeout, when not 0, is its SECKILL_PAYMENT_TIMEOUT.
	PaymentTimeout time.Duration
	// MySQLDSN, when not empty, is its SECKILL_MYSQL_DSN: a database other
	// than the world's, which only stores opened with it reach (StartOwn).
	MySQLDSN string
}

// apply returns the world's configuration and options as s changes them.
func (w *World) apply(s Setup) (config.Config, app.Options) {
	cfg := w.cfg
	if s.TTL > 0 {
		cfg.LockTTL = s.TTL
	}
	if s.Watchdog != nil {
		cfg.Watchdog = *s.Watchdog
	}
	if s.IPLimit > 0 {
		cfg.IPLimit, cfg.IPWindow = s.IPLimit, s.IPWindow
	}
	if s.Reserve != "" {
		cfg.ReserveAddrs, cfg.ReserveCluster = []string{s.Reserve}, false
		if seeds, ok := strings.CutPrefix(s.Reserve, "cluster:"); ok {
			cfg.ReserveAddrs, cfg.ReserveCluster = strings.Split(seeds, ","), true
		}
	}
	if s.Acks > 0 {
		cfg.ReserveAcks, cfg.ReserveAckWait = s.Acks, s.AckWait
	}
	if s.PaymentTimeout > 0 {
		cfg.PaymentTimeout = s.PaymentTimeout
	}
	if s.MySQLDSN != "" {
		cfg.MySQLDSN = s.MySQLDSN
	}
	opts := app.Options{KeyPrefix: w.prefix, NoWriter: s.NoWriter}
	if s.Clock != nil {
		opts.Clock = s.Clock.now
	}
	return cfg, opts
}

// Instance is one running instance of the service.
type Instance struct {
	// Name says it in notes and errors: "instance 2".
	Name string
	// Client talks to it, with the admin token.
	Client *client.Client
	// Stop shuts it down; a second call returns what the first did.
	Stop func() error
	url  string
	srv  *app.Server
}

// StartInstances starts n instances set up as s, over the world's stores.
func (w *World) StartInstances(n int, s Setup) ([]*Instance, error) {
	cfg, opts := w.apply(s)
	var out []*Instance
	for range n {
		in, err := w.serve(cfg, w.stores, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// StartKillable starts an instance set up as s on connections of its own
// to the world's stores, and returns with it a kill that cuts it off at
// once, as when its process dies: its listener and connections closed, its
// database and Redis connections closed under it, so that it never writes,
// unlocks or renews a lease again.
func (w *World) StartKillable(s Setup) (*Instance, func() error, error) {
	cfg, opts := w.apply(s)
	own, err := w.stores.Share(w.ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("lab: %w", err)
	}
	in, err := w.serve(cfg, own, opts)
	if err != nil {
		return nil, nil, errors.Join(err, own.Close())
	}
	kill := sync.OnceValue(func() error {
		err := errors.Join(in.srv.HTTP.Close(), own.Close())
		if err != nil {
			return fmt.Errorf("lab: kill %s: %w", in.Name, err)
		}
		return nil
	})
	w.OnClose(kill)
	return in, kill, nil
}

func (w *World) serve(cfg config.Config, st *app.Stores, opts app.Options) (*Instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lab: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(w.ctx))
	srv := app.NewServer(ctx, cfg, st, w.lab.log, opts)
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, srv, ln, cfg, w.lab.log) }()
	url := "http://" + ln.Addr().String()
	w.mu.Lock()
	defer w.mu.Unlock()
	in := &Instance{
		Name:   fmt.Sprintf("instance %d", len(w.instances)+1),
		url:    url,
		srv:    srv,
		Client: &client.Client{BaseURL: url, AdminToken: cfg.AdminToken, HTTP: w.http},
		Stop: sync.OnceValue(func() error {
			cancel()
			// A killed instance's server is closed already: not news.
			if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("lab: %s: %w", url, err)
			}
			return nil
		}),
	}
	w.instances = append(w.instances, in)
	return in, nil
}

// StartOwn starts an instance set up as s on connections of its own to
// the world's stores (its own reserve Redis, when s names one), or, when
// s names a MySQL DSN, on stores of its own opened with it (the world's
// may be the embedded SQLite, which Share would open again) and the
// world's Redis nodes.
func (w *World) StartOwn(s Setup) (*Instance, error) {
	cfg, opts := w.apply(s)
	open := func() (*app.Stores, error) { return w.stores.Share(w.ctx, cfg) }
	if s.MySQLDSN != "" {
		open = func() (*app.Stores, error) { return app.OpenStores(w.ctx, cfg, w.lab.log) }
	}
	own, err := open()
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	in, err := w.serve(cfg, own, opts)
	if err != nil {
		return nil, errors.Join(err, own.Close())
	}
	w.OnClose(own.Close)
	return in, nil
}
