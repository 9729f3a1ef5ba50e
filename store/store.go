// Package store opens the stores the service runs on: the SQL database that
// holds products and orders, and the independent Redis nodes the locks live
// on. It is kept apart from model/ (which holds only the GORM structs and the
// migration) so that connecting and configuring drivers has one home.
//
// With no DSN and no Redis address it starts embedded stores instead, so that
// the service runs with nothing installed: an SQLite database in a
// temporary directory (OpenSQLite) and three in-process Redis nodes
// (StartMiniRedis). Real MySQL and Redis are what the measurements are for.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckill/seckill/store/mysqldsn"
)

// EmbeddedRedisNodes is how many in-process Redis nodes OpenRedisNodes
// starts when it is given no address: three, so that Redlock has a majority
// to win and a node to lose.
const EmbeddedRedisNodes = 3

// Embedded reports which stores OpenSQL and OpenRedisNodes will start in
// process for these settings: the SQL database when dsn is empty, the Redis
// nodes when addrs is. main can use it to say once, at start, that it runs
// on embedded stores and that SECKILL_MYSQL_DSN and SECKILL_REDIS_ADDRS name
// real ones.
func Embedded(dsn string, addrs []string) (embeddedSQL, embeddedRedis bool) {
	return dsn == "", len(addrs) == 0
}

// OpenSQL opens the database named by dsn (MySQL, see OpenMySQL, which
// takes opts). The returned func closes it; calls after the first return
// the first's result.
//
// An empty dsn opens the embedded database instead: an SQLite file
// (OpenSQLite) in a new temporary directory, which the returned func
// removes. It lives as long as the process, so every start begins empty,
// like a fresh MySQL database would, and nothing is left behind in the
// working directory. That database has one connection: every context used
// with it needs a deadline, because a query made on the pool instead of on
// the transaction, inside a transaction, waits for ever.
func OpenSQL(ctx context.Context, dsn string, opts ...MySQLOption) (*gorm.DB, func() error, error) {
	if dsn == "" {
		return openEmbeddedSQL(ctx)
	}
	db, err := OpenMySQL(ctx, dsn, opts...)
	if err != nil {
		return nil, nil, err
	}
	return db, sync.OnceValue(func() error { return CloseSQL(db) }), nil
}

func openEmbeddedSQL(ctx context.Context) (*gorm.DB, func() error, error) {
	dir, err := os.MkdirTemp("", "seckill-")
	if err != nil {
		return nil, nil, fmt.Errorf("store: embedded sqlite: %w", err)
	}
	db, err := OpenSQLite(ctx, filepath.Join(dir, "seckill.db"))
	if err != nil {
		return nil, nil, errors.Join(err, removeDir(dir))
	}
	return db, sync.OnceValue(func() error { return errors.Join(CloseSQL(db), removeDir(dir)) }), nil
}

func removeDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("store: remove embedded sqlite: %w", err)
	}
	return nil
}

// OpenRedisNodes returns a client per node in addrs. The returned func
// closes them; calls after the first return the first's result.
//
// No address starts EmbeddedRedisNodes independent in-process nodes
// (StartMiniRedis) on 127.0.0.1 and free ports; the returned func then also
// stops them. They answer every command the locks and the service use (SET
// NX PX, SETNX, GET, GETSET, DEL, EVAL, EVALSHA, PUBLISH, PSUBSCRIBE, ...),
// and expire keys on time to within MiniRedisTick.
func OpenRedisNodes(ctx context.Context, addrs []string) ([]redis.UniversalClient, func() error, error) {
	if len(addrs) > 0 {
		clients := OpenRedis(addrs)
		return clients, sync.OnceValue(func() error { return CloseRedis(clients) }), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: embedded redis: %w", err)
	}
	addrs, stop, err := StartMiniRedis(EmbeddedRedisNodes)
	if err != nil {
		return nil, nil, err
	}
	clients := OpenRedis(addrs)
	return clients, sync.OnceValue(func() error { return errors.Join(CloseRedis(clients), stop()) }), nil
}

// DefaultMySQLMaxConns is the size of OpenMySQL's pool unless
// MySQLMaxConns says otherwise.
const DefaultMySQLMaxConns = 20

// MySQLOption changes how OpenMySQL opens its pool.
type MySQLOption func(*mysqlOptions)

type mysqlOptions struct {
	maxConns  int
	ioTimeout time.Duration
}

// MySQLMaxConns sets the most connections the pool keeps open, idle ones
// included: what one process takes of the server's max_connections. The
// default is DefaultMySQLMaxConns; n < 1 keeps it.
func MySQLMaxConns(n int) MySQLOption {
	return func(o *mysqlOptions) {
		if n >= 1 {
			o.maxConns = n
		}
	}
}

// MySQLIOTimeout bounds every read and write on a connection (the driver's
// readTimeout and writeTimeout), unless the DSN sets them: the one bound on
// a COMMIT, which takes no context, when the server hangs. It must be
// longer than any statement may legitimately wait (a row lock). 0 leaves
// none.
func MySQLIOTimeout(d time.Duration) MySQLOption {
	return func(o *mysqlOptions) { o.ioTimeout = d }
}

// ErrUnsafeCharset is what OpenMySQL returns for a DSN that names a
// charset other than utf8mb4, or a collation (mysqldsn.CheckCharset).
var ErrUnsafeCharset = mysqldsn.ErrUnsafeCharset

// OpenMySQL connects to the MySQL (or MariaDB) server named by dsn, creating
// its database if it does not exist yet. The DSN must leave the charset to
// utf8mb4 (mysqldsn.CheckCharset).
func OpenMySQL(ctx context.Context, dsn string, opts ...MySQLOption) (*gorm.DB, error) {
	o := mysqlOptions{maxConns: DefaultMySQLMaxConns}
	for _, opt := range opts {
		opt(&o)
	}
	if err := mysqldsn.CheckCharset(dsn); err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: parse mysql dsn: %w", err)
	}
	if err := cfg.Apply(mysql.Charset("utf8mb4", "")); err != nil {
		return nil, fmt.Errorf("store: mysql charset: %w", err)
	}
	cfg.ParseTime = true
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = o.ioTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = o.ioTimeout
	}
	// What the service's sale store needs for its MySQL form, which it
	// checks at open (service/salestore, mysqlForm), taking its portable
	// form without it. Affected rows count rows changed, not rows matched:
	// the per-user limit's conditional upsert reads "nothing changed" as
	// "over the limit".
	cfg.ClientFoundRows = false
	// Parameters are interpolated on the client (safely: the connection is
	// utf8mb4), so that a statement is one round trip rather than a
	// prepare, an execute and a close.
	cfg.InterpolateParams = true
	// A sale sends its transaction as multi-statements. Every statement is
	// built with placeholders, so this lets no input add a statement.
	cfg.MultiStatements = true
	galera, err := prepareServer(ctx, *cfg)
	if err != nil {
		return nil, err
	}
	if _, named := cfg.Params[syncWaitParam]; galera && !named {
		// A Galera Cluster's node may not yet have applied what another
		// committed: every read, and the start of every transaction, first
		// waits until the node has (causal reads), so that a replay, a
		// purchase's state and a sale's row lock read the cluster's latest
		// word (docs/distributed.md).
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[syncWaitParam] = "1"
	}
	db, err := gorm.Open(gormmysql.Open(cfg.FormatDSN()), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		TranslateError:         true,
	})
	if err != nil {
		return nil, fmt.Errorf("store: open mysql: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("store: mysql pool: %w", err)
	}
	sqlDB.SetMaxOpenConns(o.maxConns)
	sqlDB.SetMaxIdleConns(o.maxConns)
	sqlDB.SetConnMaxLifetime(5 * time.Minute)
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("store: ping mysql: %w", errors.Join(err, sqlDB.Close()))
	}
	return db, nil
}

// syncWaitParam is the session variable that makes a Galera node's reads
// causal: 1 waits before every read and START TRANSACTION.
const syncWaitParam = "wsrep_sync_wait"

// prepareServer creates cfg's database on its server if it does not exist
// yet, and says whether the server is a node of a Galera Cluster
// (wsrep_on; MySQL and TiDB have no such variable).
func prepareServer(ctx context.Context, cfg mysql.Config) (galera bool, err error) {
	name := cfg.DBName
	cfg.DBName = ""
	cfg.MultiStatements = false // one statement at a time here, whatever the name holds
	server, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return false, fmt.Errorf("store: open mysql server: %w", err)
	}
	defer func() {
		if cerr := server.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("store: close mysql server: %w", cerr))
		}
	}()
	if name != "" {
		q := "CREATE DATABASE IF NOT EXISTS `" + strings.ReplaceAll(name, "`", "``") + "` CHARACTER SET utf8mb4"
		if _, err := server.ExecContext(ctx, q); err != nil {
			return false, fmt.Errorf("store: create database %s: %w", name, err)
		}
	}
	var variable, value string
	err = server.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'wsrep_on'").Scan(&variable, &value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: read wsrep_on: %w", err)
	}
	return strings.EqualFold(value, "ON"), nil
}

// CloseSQL closes db's connection pool.
func CloseSQL(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("store: close sql: %w", err)
	}
	if err := sqlDB.Close(); err != nil {
		return fmt.Errorf("store: close sql: %w", err)
	}
	return nil
}

// OpenRedis returns one client per independent node in addrs. Clients do not
// retry a command or a dial: a node that is down answers at once, so that a
// lock can count it out.
func OpenRedis(addrs []string) []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{
			Addr:          a,
			MaxRetries:    -1,
			DialerRetries: 1,
			DialTimeout:   time.Second,
			ReadTimeout:   time.Second,
			WriteTimeout:  time.Second,
			PoolSize:      64,
		})
	}
	return clients
}

// OpenReserveRedis returns the client of the reserve strategy's Redis:
// one node, or with cluster the Redis Cluster whose seed nodes addrs are
// (it follows the slots as they move, MOVED and ASK, and a master's
// failover, retrying a command a few times, which a cluster's redirects
// and failovers need).
func OpenReserveRedis(addrs []string, cluster bool) redis.UniversalClient {
	if cluster {
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:         addrs,
			DialerRetries: 1,
			DialTimeout:   time.Second,
			ReadTimeout:   time.Second,
			WriteTimeout:  time.Second,
			PoolSize:      64,
		})
		c.AddHook(reloadOnFailure{c})
		return c
	}
	// A node as OpenRedis opens one, with no retry: a script sent again
	// after a connection broke under it is answered as a replay (the
	// script sees its request ID), but a purchase whose call failed answers
	// outcome_unknown unless the dial failed, and that needs to know
	// whether it was sent.
	return OpenRedis(addrs[:1])[0]
}

// CloseRedis closes every client.
func CloseRedis(clients []redis.UniversalClient) error {
	var errs []error
	for _, c := range clients {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close redis: %w", err))
		}
	}
	return errors.Join(errs...)
}

// reloadOnFailure makes a cluster client read the cluster's map again as
// soon as a command fails for want of a master: the client follows MOVED
// at once, but otherwise keeps its map for 10 s, so that after a failover
// (a master dead, its replica serving its slots) it would send that
// master's slots to the dead node until then.
type reloadOnFailure struct{ c *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		// A pipeline's hook may be answered nil while its commands failed.
		for _, c := range cmds {
			if h.check(ctx, c.Err()) {
				break
			}
		}
		return err
	}
}

// check reloads the map after a failure that a failover explains (the
// node gone: a connection error; or the cluster between masters), and
// says whether it did.
func (h reloadOnFailure) check(ctx context.Context, err error) bool {
	var ne net.Error
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller's own deadline, or nothing
	}
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || redis.IsClusterDownError(err) {
		h.c.ReloadState(ctx)
		return true
	}
	return false
}
