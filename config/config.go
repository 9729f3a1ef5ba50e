// Package config reads the service's settings from the environment, as the
// contract gives them. Load reads nothing but getenv (and makes up a random
// admin token when none is set): a value that does not parse is an error
// that names its variable, so nothing is half-started.
package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/store/mysqldsn"
)

// Config is every setting of the service.
type Config struct {
	// Addr is the HTTP listen address (SECKILL_ADDR).
	Addr string
	// MySQLDSN is the go-sql-driver DSN (SECKILL_MYSQL_DSN); empty means
	// the embedded SQL store.
	MySQLDSN string
	// RedisAddrs are independent Redis nodes (SECKILL_REDIS_ADDRS); empty
	// means three embedded nodes.
	RedisAddrs []string
	// ReserveAddrs are where the reserve strategy keeps its counters and
	// its stream (SECKILL_RESERVE_REDIS): one Redis node, or with
	// ReserveCluster the seed nodes of a Redis Cluster; empty means the
	// first of RedisAddrs (or of the embedded nodes).
	ReserveAddrs   []string
	ReserveCluster bool
	// ReserveAcks is how many replicas of that Redis must acknowledge a
	// reservation before it answers 202, and how long the master waits
	// for them (SECKILL_RESERVE_ACKS, "N/timeout"); 0: none.
	ReserveAcks    int
	ReserveAckWait time.Duration
	// Strategy is the strategy used when a request names none (SECKILL_LOCK),
	// as text: the wiring checks it against the service's strategies.
	Strategy string
	// LockTTL is the lock lease (SECKILL_LOCK_TTL).
	LockTTL time.Duration
	// Watchdog renews the leases of token and redlock every LockTTL/3 while
	// their holder works (SECKILL_WATCHDOG).
	Watchdog bool
	// LockWait is the longest a purchase waits for its lock
	// (SECKILL_LOCK_WAIT).
	LockWait time.Duration
	// AdminToken is the bearer token of /api/v1/admin/*, /audit and a
	// purchase's override parameters (SECKILL_ADMIN_TOKEN); AdminTokenGenerated says it was made up at
	// start because none was set.
	AdminToken          string
	AdminTokenGenerated bool
	// StrategyOverride lets a purchase that carries the admin token choose
	// strategy, hold_ms, pause_ms, fencing and batch
	// (SECKILL_STRATEGY_OVERRIDE).
	StrategyOverride bool
	// PerUserLimit is the most units one user may buy of one product; 0 is
	// no limit (SECKILL_PER_USER_LIMIT).
	PerUserLimit int
	// PaymentTimeout is how long an order may stay unpaid before it
	// expires and its units go back on sale; 0: orders are written paid
	// and never expire (SECKILL_PAYMENT_TIMEOUT).
	PaymentTimeout time.Duration
	// Fencing makes the Redis locks' stock writes conditional on a fencing
	// token (SECKILL_FENCING).
	Fencing bool
	// Batch is the most purchases of one product one instance sells under
	// one hold of its lock (SECKILL_BATCH); 1 is a lock per purchase.
	Batch int
	// LogFormat is "text" or "json" (SECKILL_LOG_FORMAT).
	LogFormat string
	// MySQLMaxConns is the most connections the instance keeps open to
	// MySQL, idle ones included (SECKILL_MYSQL_MAX_CONNS).
	MySQLMaxConns int
	// DrainDelay is how long, at most, the instance keeps accepting
	// requests once its drain has started (SECKILL_DRAIN_DELAY): while
	// requests are in flight, with /readyz answering 503, so that a
	// balancer that polls it stops sending work first.
	DrainDelay time.Duration
	// IPLimit is the most purchase requests one client IP may make per
	// IPWindow, counted in Redis for every instance (SECKILL_IP_LIMIT,
	// "N/window"); 0: no limit.
	IPLimit  int
	IPWindow time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// (SECKILL_TRUSTED_PROXIES, CIDRs or addresses); empty: none.
	TrustedProxies []string
}

// MaxBatch is the largest SECKILL_BATCH: the contract's (api.MaxBatch),
// which also bounds a purchase's batch=.
const MaxBatch = api.MaxBatch

// The defaults, in one place for the wiring: Load gives them to the
// variables left unset. Those of the lock library and of the service are
// theirs, named here; the IP limiter of controller and internal/app fall
// back on these when given none.
const (
	DefaultAddr     = "127.0.0.1:8080" // SECKILL_ADDR
	DefaultStrategy = "redlock"        // SECKILL_LOCK
	// DefaultLockTTL is SECKILL_LOCK_TTL's: the lease of a lock, the lock
	// library's own default.
	DefaultLockTTL = locker.DefaultTTL
	// DefaultLockWait is SECKILL_LOCK_WAIT's: how long a purchase waits for
	// its lock, the lock library's own default.
	DefaultLockWait = locker.DefaultWait
	// DefaultBatch is SECKILL_BATCH's: the most purchases one hold sells,
	// the service's own default.
	DefaultBatch = service.DefaultBatch
	// DefaultPerUserLimit is SECKILL_PER_USER_LIMIT's.
	DefaultPerUserLimit = 1
	// DefaultPaymentTimeout is SECKILL_PAYMENT_TIMEOUT's.
	DefaultPaymentTimeout = 15 * time.Minute
	// DefaultDrainDelay is SECKILL_DRAIN_DELAY's.
	DefaultDrainDelay = 5 * time.Second
	// DefaultMySQLMaxConns is SECKILL_MYSQL_MAX_CONNS's: seven instances
	// keep 140 connections open, within the 151 a MySQL or MariaDB server
	// allows by default (max_connections).
	DefaultMySQLMaxConns = 20
	// DefaultKeyPrefix starts every Redis key an instance makes: the
	// service's.
	DefaultKeyPrefix = service.DefaultKeyPrefix
	// DefaultDBTimeout bounds every call to the database (not a setting):
	// the service's.
	DefaultDBTimeout = service.DefaultDBTimeout
)

// Load reads the configuration through getenv. demo changes the default of
// SECKILL_STRATEGY_OVERRIDE to true. The variables are read group by group;
// the error names the first that is wrong.
func Load(getenv func(string) string, demo bool) (Config, error) {
	c := Config{
		Addr:     orDefault(getenv("SECKILL_ADDR"), DefaultAddr),
		MySQLDSN: strings.TrimSpace(getenv("SECKILL_MYSQL_DSN")),
		Strategy: orDefault(getenv("SECKILL_LOCK"), DefaultStrategy),
	}
	if err := c.loadStores(getenv); err != nil {
		return Config{}, err
	}
	if err := c.loadLocks(getenv); err != nil {
		return Config{}, err
	}
	if err := c.loadAdmin(getenv, demo); err != nil {
		return Config{}, err
	}
	if err := c.loadSale(getenv); err != nil {
		return Config{}, err
	}
	if err := c.loadOperation(getenv); err != nil {
		return Config{}, err
	}
	return c, nil
}

// loadStores checks SECKILL_ADDR and SECKILL_MYSQL_DSN and reads
// SECKILL_REDIS_ADDRS.
func (c *Config) loadStores(getenv func(string) string) error {
	_, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("config: SECKILL_ADDR %q: %w", c.Addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("config: SECKILL_ADDR %q: want host:port with a port from 0 to 65535", c.Addr)
	}
	if c.MySQLDSN != "" {
		if _, err := mysql.ParseDSN(c.MySQLDSN); err != nil {
			return fmt.Errorf("config: SECKILL_MYSQL_DSN: %w", err)
		}
		if err := mysqldsn.CheckCharset(c.MySQLDSN); err != nil {
			return fmt.Errorf("config: SECKILL_MYSQL_DSN: %w", err)
		}
	}
	if c.RedisAddrs, err = parseAddrs(getenv("SECKILL_REDIS_ADDRS")); err != nil {
		return fmt.Errorf("config: SECKILL_REDIS_ADDRS: %w", err)
	}
	if c.ReserveAddrs, c.ReserveCluster, err = parseReserve(getenv("SECKILL_RESERVE_REDIS")); err != nil {
		return fmt.Errorf("config: SECKILL_RESERVE_REDIS: %w", err)
	}
	if c.ReserveAcks, c.ReserveAckWait, err = parseAcks(getenv("SECKILL_RESERVE_ACKS")); err != nil {
		return fmt.Errorf("config: SECKILL_RESERVE_ACKS: %w", err)
	}
	return nil
}

// parseAcks reads SECKILL_RESERVE_ACKS: empty or "0" (no replica waited
// for), or N/timeout.
func parseAcks(v string) (int, time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "0" {
		return 0, 0, nil
	}
	n, w, ok := strings.Cut(v, "/")
	replicas, err1 := strconv.Atoi(strings.TrimSpace(n))
	timeout, err2 := time.ParseDuration(strings.TrimSpace(w))
	if !ok || err1 != nil || err2 != nil || replicas < 1 || replicas > 16 || timeout < time.Millisecond || timeout > time.Second {
		return 0, 0, fmt.Errorf("%q: want 0, or N/timeout, e.g. 1/100ms (N replicas from 1 to 16, the timeout from 1ms to 1s)", v)
	}
	return replicas, timeout, nil
}

// parseReserve reads SECKILL_RESERVE_REDIS: empty, host:port, or
// cluster:host:port[,host:port...].
func parseReserve(v string) (addrs []string, cluster bool, err error) {
	v = strings.TrimSpace(v)
	if rest, ok := strings.CutPrefix(v, "cluster:"); ok {
		if addrs, err = parseAddrs(rest); err == nil && len(addrs) == 0 {
			err = errors.New(`"cluster:" names no seed node: want cluster:host:port[,host:port...]`)
		}
		return addrs, true, err
	}
	if addrs, err = parseAddrs(v); err == nil && len(addrs) > 1 {
		err = fmt.Errorf("%q: one node, host:port, or the seed nodes of a Redis Cluster, cluster:host:port[,host:port...]", v)
	}
	return addrs, false, err
}

// loadLocks reads SECKILL_LOCK_TTL, SECKILL_WATCHDOG and SECKILL_LOCK_WAIT.
func (c *Config) loadLocks(getenv func(string) string) error {
	var err error
	if c.LockTTL, err = positiveDuration(getenv, "SECKILL_LOCK_TTL", DefaultLockTTL); err != nil {
		return err
	}
	if c.Watchdog, err = boolean(getenv, "SECKILL_WATCHDOG", true); err != nil {
		return err
	}
	if c.LockWait, err = positiveDuration(getenv, "SECKILL_LOCK_WAIT", DefaultLockWait); err != nil {
		return err
	}
	return nil
}

// loadAdmin reads SECKILL_ADMIN_TOKEN, or makes one up, and
// SECKILL_STRATEGY_OVERRIDE (true by default in the demo).
func (c *Config) loadAdmin(getenv func(string) string, demo bool) error {
	c.AdminToken = strings.TrimSpace(getenv("SECKILL_ADMIN_TOKEN"))
	if c.AdminToken == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("config: generate SECKILL_ADMIN_TOKEN: %w", err)
		}
		c.AdminToken, c.AdminTokenGenerated = hex.EncodeToString(b), true
	}
	var err error
	if c.StrategyOverride, err = boolean(getenv, "SECKILL_STRATEGY_OVERRIDE", demo); err != nil {
		return err
	}
	return nil
}

// loadSale reads SECKILL_FENCING, SECKILL_BATCH, SECKILL_PER_USER_LIMIT
// and SECKILL_PAYMENT_TIMEOUT.
func (c *Config) loadSale(getenv func(string) string) error {
	var err error
	if c.Fencing, err = boolean(getenv, "SECKILL_FENCING", true); err != nil {
		return err
	}
	c.Batch = DefaultBatch
	if v := strings.TrimSpace(getenv("SECKILL_BATCH")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxBatch {
			return fmt.Errorf("config: SECKILL_BATCH %q: want a whole number from 1 to %d", v, MaxBatch)
		}
		c.Batch = n
	}
	if v := strings.TrimSpace(getenv("SECKILL_PER_USER_LIMIT")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("config: SECKILL_PER_USER_LIMIT %q: want a whole number >= 0", v)
		}
		c.PerUserLimit = n
	} else {
		c.PerUserLimit = DefaultPerUserLimit
	}
	if c.PaymentTimeout, err = duration(getenv, "SECKILL_PAYMENT_TIMEOUT", DefaultPaymentTimeout); err != nil {
		return err
	}
	return nil
}

// loadOperation reads SECKILL_LOG_FORMAT, SECKILL_MYSQL_MAX_CONNS,
// SECKILL_DRAIN_DELAY, SECKILL_IP_LIMIT and SECKILL_TRUSTED_PROXIES.
func (c *Config) loadOperation(getenv func(string) string) error {
	var err error
	switch c.LogFormat = strings.ToLower(orDefault(getenv("SECKILL_LOG_FORMAT"), "text")); c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("config: SECKILL_LOG_FORMAT %q: want text or json", c.LogFormat)
	}
	c.MySQLMaxConns = DefaultMySQLMaxConns
	if v := strings.TrimSpace(getenv("SECKILL_MYSQL_MAX_CONNS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return fmt.Errorf("config: SECKILL_MYSQL_MAX_CONNS %q: want a whole number from 1 to 10000", v)
		}
		c.MySQLMaxConns = n
	}
	if c.DrainDelay, err = duration(getenv, "SECKILL_DRAIN_DELAY", DefaultDrainDelay); err != nil {
		return err
	}
	if c.IPLimit, c.IPWindow, err = parseIPLimit(getenv("SECKILL_IP_LIMIT")); err != nil {
		return fmt.Errorf("config: SECKILL_IP_LIMIT: %w", err)
	}
	if c.TrustedProxies, err = parseProxies(getenv("SECKILL_TRUSTED_PROXIES")); err != nil {
		return fmt.Errorf("config: SECKILL_TRUSTED_PROXIES: %w", err)
	}
	return nil
}

// LogValue prints the configuration with its secrets masked.
func (c Config) LogValue() slog.Value {
	dsn := "(embedded)"
	if c.MySQLDSN != "" {
		dsn = maskDSN(c.MySQLDSN)
	}
	redis := "(embedded)"
	if len(c.RedisAddrs) > 0 {
		redis = strings.Join(c.RedisAddrs, ",")
	}
	return slog.GroupValue(
		slog.String("addr", c.Addr),
		slog.String("mysql_dsn", dsn),
		slog.String("redis_addrs", redis),
		slog.String("reserve_redis", reserveText(c.ReserveAddrs, c.ReserveCluster)),
		slog.String("reserve_acks", ackText(c.ReserveAcks, c.ReserveAckWait)),
		slog.String("lock", c.Strategy),
		slog.Duration("lock_ttl", c.LockTTL),
		slog.Bool("watchdog", c.Watchdog),
		slog.Duration("lock_wait", c.LockWait),
		slog.String("admin_token", "***"),
		slog.Bool("strategy_override", c.StrategyOverride),
		slog.Int("per_user_limit", c.PerUserLimit),
		slog.Duration("payment_timeout", c.PaymentTimeout),
		slog.Bool("fencing", c.Fencing),
		slog.Int("batch", c.Batch),
		slog.String("log_format", c.LogFormat),
		slog.Int("mysql_max_conns", c.MySQLMaxConns),
		slog.Duration("drain_delay", c.DrainDelay),
		slog.String("ip_limit", ipLimitText(c.IPLimit, c.IPWindow)),
		slog.String("trusted_proxies", orNone(strings.Join(c.TrustedProxies, ","))),
	)
}

// orNone is s, or "(none)" for an empty setting, as the log shows it.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// reserveText is SECKILL_RESERVE_REDIS as the log shows it.
func reserveText(addrs []string, cluster bool) string {
	switch {
	case len(addrs) == 0:
		return "(the first Redis node)"
	case cluster:
		return "cluster:" + strings.Join(addrs, ",")
	}
	return addrs[0]
}

func maskDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "***"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "***"
	}
	return cfg.FormatDSN()
}

func orDefault(v, def string) string {
	if v = strings.TrimSpace(v); v == "" {
		return def
	}
	return v
}

func parseAddrs(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var addrs []string
	for _, a := range strings.Split(v, ",") {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", a, err)
		}
		if host == "" {
			return nil, fmt.Errorf("%q: missing host", a)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%q: bad port", a)
		}
		for _, seen := range addrs {
			if seen == a {
				return nil, fmt.Errorf("%q named twice: the nodes must be independent", a)
			}
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

func positiveDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	d, err := duration(getenv, name, def)
	if err == nil && d == 0 {
		err = fmt.Errorf("config: %s %q: must be positive", name, strings.TrimSpace(getenv(name)))
	}
	return d, err
}

// duration reads a Go duration that is not negative.
func duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("config: %s %q: want a Go duration such as 8s or 500ms", name, v)
	}
	if d < 0 {
		return 0, fmt.Errorf("config: %s %q: must not be negative", name, v)
	}
	return d, nil
}

func boolean(getenv func(string) string, name string, def bool) (bool, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("config: %s %q: want true or false", name, v)
	}
	return b, nil
}

// parseIPLimit reads SECKILL_IP_LIMIT: "N/window", e.g. "20/1s"; empty is
// no limit.
func parseIPLimit(v string) (int, time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, 0, nil
	}
	n, w, ok := strings.Cut(v, "/")
	limit, err1 := strconv.Atoi(strings.TrimSpace(n))
	window, err2 := time.ParseDuration(strings.TrimSpace(w))
	if !ok || err1 != nil || err2 != nil || limit < 1 || window < time.Millisecond || window > 24*time.Hour {
		return 0, 0, fmt.Errorf("%q: want N/window, e.g. 20/1s (N at least 1, the window from 1ms to 24h)", v)
	}
	return limit, window, nil
}

// parseProxies reads SECKILL_TRUSTED_PROXIES: comma-separated CIDRs (or
// single addresses), IPv4 or IPv6.
func parseProxies(v string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if _, err := netip.ParsePrefix(part); err != nil {
			if _, err := netip.ParseAddr(part); err != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", part)
			}
		}
		out = append(out, part)
	}
	return out, nil
}

// ackText is SECKILL_RESERVE_ACKS as it reads: "0" or "N/timeout".
func ackText(n int, timeout time.Duration) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d/%v", n, timeout)
}

// ipLimitText is SECKILL_IP_LIMIT as it reads: "off" or "N/window".
func ipLimitText(n int, window time.Duration) string {
	if n == 0 {
		return "off"
	}
	return fmt.Sprintf("%d/%v", n, window)
}
