package config

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

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
		slog.String("buyer_auth", buyerText(c)),
		slog.String("payment_secret", secretText(c.PaymentSecret)),
	)
}

// maskDSN is dsn with its password masked, or "***" when it does not
// parse.
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

// orNone is s, or "(none)" for an empty setting, as the log shows it.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// buyerText is SECKILL_BUYER_AUTH and its settings as the log shows them;
// under open it says that buyers are not authenticated.
func buyerText(c Config) string {
	if c.BuyerAuth != BuyerJWT {
		return "open (buyers are not authenticated: the user_id a client sends is the buyer)"
	}
	keys := c.BuyerJWKS
	if keys == "" {
		keys = "discovered at the issuer"
	}
	return fmt.Sprintf("jwt (keys %s, issuer %s, audience %s)", keys, orNone(c.BuyerIssuer), c.BuyerAudience)
}

// secretText masks a secret: "***" when set, "(none)" when not.
func secretText(v string) string {
	if v == "" {
		return "(none)"
	}
	return "***"
}
