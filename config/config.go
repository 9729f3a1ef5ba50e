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
	"net"
	"net/url"
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
	// BuyerAuth is who a buyer is (SECKILL_BUYER_AUTH): BuyerOpen, the
	// user_id the client sends, or BuyerJWT, the sub of the buyer's
	// token.
	BuyerAuth string
	// BuyerJWKS is where the keys that sign buyers' tokens are, an
	// http(s) URL or a file path (SECKILL_BUYER_JWKS); empty under jwt:
	// found by discovery at BuyerIssuer.
	BuyerJWKS string
	// BuyerIssuer is the iss a token must carry, when not empty
	// (SECKILL_BUYER_ISSUER); BuyerAudience is what its aud must name
	// (SECKILL_BUYER_AUDIENCE).
	BuyerIssuer   string
	BuyerAudience string
	// PaymentSecret keys the payment provider's signed callbacks
	// (SECKILL_PAYMENT_SECRET); when set, orders are paid only through
	// them.
	PaymentSecret string
}

// The values of SECKILL_BUYER_AUTH.
const (
	BuyerOpen = "open"
	BuyerJWT  = "jwt"
)

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
	// DefaultBuyerAudience is SECKILL_BUYER_AUDIENCE's.
	DefaultBuyerAudience = "seckill"
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
	if err := c.loadBuyers(getenv); err != nil {
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

// loadBuyers reads SECKILL_BUYER_AUTH, SECKILL_BUYER_JWKS,
// SECKILL_BUYER_ISSUER, SECKILL_BUYER_AUDIENCE and SECKILL_PAYMENT_SECRET.
// The keys themselves are read by the wiring, which stops the program
// naming SECKILL_BUYER_JWKS when none is usable.
func (c *Config) loadBuyers(getenv func(string) string) error {
	switch c.BuyerAuth = strings.ToLower(orDefault(getenv("SECKILL_BUYER_AUTH"), BuyerOpen)); c.BuyerAuth {
	case BuyerOpen, BuyerJWT:
	default:
		return fmt.Errorf("config: SECKILL_BUYER_AUTH %q: want open or jwt", c.BuyerAuth)
	}
	c.BuyerJWKS = strings.TrimSpace(getenv("SECKILL_BUYER_JWKS"))
	c.BuyerIssuer = strings.TrimSpace(getenv("SECKILL_BUYER_ISSUER"))
	c.BuyerAudience = orDefault(getenv("SECKILL_BUYER_AUDIENCE"), DefaultBuyerAudience)
	c.PaymentSecret = getenv("SECKILL_PAYMENT_SECRET")
	if c.BuyerAuth != BuyerJWT {
		return nil
	}
	switch {
	case c.BuyerJWKS == "" && c.BuyerIssuer == "":
		return errors.New("config: SECKILL_BUYER_JWKS: under SECKILL_BUYER_AUTH=jwt, give the JWK Set (a URL or a file) or SECKILL_BUYER_ISSUER to discover it")
	case c.BuyerJWKS == "" && !isHTTP(c.BuyerIssuer):
		return fmt.Errorf("config: SECKILL_BUYER_ISSUER %q: discovery needs an http(s):// URL", c.BuyerIssuer)
	case strings.Contains(c.BuyerJWKS, "://") && !isHTTP(c.BuyerJWKS):
		return fmt.Errorf("config: SECKILL_BUYER_JWKS %q: want an http(s):// URL or a file path", c.BuyerJWKS)
	}
	return nil
}

// isHTTP says v is an http or https URL with a host.
func isHTTP(v string) bool {
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
