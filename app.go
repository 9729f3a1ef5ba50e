package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/controller"
	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/store"
)

// serve runs one instance of the service until ctx ends.
func serve(ctx context.Context, getenv func(string) string, stdout io.Writer) (err error) {
	cfg, err := config.Load(getenv, false)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stdout, nil))
	log.Info("seckill starting", "config", cfg)
	if cfg.AdminTokenGenerated {
		fmt.Fprintf(stdout, "admin token (set SECKILL_ADMIN_TOKEN to choose it): %s\n", cfg.AdminToken)
	}
	st, err := openStores(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.close()) }()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on SECKILL_ADDR %s: %w", cfg.Addr, err)
	}
	srv := newServer(cfg, st, log)
	log.Info("seckill listening", "url", "http://"+ln.Addr().String())
	return serveHTTP(ctx, srv, ln, cfg, log)
}

// stores are what every instance of a process shares.
type stores struct {
	db       *gorm.DB
	redis    []redis.UniversalClient
	embedded bool
	close    func() error
}

// openStores opens the database and the Redis nodes and migrates the tables.
func openStores(ctx context.Context, cfg config.Config, log *slog.Logger) (*stores, error) {
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, closeDB, err := store.OpenSQL(openCtx, cfg.MySQLDSN)
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
	if cfg.MySQLDSN == "" || len(cfg.RedisAddrs) == 0 {
		log.Warn("running on embedded stores: set SECKILL_MYSQL_DSN and SECKILL_REDIS_ADDRS for real MySQL and Redis",
			"embedded_sql", cfg.MySQLDSN == "", "embedded_redis", len(cfg.RedisAddrs) == 0)
	}
	return &stores{
		db:       db,
		redis:    clients,
		embedded: cfg.MySQLDSN == "",
		close:    func() error { return errors.Join(closeRedis(), closeDB()) },
	}, nil
}

// newServer wires one instance: its own lockers (local is per process),
// metrics, service and routes over the shared stores.
func newServer(cfg config.Config, st *stores, log *slog.Logger) *http.Server {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	svc := service.New(st.db, newLockers(cfg, st.redis), st.redis, service.Config{
		Strategy:     cfg.Lock,
		PerUserLimit: int64(cfg.PerUserLimit),
		Fencing:      cfg.Fencing,
		LockWait:     cfg.LockWait,
		EmbeddedSQL:  st.embedded,
	}, service.NewMetrics(reg), log)
	router := controller.NewRouter(svc, log, controller.Options{
		AdminToken:       cfg.AdminToken,
		StrategyOverride: cfg.StrategyOverride,
		Gatherer:         reg,
		Registerer:       reg,
	})
	// A purchase may wait for its lock and hold it for hold_ms: the write
	// timeout leaves room for both.
	return &http.Server{
		Handler:           router,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      cfg.LockWait + service.MaxHold + 20*time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// newLockers makes the lock of every lock-based strategy.
func newLockers(cfg config.Config, clients []redis.UniversalClient) map[string]locker.Locker {
	opts := locker.Options{TTL: cfg.LockTTL, Wait: cfg.LockWait}
	return map[string]locker.Locker{
		"local":   locker.NewLocal(opts),
		"setnx":   locker.NewSetNX(clients[0], opts, time.Now),
		"token":   locker.NewToken(clients[0], opts),
		"redlock": locker.NewRedlock(clients, opts),
	}
}

// serveHTTP serves on ln until ctx ends, then shuts down gracefully:
// in-flight purchases finish and release their locks.
func serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener, cfg config.Config, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("seckill shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.LockWait+service.MaxHold+15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("seckill stopped")
	return nil
}
