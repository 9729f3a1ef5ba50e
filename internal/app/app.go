// Package app wires one instance of the service: the stores every instance
// of a process shares, and an HTTP server with its own lockers, metrics,
// service and routes. The program, the demo and the end-to-end tests all
// start instances through it, so that what they test is what runs.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/controller"
	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/store"
)

// LoadConfig reads the configuration (config.Load) and checks the names in
// it against the service's: SECKILL_LOCK must name a strategy. Its errors
// name the variable.
func LoadConfig(getenv func(string) string, demo bool) (config.Config, error) {
	cfg, err := config.Load(getenv, demo)
	if err != nil {
		return config.Config{}, err
	}
	if _, ok := service.LookupStrategy(cfg.Strategy); !ok {
		return config.Config{}, fmt.Errorf("config: SECKILL_LOCK %q: unknown strategy (one of %s)",
			cfg.Strategy, strings.Join(service.StrategyNames(), ", "))
	}
	return cfg, nil
}

// Stores are what every instance of a process shares: the database and the
// Redis nodes.
type Stores struct {
	DB    *gorm.DB
	Redis []redis.UniversalClient
	// Reserve is the reserve strategy's Redis (SECKILL_RESERVE_REDIS);
	// nil: the first of Redis.
	Reserve redis.UniversalClient
	// Embedded says the database is the embedded SQLite.
	Embedded bool
	close    func() error
}

// Close closes the Redis clients and the database (and stops the embedded
// stores).
func (s *Stores) Close() error { return s.close() }

// OpenStores opens the database and the Redis nodes of cfg and migrates the
// tables. Empty settings open the embedded stores, which it says once.
func OpenStores(ctx context.Context, cfg config.Config, log *slog.Logger) (*Stores, error) {
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A statement waits at most the lock wait (a row lock) and a database
	// call's bound: past both, the connection is given up on.
	db, closeDB, err := store.OpenSQL(openCtx, cfg.MySQLDSN, store.MySQLMaxConns(cfg.MySQLMaxConns),
		store.MySQLIOTimeout(cfg.LockWait+config.DefaultDBTimeout))
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := model.Migrate(openCtx, db); err != nil {
		return nil, errors.Join(err, closeDB())
	}
	clients, closeRedis, err := store.OpenRedisNodes(openCtx, cfg.RedisAddrs)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open redis: %w", err), closeDB())
	}
	return withReserve(cfg, db, clients, cfg.MySQLDSN == "", closeDB, closeRedis), nil
}

// withReserve is the stores db (closed by closeDB) and clients (by
// closeRedis), with reserve's Redis opened when cfg names one: closing
// them closes all three.
func withReserve(cfg config.Config, db *gorm.DB, clients []redis.UniversalClient, embedded bool, closeDB, closeRedis func() error) *Stores {
	var reserve redis.UniversalClient
	if len(cfg.ReserveAddrs) > 0 {
		reserve = store.OpenReserveRedis(cfg.ReserveAddrs, cfg.ReserveCluster)
		closeRedis = closeBoth(closeRedis, reserve)
	}
	return &Stores{
		DB:       db,
		Redis:    clients,
		Reserve:  reserve,
		Embedded: embedded,
		close:    func() error { return errors.Join(closeRedis(), closeDB()) },
	}
}

// Share opens connections of its own to the same stores: a new pool on the
// same database (the same file, for the embedded SQLite) and new clients to
// the same Redis nodes. Closing it closes only those: an instance that runs
// on them can be cut off from every store at once, as if its process had
// died, while the others go on.
func (s *Stores) Share(ctx context.Context, cfg config.Config) (*Stores, error) {
	var (
		db  *gorm.DB
		err error
	)
	if s.Embedded {
		db, err = store.Reopen(ctx, s.DB)
	} else {
		db, err = store.OpenMySQL(ctx, cfg.MySQLDSN, store.MySQLMaxConns(cfg.MySQLMaxConns),
			store.MySQLIOTimeout(cfg.LockWait+config.DefaultDBTimeout))
	}
	if err != nil {
		return nil, fmt.Errorf("share the database: %w", err)
	}
	addrs := make([]string, len(s.Redis))
	for i, c := range s.Redis {
		cl, ok := c.(*redis.Client)
		if !ok {
			return nil, errors.Join(fmt.Errorf("share redis node %d: not a single-node client", i), store.CloseSQL(db))
		}
		addrs[i] = cl.Options().Addr
	}
	clients := store.OpenRedis(addrs)
	closeRedis := func() error { return store.CloseRedis(clients) }
	return withReserve(cfg, db, clients, s.Embedded, func() error { return store.CloseSQL(db) }, closeRedis), nil
}

// closeBoth closes the clients closeRedis closes, and c.
func closeBoth(closeRedis func() error, c redis.UniversalClient) func() error {
	return func() error {
		var err error
		if e := c.Close(); e != nil {
			err = fmt.Errorf("close the reserve redis: %w", e)
		}
		return errors.Join(closeRedis(), err)
	}
}

// Options are the settings of an instance that the environment does not
// give.
type Options struct {
	// KeyPrefix starts every Redis key the instance makes; instances that
	// sell the same products must share it. The default is config.DefaultKeyPrefix.
	KeyPrefix string
	// Clock is the clock setnx's lock reads (the recipe trusts every
	// client's clock); nil is time.Now. The demo moves it to show a clock
	// that runs ahead.
	Clock func() time.Time
	// Buyers verifies buyers' tokens (OpenBuyers); nil: the buyer is the
	// user_id a client sends (SECKILL_BUYER_AUTH=open).
	Buyers *buyer.Verifier
	// NoWriter: the instance sells under reserve but writes no
	// reservations; other instances' writers write what it sold. The demo
	// holds promises unwritten with it.
	NoWriter bool
}

// Server is one instance: its HTTP server and the service behind it.
type Server struct {
	HTTP     *http.Server
	svc      *service.Seckill
	releases *locker.Releases
	drain    *controller.Drain
}

// NewServer wires one instance over st: its own lockers (local's locks are
// per instance: two instances in one process do not share them), the
// subscription that wakes its waiters when a lock is released
// on any instance, metrics registry, service and routes. The HTTP server has
// timeouts that leave room for a lock wait and the longest hold_ms. Close
// the Server after its HTTP server has shut down.
func NewServer(ctx context.Context, cfg config.Config, st *Stores, log *slog.Logger, opts Options) *Server {
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = config.DefaultKeyPrefix
	}
	releases := locker.NewReleases()
	subCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := releases.Subscribe(subCtx, st.Redis, opts.KeyPrefix+"lock:"); err != nil {
		// Waiters fall back to polling; the locks themselves still work.
		log.Warn("no Redis node answers the release subscription; waiters will poll", "err", err)
	}
	if cfg.ReserveAcks > 0 {
		warnFewReplicas(subCtx, log, st.Reserve, st.Redis, cfg.ReserveAcks)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo())
	svc := service.New(st.DB, newLockers(cfg, st.Redis, releases, opts.Clock), st.Redis, service.Config{
		Strategy:       cfg.Strategy,
		PerUserLimit:   int64(cfg.PerUserLimit),
		Fencing:        cfg.Fencing,
		LockWait:       cfg.LockWait,
		KeyPrefix:      opts.KeyPrefix,
		EmbeddedSQL:    st.Embedded,
		Batch:          cfg.Batch,
		LockTTL:        cfg.LockTTL,
		Watchdog:       cfg.Watchdog,
		ReserveRedis:   st.Reserve,
		ReserveAcks:    reserve.Acks{Replicas: cfg.ReserveAcks, Timeout: cfg.ReserveAckWait},
		NoWriter:       opts.NoWriter,
		PaymentTimeout: cfg.PaymentTimeout,
	}, service.NewMetrics(reg), log)
	var limiter *controller.IPLimiter
	if cfg.IPLimit > 0 {
		// One count for every instance: on the first node, as the
		// single-node locks.
		limiter = controller.NewIPLimiter(st.Redis[0], cfg.IPLimit, cfg.IPWindow, opts.KeyPrefix, reg, log)
	}
	drain := &controller.Drain{}
	router := controller.NewRouter(svc, log, controller.Options{
		AdminToken:       cfg.AdminToken,
		StrategyOverride: cfg.StrategyOverride,
		Gatherer:         reg,
		Registerer:       reg,
		Strategy:         cfg.Strategy,
		Drain:            drain,
		IPLimiter:        limiter,
		TrustedProxies:   cfg.TrustedProxies,
		Buyers:           controller.NewBuyers(opts.Buyers),
		Payments:         controller.NewPayments(cfg.PaymentSecret, nil),
	})
	return &Server{
		HTTP: &http.Server{
			Handler:           router,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      service.PurchaseBudget(cfg.LockWait, 0) + 5*time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		svc:      svc,
		releases: releases,
		drain:    drain,
	}
}

// Close stops the service's background work and the release subscription.
func (s *Server) Close() error {
	s.svc.Close()
	return s.releases.Close()
}

// NewLockers makes the lock of every lock-based strategy: local in this
// process, setnx and token on the first Redis node, redlock on all of them.
// releases wakes their waiters (nil: they poll).
func NewLockers(cfg config.Config, clients []redis.UniversalClient, releases *locker.Releases) map[string]locker.Locker {
	return newLockers(cfg, clients, releases, time.Now)
}

// newLockers is NewLockers with setnx reading now (time.Now when nil).
func newLockers(cfg config.Config, clients []redis.UniversalClient, releases *locker.Releases, now func() time.Time) map[string]locker.Locker {
	opts := locker.Options{TTL: cfg.LockTTL, Wait: cfg.LockWait, Releases: releases}
	return map[string]locker.Locker{
		"local":   locker.NewLocal(opts),
		"setnx":   locker.NewSetNX(clients[0], opts, now),
		"token":   locker.NewToken(clients[0], opts),
		"redlock": locker.NewRedlock(clients, opts),
	}
}

// DrainBudget is the longest an instance takes to stop once its context
// ends: cfg.DrainDelay of accepting while requests are in flight, then the
// longest purchase (service.PurchaseBudget) and its unlock. A container's
// stop grace period must be longer.
func DrainBudget(cfg config.Config) time.Duration {
	return cfg.DrainDelay + shutdownTimeout(cfg)
}

// shutdownTimeout is how long the requests in flight may take to finish:
// the longest purchase, and its unlock.
func shutdownTimeout(cfg config.Config) time.Duration {
	return service.PurchaseBudget(cfg.LockWait, 0) + 3*time.Second
}

// Serve serves srv on ln until ctx ends, then drains: /readyz answers 503
// at once and keep-alive connections close after their answer; while
// requests are in flight the instance keeps accepting new ones, for at most
// cfg.DrainDelay, so that a balancer that polls /readyz stops sending work
// first; then it stops accepting, the requests in flight finish (purchases
// release their locks) and srv closes. It all fits DrainBudget.
func Serve(ctx context.Context, srv *Server, ln net.Listener, cfg config.Config, log *slog.Logger) (err error) {
	defer func() { err = errors.Join(err, srv.Close()) }()
	errc := make(chan error, 1)
	go func() { errc <- srv.HTTP.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	srv.drain.Start()
	srv.HTTP.SetKeepAlivesEnabled(false)
	log.Info("seckill draining: /readyz answers 503; waiting for the requests in flight, drain_delay at most",
		"in_flight", srv.drain.InFlight(), "drain_delay", cfg.DrainDelay)
	waitIdle(srv.drain, cfg.DrainDelay)
	log.Info("seckill shutting down", "in_flight", srv.drain.InFlight())
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout(cfg))
	defer cancel()
	if err := srv.HTTP.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("seckill stopped")
	return nil
}

// waitIdle returns once no request is in flight, or after at most d.
func waitIdle(drain *controller.Drain, d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for drain.InFlight() > 0 {
		select {
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// warnFewReplicas logs a warning for each master of reserve's Redis (the
// first Redis node when reserve has none of its own) with fewer than n
// replicas connected now: SECKILL_RESERVE_ACKS waits for n, so every
// reserve purchase of its keys would answer 503 until they are there.
func warnFewReplicas(ctx context.Context, log *slog.Logger, rdb redis.UniversalClient, nodes []redis.UniversalClient, n int) {
	if rdb == nil && len(nodes) > 0 {
		rdb = nodes[0]
	}
	check := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		for l := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "connected_slaves:"); ok {
				if got, err := strconv.Atoi(v); err == nil && got < n {
					log.Warn("SECKILL_RESERVE_ACKS waits for more replicas than this master of reserve's Redis has: its reservations answer 503 until they connect",
						"master", c.Options().Addr, "replicas", got, "waits_for", n)
				}
			}
		}
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	}
	if err != nil {
		log.Warn("could not count the replicas of reserve's Redis for SECKILL_RESERVE_ACKS", "err", err)
	}
}

// WarnEmbedded logs, when either store is embedded, which: the program's
// (SECKILL_MYSQL_DSN or SECKILL_REDIS_ADDRS unset) or the demo's, which
// starts embedded Redis nodes of its own and passes their addresses.
func WarnEmbedded(log *slog.Logger, sql, redis bool) {
	if sql || redis {
		log.Warn("running on embedded stores: set SECKILL_MYSQL_DSN and SECKILL_REDIS_ADDRS for real MySQL and Redis",
			"embedded_sql", sql, "embedded_redis", redis)
	}
}
