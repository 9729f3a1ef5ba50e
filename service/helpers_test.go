package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/store"
)

// strategies are every strategy that answers a purchase with its order
// (every one but reserve, whose tests are its own), in the order of
// service.StrategyTable.
var strategies = slices.DeleteFunc(service.StrategyNames(), func(name string) bool {
	st, _ := service.LookupStrategy(name)
	return st.Deferred()
})

// safeStrategies are the strategies the Guarantees call safe (with fencing
// on for the Redis locks) and exact together, in the table's order: the
// safe ones of strategies.
var safeStrategies = slices.DeleteFunc(slices.Clone(strategies), func(name string) bool {
	st, _ := service.LookupStrategy(name)
	return !st.Safe
})

func TestMain(m *testing.M) {
	// TestRedlockNodesDown makes thousands of failed dials on purpose.
	testenv.QuietRedis()
	os.Exit(m.Run())
}

// eachStrategy runs test once per strategy of names, each a parallel
// subtest named after it: the same cases against every strategy.
func eachStrategy(t *testing.T, names []string, test func(t *testing.T, strategy string)) {
	for _, strategy := range names {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			test(t, strategy)
		})
	}
}

// fixture is one test's share of the world: a database of its own, clients
// for Redis nodes and a key prefix of its own on them.
type fixture struct {
	t       testing.TB
	db      *gorm.DB
	addrs   []string
	clients []redis.UniversalClient
	prefix  string
}

// newFixture opens a fresh database and clients for addrs (the shared test
// nodes when nil), all closed or dropped when t ends.
func newFixture(t testing.TB, addrs []string) *fixture {
	t.Helper()
	return newFixtureDSN(t, addrs, testenv.MySQL(t))
}

// newFixtureDSN is newFixture on the database of dsn.
func newFixtureDSN(t testing.TB, addrs []string, dsn string) *fixture {
	t.Helper()
	if addrs == nil {
		addrs = testenv.RedisAddrs(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := store.OpenMySQL(ctx, dsn)
	if err != nil {
		t.Fatalf("OpenMySQL: %v", err)
	}
	// Many tests run at once against one server: a pool of 16 each keeps
	// them within its connection limit.
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.SetMaxOpenConns(16)
	}
	t.Cleanup(func() {
		if err := store.CloseSQL(db); err != nil {
			t.Errorf("close database: %v", err)
		}
	})
	if err := model.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	// The program's own clients: no retries, so a node that is down answers
	// at once.
	clients := store.OpenRedis(addrs)
	t.Cleanup(func() {
		if err := store.CloseRedis(clients); err != nil {
			t.Errorf("close redis: %v", err)
		}
	})
	return &fixture{t: t, db: db, addrs: addrs, clients: clients, prefix: testenv.KeyPrefix(t, addrs)}
}

// settings are what a test varies in an instance.
type settings struct {
	Strategy     string
	PerUserLimit int64
	Fencing      bool
	TTL          time.Duration // default 8s
	Wait         time.Duration // default 20s: long enough that nobody times out
	Batch        int           // default 100
	NoWatchdog   bool          // the watchdog is on unless this says otherwise
	// NoReleases leaves the instance's waiters without release messages:
	// they poll at their fallback delay.
	NoReleases bool
	// Fallback is the lockers' fallback delay (locker.Options.Fallback).
	Fallback time.Duration
	// Consumer names the instance's reserve writer (on the fixture's first
	// Redis node); NoWriter runs none.
	Consumer string
	NoWriter bool
	// DBTimeout bounds each database call (service.Config.DBTimeout).
	DBTimeout time.Duration
	// PaymentTimeout is how long orders wait for their payment; 0: they
	// are written paid.
	PaymentTimeout time.Duration
	// ReserveRedis, when not nil, is reserve's Redis (a cluster client,
	// say); nil is the fixture's first node.
	ReserveRedis redis.UniversalClient
	// ReserveAcks makes reservations wait for replicas
	// (service.Config.ReserveAcks).
	ReserveAcks reserve.Acks
	// Hooks force interleavings (service.Config.WithHooks).
	Hooks service.Hooks
}

// instance is one Seckill with its own lockers and metrics, as one process
// of the service would have.
type instance struct {
	svc     *service.Seckill
	lockers map[string]locker.Locker
	reg     *prometheus.Registry
	prefix  string
	db      *gorm.DB
}

// instance makes a Seckill over f's stores with lockers built as the
// program builds them (app.NewLockers), subscribed to the releases of f's
// keys; it is closed when t ends.
func (f *fixture) instance(s settings) *instance {
	if s.TTL == 0 {
		s.TTL = 8 * time.Second
	}
	if s.Wait == 0 {
		s.Wait = 20 * time.Second
	}
	if s.Strategy == "" {
		s.Strategy = "redlock"
	}
	var releases *locker.Releases
	if !s.NoReleases {
		releases = locker.NewReleases()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := releases.Subscribe(ctx, f.clients, f.prefix+"lock:"); err != nil {
			f.t.Fatalf("Releases.Subscribe: %v", err)
		}
	}
	lockers := app.NewLockers(config.Config{LockTTL: s.TTL, LockWait: s.Wait}, f.clients, releases)
	if s.Fallback > 0 {
		opts := locker.Options{TTL: s.TTL, Wait: s.Wait, Releases: releases, Fallback: s.Fallback}
		lockers["setnx"] = locker.NewSetNX(f.clients[0], opts, time.Now)
		lockers["token"] = locker.NewToken(f.clients[0], opts)
		lockers["redlock"] = locker.NewRedlock(f.clients, opts)
	}
	reg := prometheus.NewRegistry()
	svc := service.New(f.db, lockers, f.clients, service.Config{
		Consumer:       s.Consumer,
		NoWriter:       s.NoWriter,
		ReserveRedis:   s.ReserveRedis,
		ReserveAcks:    s.ReserveAcks,
		Strategy:       s.Strategy,
		PerUserLimit:   s.PerUserLimit,
		Fencing:        s.Fencing,
		LockWait:       s.Wait,
		KeyPrefix:      f.prefix,
		Batch:          s.Batch,
		LockTTL:        s.TTL,
		Watchdog:       !s.NoWatchdog,
		DBTimeout:      s.DBTimeout,
		PaymentTimeout: s.PaymentTimeout,
	}.WithHooks(s.Hooks), service.NewMetrics(reg), slog.New(slog.DiscardHandler))
	f.t.Cleanup(func() {
		svc.Close()
		if err := releases.Close(); err != nil {
			f.t.Errorf("close releases: %v", err)
		}
	})
	return &instance{svc: svc, lockers: lockers, reg: reg, prefix: f.prefix, db: f.db}
}

// lockKey is the Redis key (or local key) of a product's lock under
// strategy: each lock kind keeps keys of its own.
func (in *instance) lockKey(strategy string, productID int64) string {
	return in.prefix + "lock:" + strategy + ":product:" + strconv.FormatInt(productID, 10)
}

// metrics are the instance's metric families, read as a client of
// /metrics reads them.
func (in *instance) metrics(t testing.TB) client.Metrics {
	t.Helper()
	mfs, err := in.reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	m := client.Metrics{}
	for _, mf := range mfs {
		m[mf.GetName()] = mf
	}
	return m
}

// counter returns the value of seckill_purchases_total for strategy and
// outcome (0 when it was never incremented).
func (in *instance) counter(t testing.TB, strategy, outcome string) float64 {
	t.Helper()
	return in.metrics(t).Sum("seckill_purchases_total", "strategy", strategy, "outcome", outcome)
}

// lockWaits returns how many waits for strategy's lock on in ended with
// result (acquired, timeout, unavailable): seckill_lock_wait_seconds.
func (in *instance) lockWaits(t testing.TB, strategy, result string) float64 {
	t.Helper()
	return in.metrics(t).Sum("seckill_lock_wait_seconds", "strategy", strategy, "result", result)
}

// product creates a product with stock units.
func (in *instance) product(t testing.TB, stock int64) model.Product {
	t.Helper()
	p, err := in.svc.CreateProduct(context.Background(), "widget", stock)
	if err != nil {
		t.Fatalf("CreateProduct(widget, %d) = %v; want nil", stock, err)
	}
	return p
}

// audit returns the product's audit.
func (in *instance) audit(t testing.TB, id int64) service.Audit {
	t.Helper()
	a, err := in.svc.Audit(context.Background(), id)
	if err != nil {
		t.Fatalf("Audit(%d) = %v; want nil", id, err)
	}
	return a
}

// wantAudit fails t unless the product's audit is want.
func (in *instance) wantAudit(t testing.TB, want service.Audit) {
	t.Helper()
	if got := in.audit(t, want.ProductID); got != want {
		t.Errorf("Audit(%d) = %+v; want %+v", want.ProductID, got, want)
	}
}

// consistentAudit is the audit of a product with initial units of which
// sold were sold by as many orders of one unit.
func consistentAudit(id, initial, sold int64) service.Audit {
	return service.Audit{ProductID: id, InitialStock: initial, Stock: initial - sold,
		Orders: sold, UnitsSold: sold, Consistent: true}
}

// attempt is one purchase through one instance.
type attempt struct {
	svc *service.Seckill
	p   service.Purchase
}

// result is what one purchase answered.
type result struct {
	p   service.Purchase
	r   service.Receipt
	err error
}

// purchaseAll runs every attempt in a goroutine of its own, all released at
// once, and returns the results in the attempts' order. The goroutines only
// report; the test judges.
func purchaseAll(ctx context.Context, attempts []attempt) []result {
	out := make([]result, len(attempts))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range attempts {
		wg.Go(func() {
			<-start
			r, err := a.svc.Purchase(ctx, a.p)
			out[i] = result{p: a.p, r: r, err: err}
		})
	}
	close(start)
	wg.Wait()
	return out
}

// buyers is n purchases of one unit of product through svc, each by a user
// of its own, each doing work inside the lock.
func buyers(svc *service.Seckill, product int64, strategy string, n int, work time.Duration) []attempt {
	as := make([]attempt, n)
	for i := range as {
		as[i] = attempt{svc: svc, p: service.Purchase{ProductID: product, UserID: fmt.Sprintf("u-%d", i),
			Quantity: 1, Strategy: strategy, Work: work}}
	}
	return as
}

// show formats a purchase for failure messages.
func show(p service.Purchase) string {
	s := fmt.Sprintf("product %d, user %q, quantity %d", p.ProductID, p.UserID, p.Quantity)
	if p.RequestID != "" {
		s += fmt.Sprintf(", request %q", p.RequestID)
	}
	if p.Strategy != "" {
		s += ", " + p.Strategy
	}
	if p.Work != 0 {
		s += ", work " + p.Work.String()
	}
	if p.Fencing != nil {
		s += fmt.Sprintf(", fencing %v", *p.Fencing)
	}
	return s
}

func ptr[T any](v T) *T { return &v }
