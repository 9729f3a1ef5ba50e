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

// world is one scenario's run: its stores, instances and series.
type world struct {
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
	series    []*series
	instances []*instance
	closers   []func() error
}

func (l *Lab) newWorld(ctx context.Context, sc Scenario, obs Observer) (*world, error) {
	hc := client.NewHTTPClient(0)
	if t, ok := hc.Transport.(*http.Transport); ok {
		t.MaxIdleConnsPerHost = 128 // a connection kept per buyer of the largest crowd
	}
	w := &world{ctx: ctx, lab: l, cfg: l.cfg, obs: obs, start: time.Now(), http: hc,
		prefix: "seckill-demo:" + rand.Text()[:8] + ":"}
	if sc.faults || len(l.cfg.RedisAddrs) == 0 {
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
func (w *world) auditOf(ctx context.Context, id string) (client.Audit, error) {
	w.mu.Lock()
	var found *series
	for _, s := range w.series {
		if s.id == id {
			found = s
		}
	}
	w.mu.Unlock()
	if found == nil {
		return client.Audit{}, fmt.Errorf("demo: no series %q in the last run", id)
	}
	a, err := found.seller.c.Audit(ctx, found.product)
	if err != nil {
		return client.Audit{}, fmt.Errorf("demo: audit %s: %w", id, err)
	}
	return a, nil
}

// close stops the instances, then closes the stores and the nodes.
func (w *world) close() error {
	w.mu.Lock()
	instances, closers := w.instances, w.closers
	w.instances, w.closers = nil, nil
	w.mu.Unlock()
	var errs []error
	for i := len(instances) - 1; i >= 0; i-- {
		errs = append(errs, instances[i].stop())
	}
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i]())
	}
	w.http.CloseIdleConnections()
	return errors.Join(errs...)
}

func (w *world) since() float64 { return time.Since(w.start).Seconds() }

func (w *world) emit(e Event) {
	if w.obs == nil {
		return
	}
	e.At = w.since()
	w.obs.Observe(e)
}

// note tells the observer what the scenario does now.
func (w *world) note(format string, args ...any) {
	w.emit(Event{Kind: "note", Text: fmt.Sprintf(format, args...)})
}

// clock is the clock one instance's setnx lock reads: real time, moved
// ahead on demand.
type clock struct{ ahead atomic.Int64 }

func (c *clock) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// jump moves the clock d ahead of real time.
func (c *clock) jump(d time.Duration) { c.ahead.Store(int64(d)) }

// setup is how an instance differs from the world's configuration.
type setup struct {
	// ttl, when not 0, is its lock lease (SECKILL_LOCK_TTL).
	ttl time.Duration
	// watchdog, when not nil, turns the watchdog on or off
	// (SECKILL_WATCHDOG), whatever the environment says: a scenario whose
	// lesson needs it says so.
	watchdog *bool
	// clock, when not nil, is what its setnx lock reads.
	clock *clock
	// ipLimit and ipWindow, when not 0, are its SECKILL_IP_LIMIT.
	ipLimit  int
	ipWindow time.Duration
	// reserve, when not empty, is its SECKILL_RESERVE_REDIS (one node, or
	// cluster:seeds); noWriter runs no reserve writer on it.
	reserve  string
	noWriter bool
	// acks and ackWait, when not 0, are its SECKILL_RESERVE_ACKS.
	acks    int
	ackWait time.Duration
	// paymentTimeout, when not 0, is its SECKILL_PAYMENT_TIMEOUT.
	paymentTimeout time.Duration
	// mysqlDSN, when not empty, is its SECKILL_MYSQL_DSN: a database other
	// than the world's, which only stores opened with it reach (startOn).
	mysqlDSN string
}

// apply returns the world's configuration and options as s changes them.
func (w *world) apply(s setup) (config.Config, app.Options) {
	cfg := w.cfg
	if s.ttl > 0 {
		cfg.LockTTL = s.ttl
	}
	if s.watchdog != nil {
		cfg.Watchdog = *s.watchdog
	}
	if s.ipLimit > 0 {
		cfg.IPLimit, cfg.IPWindow = s.ipLimit, s.ipWindow
	}
	if s.reserve != "" {
		cfg.ReserveAddrs, cfg.ReserveCluster = []string{s.reserve}, false
		if seeds, ok := strings.CutPrefix(s.reserve, "cluster:"); ok {
			cfg.ReserveAddrs, cfg.ReserveCluster = strings.Split(seeds, ","), true
		}
	}
	if s.acks > 0 {
		cfg.ReserveAcks, cfg.ReserveAckWait = s.acks, s.ackWait
	}
	if s.paymentTimeout > 0 {
		cfg.PaymentTimeout = s.paymentTimeout
	}
	if s.mysqlDSN != "" {
		cfg.MySQLDSN = s.mysqlDSN
	}
	opts := app.Options{KeyPrefix: w.prefix, NoWriter: s.noWriter}
	if s.clock != nil {
		opts.Clock = s.clock.now
	}
	return cfg, opts
}

// instance is one running instance of the service.
type instance struct {
	name string
	url  string
	srv  *app.Server
	c    *client.Client
	stop func() error
}

// startInstances starts n instances set up as s, over the world's stores.
func (w *world) startInstances(n int, s setup) ([]*instance, error) {
	cfg, opts := w.apply(s)
	var out []*instance
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
func (w *world) startKillable(s setup) (*instance, func() error, error) {
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
			return fmt.Errorf("demo: kill %s: %w", in.name, err)
		}
		return nil
	})
	w.mu.Lock()
	w.closers = append(w.closers, kill)
	w.mu.Unlock()
	return in, kill, nil
}

func (w *world) serve(cfg config.Config, st *app.Stores, opts app.Options) (*instance, error) {
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
	in := &instance{
		name: fmt.Sprintf("instance %d", len(w.instances)+1),
		url:  url,
		srv:  srv,
		c:    &client.Client{BaseURL: url, AdminToken: cfg.AdminToken, HTTP: w.http},
		stop: sync.OnceValue(func() error {
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
func (w *world) tick() (stop func()) {
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
func (w *world) readStock() {
	w.mu.Lock()
	all := append([]*series(nil), w.series...)
	var admin *instance
	if len(w.instances) > 0 {
		admin = w.instances[0]
	}
	w.mu.Unlock()
	if admin == nil || len(all) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, tickEvery*5)
	defer cancel()
	products, err := admin.c.Products(ctx)
	if err != nil {
		return // the next tick tries again; the page keeps the last stock
	}
	stock := map[int64]int64{}
	for _, p := range products {
		stock[p.ID] = p.Stock
	}
	for _, s := range all {
		s.mu.Lock()
		if v, ok := stock[s.product]; ok && s.audit == nil {
			s.stock = v
		}
		s.mu.Unlock()
	}
}

func (w *world) emitTick() {
	if w.obs == nil {
		return
	}
	w.mu.Lock()
	all := append([]*series(nil), w.series...)
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
func lockAcquired(ctx context.Context, in *instance, strategy string) (int, error) {
	m, err := in.c.Metrics(ctx)
	if err != nil {
		return 0, fmt.Errorf("demo: %w", err)
	}
	return int(m.Sum("seckill_lock_wait_seconds", "strategy", strategy, "result", "acquired")), nil
}

// waitAcquired waits until in has seen strategy's lock taken more than
// before times: a buyer holds it now. It gives up after limit.
func waitAcquired(ctx context.Context, in *instance, strategy string, before int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		n, err := lockAcquired(ctx, in, strategy)
		if err == nil && n > before {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: %s took no %s lock within %s: %w", in.name, strategy, limit, errors.Join(err, ctx.Err()))
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
