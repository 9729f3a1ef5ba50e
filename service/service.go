// Package service is the business rule of a flash sale, with no HTTP in it:
// products, purchases under the chosen strategy, the audit of the stock
// invariant and readiness.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/combine"
	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/service/metrics"
	"github.com/seckill/seckill/service/orders"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/service/reservewriter"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

// Config holds the service's settings.
type Config struct {
	// Strategy is used when a purchase names none.
	Strategy string
	// PerUserLimit is the most units one user may buy of one product; 0 is
	// no limit.
	PerUserLimit int64
	// Fencing guards the stock writes of the Redis locks with a fencing
	// token unless a purchase says otherwise.
	Fencing bool
	// LockWait bounds the wait for a lock, pessimistic's row lock included.
	// The default is locker.DefaultWait.
	LockWait time.Duration
	// KeyPrefix starts every Redis key the service makes. The default is
	// DefaultKeyPrefix.
	KeyPrefix string
	// EmbeddedSQL says the database is the embedded SQLite, which changes
	// what pessimistic means (SQLite has no SELECT ... FOR UPDATE).
	EmbeddedSQL bool
	// Batch is the most purchases of one product sold under one hold of its
	// lock: the buyers waiting on this instance are combined. The default
	// is DefaultBatch; 1 is one lock per purchase.
	Batch int
	// LockTTL is the lease of the locks; Watchdog renews the leases of the
	// strategies that have one every LockTTL/3 while their holder works.
	// The default LockTTL is locker.DefaultTTL.
	LockTTL  time.Duration
	Watchdog bool
	// DBTimeout bounds every database call (the wait for a pooled
	// connection included), beyond the purchases' work and pause and the
	// lock wait a call may have to include. The default is
	// DefaultDBTimeout.
	DBTimeout time.Duration
	// ReserveRedis is the Redis of the reserve strategy; nil is the first
	// of the Redis nodes New is given (none: reserve answers unavailable).
	// The instance joins its writers (package reservewriter).
	ReserveRedis redis.UniversalClient
	// ReserveAcks makes every reservation wait for that many replicas of
	// ReserveRedis to acknowledge it: one they did not acknowledge in time
	// answers outcome_unknown (reserve.Acks). The zero value waits for
	// none.
	ReserveAcks reserve.Acks
	// Consumer names this instance among the writers; the default is a
	// random name.
	Consumer string
	// NoWriter says this instance writes no reservations: it sells under
	// reserve, and the writers of other instances write what it sold.
	NoWriter bool
	// PaymentTimeout is how long an order may stay unpaid: orders are
	// written unpaid, and expire that long after (package orders). 0: orders
	// are written paid and never expire.
	PaymentTimeout time.Duration

	// hooks are for tests only.
	hooks hooks
}

// hooks are points in the code where a test forces an interleaving of
// events that timing alone would make rare; all nil outside tests.
type hooks struct {
	// ordersRead runs in the stock cache between the read of a sold-out
	// product's request IDs and keeping them.
	ordersRead func(product int64)
	// resetHeard runs after a reset announcement was applied, or ignored.
	resetHeard func(product, gen int64)
	// committed runs after a sale was answered (committed, or with nothing
	// to write) and before it tells the stock cache the stock it left.
	committed func(product int64)
	// tripGroup runs when a sender has gathered a group of one-trip
	// purchases, before it sends them.
	tripGroup func(size int)
	// returned runs after a return's COMMIT, before its units go back to
	// reserve's counter in Redis; true stops there, as an instance that
	// died between the two stores would.
	returned func(product int64) bool
	// batchTrips runs when a sale was answered by the MySQL form's three
	// trips (committed, or nothing to write), before the stock cache
	// hears of it.
	batchTrips func(product int64)
}

// readsAtStart says db is a server whose plain reads in a transaction see
// its start (TiDB), as gorm's MySQL dialector read its version at open.
func readsAtStart(db *gorm.DB) bool {
	d, ok := db.Dialector.(*gormmysql.Dialector)
	return ok && strings.Contains(d.ServerVersion, "TiDB")
}

// Seckill sells products under the strategy each purchase asks for.
type Seckill struct {
	// orders is the orders' life after their sale: reading, paying,
	// cancelling and expiring them.
	orders *orders.Service

	db *gorm.DB
	// sales writes every sale, in the form of db's database (salestore.Open),
	// with the settings saleCfg (which the other transactions that try
	// again on a deadlock share).
	sales   salestore.Store
	saleCfg salestore.Config
	lockers map[string]locker.Locker
	redis   []redis.UniversalClient
	cfg     Config
	metrics *metrics.Metrics
	log     *slog.Logger

	lines *lines
	// cache is what this instance has seen of each product's stock.
	cache *stockcache.Cache
	// reserve is the reserve strategy's Redis side; nil when not set up.
	reserve *reserve.Store
	// writer writes reserve's reservations to the database; nil when
	// reserve has no Redis.
	writer *reservewriter.Writer
	// moving makes one move of a product into Redis at a time
	// (loadReserve).
	moving singleflight.Group
	// reserveLines send the reserve purchases of a product waiting at
	// once to Redis in one call.
	reserveLines *reserveLines
	stop         context.CancelFunc
	background   sync.WaitGroup
}

// New returns a Seckill over db. lockers holds the lock of every lock-based
// strategy by name (local, setnx, token, redlock); redis are the nodes
// readiness checks and stock resets are announced on. It chooses db's sale
// store and starts the stock cache's refresher and the listeners of
// reset announcements: Close stops them.
func New(db *gorm.DB, lockers map[string]locker.Locker, redis []redis.UniversalClient, cfg Config, m *metrics.Metrics, log *slog.Logger) *Seckill {
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = DefaultKeyPrefix
	}
	if cfg.LockWait <= 0 {
		cfg.LockWait = locker.DefaultWait
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = locker.DefaultTTL
	}
	if cfg.DBTimeout <= 0 {
		cfg.DBTimeout = DefaultDBTimeout
	}
	s := &Seckill{db: db, lockers: lockers, redis: redis, cfg: cfg, metrics: m, log: log}
	s.cache = stockcache.New(stockcache.Config{DB: db, DBTimeout: cfg.DBTimeout, Redis: redis, Channel: cfg.KeyPrefix + "stock",
		SoldOut: soldOut, Seen: m.Stock, Log: log, OrdersRead: cfg.hooks.ordersRead, ResetHeard: cfg.hooks.resetHeard})
	s.saleCfg = salestore.Config{Limit: cfg.PerUserLimit, DBTimeout: cfg.DBTimeout,
		PaymentTimeout: cfg.PaymentTimeout, LockingReads: readsAtStart(db), ReadBackIDs: readsAtStart(db), TripGroup: cfg.hooks.tripGroup, BatchTrips: cfg.hooks.batchTrips, Log: log, Retried: m.Retried}
	s.sales = salestore.Open(db, s.saleCfg)
	s.lines = s.newLines()
	s.reserveLines = combine.New(s.serveReserve)
	if cfg.ReserveRedis == nil && len(redis) > 0 {
		cfg.ReserveRedis = redis[0]
		s.cfg.ReserveRedis = redis[0]
	}
	if cfg.ReserveRedis != nil {
		s.reserve = reserve.New(cfg.ReserveRedis, cfg.KeyPrefix).WithAcks(cfg.ReserveAcks)
		if s.cfg.Consumer == "" {
			s.cfg.Consumer = salestore.NewRequestID() // 128 random bits
		}
		s.writer = reservewriter.New(reservewriter.Config{DB: db, DBTimeout: cfg.DBTimeout, Reserve: s.reserve,
			Metrics: m, Log: log, Consumer: s.cfg.Consumer, Write: s.writeReservations, WriteMany: s.writeManyReservations})
	}
	s.orders = orders.New(orders.Config{DB: db, DBTimeout: cfg.DBTimeout, Cache: s.cache, Metrics: m, Log: log,
		Reserve: s.reserve, Product: s.Product, Returned: cfg.hooks.returned,
		Retry: func(ctx context.Context, fn func() error) error { return salestore.RetryDeadlocks(ctx, s.saleCfg, fn) }})
	// The background work starts once everything it reads is set.
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.background.Go(func() { s.cache.Run(ctx) })
	s.background.Go(func() { s.orders.Sweep(ctx) })
	if s.reserve != nil && !cfg.NoWriter {
		s.background.Go(func() { s.writer.Run(ctx) })
	}
	return s
}

// dbCtx bounds a database call: DBTimeout, plus extra for the work and
// pause or the lock wait the call includes.
func (s *Seckill) dbCtx(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.DBTimeout+extra)
}

// Close stops the service's background work once every line's leader has
// finished: call it after the last purchase has returned. A purchase that
// would wait in line after Close has begun answers unavailable.
func (s *Seckill) Close() {
	s.lines.Close()
	s.reserveLines.Close()
	s.stop()
	s.background.Wait()
	s.sales.Close()
}

// DependencyError says which dependency is down.
type DependencyError struct {
	Dependency string
	Err        error
}

func (e *DependencyError) Error() string { return e.Dependency + ": " + e.Err.Error() }
func (e *DependencyError) Unwrap() error { return e.Err }

// Ready reports whether the database and a majority of the Redis nodes
// answer. Its error is a *DependencyError naming the first one that is down.
func (s *Seckill) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	sqlDB, err := s.db.DB()
	if err == nil {
		err = sqlDB.PingContext(ctx)
	}
	if err != nil {
		return &DependencyError{Dependency: "database", Err: err}
	}
	if len(s.redis) == 0 {
		return nil
	}
	up := make(chan bool, len(s.redis))
	for _, c := range s.redis {
		go func() { up <- c.Ping(ctx).Err() == nil }()
	}
	n := 0
	for range s.redis {
		if <-up {
			n++
		}
	}
	if need := len(s.redis)/2 + 1; n < need {
		return &DependencyError{Dependency: "redis",
			Err: fmt.Errorf("%d of %d nodes answer, a majority needs %d", n, len(s.redis), need)}
	}
	return nil
}
