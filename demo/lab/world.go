package lab

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/every"
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
			return nil, fmt.Errorf("lab: %w", err)
		}
		w.nodes = nodes
		w.cfg.RedisAddrs = nodes.Addrs()
		w.closers = append(w.closers, nodes.Close)
	}
	st, err := app.OpenStores(ctx, w.cfg, l.log)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("lab: %w", err), w.Close())
	}
	app.WarnEmbedded(l.log, w.cfg.MySQLDSN == "", w.nodes != nil)
	w.stores = st
	w.closers = append(w.closers, st.Close)
	return w, nil
}

// AuditOf reads the audit of the series called id from the instance that
// sold it, with the admin token.
func (w *World) AuditOf(ctx context.Context, id string) (client.Audit, error) {
	w.mu.Lock()
	var found *Series
	for _, s := range w.series {
		if s.ID == id {
			found = s
		}
	}
	w.mu.Unlock()
	if found == nil {
		return client.Audit{}, fmt.Errorf("lab: no series %q in the last run", id)
	}
	a, err := found.Seller.Client.Audit(ctx, found.Product)
	if err != nil {
		return client.Audit{}, fmt.Errorf("lab: audit %s: %w", id, err)
	}
	return a, nil
}

// Close stops the instances, then closes the stores and the nodes.
func (w *World) Close() error {
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

// Note tells the observer what the scenario does now.
func (w *World) Note(format string, args ...any) {
	w.emit(Event{Kind: "note", Text: fmt.Sprintf(format, args...)})
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
	return every.Start(tickEvery, func() {
		w.readStock()
		w.emitTick()
	})
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

// Context is the world's: it ends when the scenario is cancelled.
func (w *World) Context() context.Context { return w.ctx }

// Nodes are the embedded Redis nodes, which a scenario stops and restarts;
// nil on a real Redis (SECKILL_REDIS_ADDRS) unless the scenario's Faults
// asks for nodes of its own.
func (w *World) Nodes() *store.MiniRedis { return w.nodes }

// Redis are clients of the world's Redis nodes, in order.
func (w *World) Redis() []redis.UniversalClient { return w.stores.Redis }

// PaymentSecret is the world's SECKILL_PAYMENT_SECRET: when set, its
// instances take orders' payments only by the provider's signed callback.
func (w *World) PaymentSecret() string { return w.cfg.PaymentSecret }

// KeyPrefix starts the Redis keys of the world's instances.
func (w *World) KeyPrefix() string { return w.prefix }

// OnClose has close run when the world closes, after its instances stop
// and before its stores close, the last registered first.
func (w *World) OnClose(close func() error) {
	w.mu.Lock()
	w.closers = append(w.closers, close)
	w.mu.Unlock()
}

// Settle waits until every Redis node answers a PING again after a
// restart, so that the next round starts with every node up.
func (w *World) Settle() error {
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	for i, c := range w.stores.Redis {
		for c.Ping(ctx).Err() != nil {
			if err := Sleep(ctx, 10*time.Millisecond); err != nil {
				return fmt.Errorf("lab: Redis node %d does not answer: %w", i+1, err)
			}
		}
	}
	return nil
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
