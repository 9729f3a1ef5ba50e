package demo

import (
	"context"
	"crypto/rand"
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
	"github.com/seckill/seckill/store"
)

// World is one scenario's run: its stores, instances and series.
type World struct {
	ctx    context.Context
	lab    *Lab
	cfg    config.Config
	stores *app.Stores
	// nodes are the Redis nodes when they are embedded (nil on real
	// Redis): scenarios stop and restart them.
	nodes *store.MiniRedis
	obs   Observer
	start time.Time
	http  *http.Client
	users atomic.Int64
	// prefix starts the Redis keys of the world's instances: a real Redis
	// may hold another service's locks of the same product ids.
	prefix string

	mu        sync.Mutex
	series    []*Series
	instances []*Instance
	closers   []func() error
}

func (l *Lab) newWorld(ctx context.Context, sc Scenario, obs Observer) (*World, error) {
	hc := client.NewHTTPClient(0)
	if t, ok := hc.Transport.(*http.Transport); ok {
		t.MaxIdleConnsPerHost = 128 // a connection kept per buyer of the largest crowd
	}
	w := &World{ctx: ctx, lab: l, cfg: l.cfg, obs: obs, start: time.Now(), http: hc,
		prefix: "seckill-demo:" + rand.Text()[:8] + ":"}
	if sc.Faults || len(l.cfg.RedisAddrs) == 0 {
		nodes, err := store.StartMiniRedisNodes(store.EmbeddedRedisNodes)
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		w.nodes = nodes
		w.cfg.RedisAddrs = nodes.Addrs()
		w.closers = append(w.closers, nodes.Close)
	}
	st, err := app.OpenStores(ctx, w.cfg, l.log)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("demo: %w", err), w.close())
	}
	app.WarnEmbedded(l.log, w.cfg.MySQLDSN == "", w.nodes != nil)
	w.stores = st
	w.closers = append(w.closers, st.Close)
	return w, nil
}

// auditOf reads the audit of the series called id from the instance that
// sold it, with the admin token.
func (w *World) auditOf(ctx context.Context, id string) (client.Audit, error) {
	w.mu.Lock()
	var found *Series
	for _, s := range w.series {
		if s.ID == id {
			found = s
		}
	}
	w.mu.Unlock()
	if found == nil {
		return client.Audit{}, fmt.Errorf("demo: no series %q in the last run", id)
	}
	a, err := found.Seller.Client.Audit(ctx, found.Product)
	if err != nil {
		return client.Audit{}, fmt.Errorf("demo: audit %s: %w", id, err)
	}
	return a, nil
}

// close stops the instances, then closes the stores and the nodes.
func (w *World) close() error {
	w.mu.Lock()
	instances, closers := w.instances, w.closers
	w.instances, w.closers = nil, nil
	w.mu.Unlock()
	var errs []error
	for i := len(instances) - 1; i >= 0; i-- {
		errs = append(errs, instances[i].Stop())
	}
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i]())
	}
	w.http.CloseIdleConnections()
	return errors.Join(errs...)
}

func (w *World) since() float64 { return time.Since(w.start).Seconds() }

func (w *World) emit(e Event) {
	if w.obs == nil {
		return
	}
	e.At = w.since()
	w.obs.Observe(e)
}

// note tells the observer what the scenario does now.
func (w *World) Note(format string, args ...any) {
	w.emit(Event{Kind: "note", Text: fmt.Sprintf(format, args...)})
}

// Clock is the Clock one instance's setnx lock reads: real time, moved
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

// Instance is one running Instance of the service.
type Instance struct {
	Name   string
	URL    string
	srv    *app.Server
	Client *client.Client
	Stop   func() error
}

// startInstances starts n instances set up as s, over the world's stores.
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

// startKillable starts an instance set up as s on connections of its own
// to the world's stores, and returns with it a kill that cuts it off at
// once, as when its process dies: its listener and connections closed, its
// database and Redis connections closed under it, so that it never writes,
// unlocks or renews a lease again.
func (w *World) StartKillable(s Setup) (*Instance, func() error, error) {
	cfg, opts := w.apply(s)
	own, err := w.stores.Share(w.ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("demo: %w", err)
	}
	in, err := w.serve(cfg, own, opts)
	if err != nil {
		return nil, nil, errors.Join(err, own.Close())
	}
	kill := sync.OnceValue(func() error {
		err := errors.Join(in.srv.HTTP.Close(), own.Close())
		if err != nil {
			return fmt.Errorf("demo: kill %s: %w", in.Name, err)
		}
		return nil
	})
	w.mu.Lock()
	w.closers = append(w.closers, kill)
	w.mu.Unlock()
	return in, kill, nil
}

func (w *World) serve(cfg config.Config, st *app.Stores, opts app.Options) (*Instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: listen: %w", err)
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
		URL:    url,
		srv:    srv,
		Client: &client.Client{BaseURL: url, AdminToken: cfg.AdminToken, HTTP: w.http},
		Stop: sync.OnceValue(func() error {
			cancel()
			// A killed instance's server is closed already: not news.
			if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("demo: %s: %w", url, err)
			}
			return nil
		}),
	}
	w.instances = append(w.instances, in)
	return in, nil
}

// tickEvery is how often an observer is told how every series stands.
const tickEvery = 100 * time.Millisecond

// tick tells the observer, every tickEvery, the stock of every series (one
// read of the product list) and its answers so far, until the returned
// func is called.
func (w *World) tick() (stop func()) {
	if w.obs == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(tickEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				w.readStock()
				w.emitTick()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// readStock reads the stock of every series that has no audit yet, from
// the first instance started: a scenario that kills instances starts
// another first.
func (w *World) readStock() {
	w.mu.Lock()
	all := append([]*Series(nil), w.series...)
	var admin *Instance
	if len(w.instances) > 0 {
		admin = w.instances[0]
	}
	w.mu.Unlock()
	if admin == nil || len(all) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, tickEvery*5)
	defer cancel()
	products, err := admin.Client.Products(ctx)
	if err != nil {
		return // the next tick tries again; the page keeps the last stock
	}
	stock := map[int64]int64{}
	for _, p := range products {
		stock[p.ID] = p.Stock
	}
	for _, s := range all {
		s.mu.Lock()
		if v, ok := stock[s.Product]; ok && s.audit == nil {
			s.stock = v
		}
		s.mu.Unlock()
	}
}

func (w *World) emitTick() {
	if w.obs == nil {
		return
	}
	w.mu.Lock()
	all := append([]*Series(nil), w.series...)
	w.mu.Unlock()
	if len(all) == 0 {
		return // nothing on sale yet
	}
	now := time.Now()
	snaps := make([]Snapshot, len(all))
	for i, s := range all {
		snaps[i] = s.snapshot(now)
	}
	w.emit(Event{Kind: "tick", Series: snaps})
}

// lockAcquired returns how many purchases in has seen take strategy's lock:
// the service counts each when its hold begins, before its work.
func lockAcquired(ctx context.Context, in *Instance, strategy string) (int, error) {
	m, err := in.Client.Metrics(ctx)
	if err != nil {
		return 0, fmt.Errorf("demo: %w", err)
	}
	return int(m.Sum("seckill_lock_wait_seconds", "strategy", strategy, "result", "acquired")), nil
}

// waitAcquired waits until in has seen strategy's lock taken more than
// before times: a buyer holds it now. It gives up after limit.
func waitAcquired(ctx context.Context, in *Instance, strategy string, before int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		n, err := lockAcquired(ctx, in, strategy)
		if err == nil && n > before {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: %s took no %s lock within %s: %w", in.Name, strategy, limit, errors.Join(err, ctx.Err()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
