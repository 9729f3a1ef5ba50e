// Command peer is the flash-sale recipe the public repositories teach (the
// "seckill voucher" of hmdp and its Go ports), kept beside the project to
// measure reserve against on the same machine and client (bench-sale):
// a Lua script checks the stock and the buyer in Redis, takes a unit,
// remembers the buyer and appends the order to a stream; one consumer
// reads the stream in tens and writes each order in a transaction of its
// own (a conditional UPDATE and an INSERT), then acknowledges it. It keeps
// no promise through a Redis loss, replays nothing and reconciles nothing:
// it is the speed a team gets by copying those repositories, and the
// backlog it leaves.
//
//	peer -addr 127.0.0.1:29090 -redis 127.0.0.1:6379 -mysql 'root@tcp(127.0.0.1:3306)/peer'
//	POST /seckill/{id}  {"user_id":"u"}  200 {"order_id":N} | 409 {"error":...}
//	PUT  /stock/{id}    {"stock":N}      resets the product (Redis and MySQL)
//	GET  /written/{id}                   {"orders":N,"stock":M}, from MySQL
//	GET  /healthz
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("peer", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:29090", "listen address")
	raddr := fs.String("redis", "127.0.0.1:6379", "the Redis node")
	dsn := fs.String("mysql", "root@tcp(127.0.0.1:3306)/peer", "MySQL DSN, its database created")
	prefix := fs.String("prefix", "peer:", "prefix of every Redis key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	rdb := redis.NewClient(&redis.Options{Addr: *raddr, PoolSize: 64})
	defer rdb.Close()
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		return fmt.Errorf("-mysql: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(20)
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS voucher (id BIGINT PRIMARY KEY, stock INT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS voucher_order (id BIGINT PRIMARY KEY, user_id VARCHAR(64) NOT NULL, voucher_id BIGINT NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create the tables: %w", err)
		}
	}
	s := &shop{rdb: rdb, db: db, log: log, keys: keys{prefix: *prefix}}
	s.next.Store(time.Now().UnixNano())
	if err := rdb.XGroupCreateMkStream(ctx, s.keys.stream(), group, "0").Err(); err != nil && !isBusyGroup(err) {
		return fmt.Errorf("the stream's group: %w", err)
	}
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		s.consume(ctx)
	}()
	srv := &http.Server{Addr: *addr, Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shut)
	<-consumed
	return errors.Join(err, s.clear(shut))
}

// isBusyGroup says err is Redis refusing a group that exists.
func isBusyGroup(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "BUSYGROUP")
}

// routes are the recipe's four routes.
func (s *shop) routes() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	r.POST("/seckill/:id", s.handleSeckill)
	r.PUT("/stock/:id", s.handleStock)
	r.GET("/written/:id", s.handleWritten)
	return r
}
