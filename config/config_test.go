package config_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/config"
)

// env is a map-backed getenv.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestLoadDefaults(t *testing.T) {
	for _, demo := range []bool{false, true} {
		c, err := config.Load(env(nil), demo)
		if err != nil {
			t.Fatalf("Load(empty, demo=%v) error = %v", demo, err)
		}
		checks := []struct {
			name      string
			got, want any
		}{
			{"Addr", c.Addr, "127.0.0.1:8080"},
			{"MySQLDSN", c.MySQLDSN, ""},
			{"len(RedisAddrs)", len(c.RedisAddrs), 0},
			{"Strategy", c.Strategy, "redlock"},
			{"LockTTL", c.LockTTL, 2 * time.Second},
			{"Watchdog", c.Watchdog, true},
			{"LockWait", c.LockWait, 5 * time.Second},
			{"StrategyOverride", c.StrategyOverride, demo},
			{"PerUserLimit", c.PerUserLimit, 1},
			{"Fencing", c.Fencing, true},
			{"Batch", c.Batch, 100},
			{"AdminTokenGenerated", c.AdminTokenGenerated, true},
			{"LogFormat", c.LogFormat, "text"},
			{"MySQLMaxConns", c.MySQLMaxConns, 20},
			{"DrainDelay", c.DrainDelay, 5 * time.Second},
			{"IPLimit", c.IPLimit, 0},
			{"len(TrustedProxies)", len(c.TrustedProxies), 0},
		}
		for _, ch := range checks {
			if ch.got != ch.want {
				t.Errorf("Load(empty, demo=%v).%s = %v; want %v", demo, ch.name, ch.got, ch.want)
			}
		}
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(c.AdminToken) {
			t.Errorf("Load(empty, demo=%v).AdminToken = %q; want 32 random hex digits", demo, c.AdminToken)
		}
	}
}

func TestLoadGeneratesADifferentTokenEachTime(t *testing.T) {
	a, errA := config.Load(env(nil), false)
	b, errB := config.Load(env(nil), false)
	if errA != nil || errB != nil {
		t.Fatalf("Load(empty) errors = %v, %v", errA, errB)
	}
	if a.AdminToken == b.AdminToken {
		t.Errorf("two Loads generated the same admin token %q", a.AdminToken)
	}
}

func TestLoadReadsEverySetting(t *testing.T) {
	vars := map[string]string{
		"SECKILL_ADDR":              "0.0.0.0:9090",
		"SECKILL_MYSQL_DSN":         "app:pw@tcp(db:3306)/seckill?parseTime=true",
		"SECKILL_REDIS_ADDRS":       "r1:6379, r2:6380 ,r3:6381",
		"SECKILL_LOCK":              "optimistic",
		"SECKILL_LOCK_TTL":          "1500ms",
		"SECKILL_LOCK_WAIT":         "2s",
		"SECKILL_ADMIN_TOKEN":       "s3cret-token",
		"SECKILL_STRATEGY_OVERRIDE": "true",
		"SECKILL_PER_USER_LIMIT":    "0",
		"SECKILL_FENCING":           "false",
		"SECKILL_BATCH":             "7",
		"SECKILL_WATCHDOG":          "false",
		"SECKILL_LOG_FORMAT":        "JSON",
		"SECKILL_MYSQL_MAX_CONNS":   "8",
		"SECKILL_DRAIN_DELAY":       "0s",
		"SECKILL_IP_LIMIT":          "20/1s",
		"SECKILL_TRUSTED_PROXIES":   "10.0.0.0/8, 127.0.0.1,::1/128",
	}
	c, err := config.Load(env(vars), false)
	if err != nil {
		t.Fatalf("Load(%v) error = %v", vars, err)
	}
	want := config.Config{
		Addr:             "0.0.0.0:9090",
		MySQLDSN:         "app:pw@tcp(db:3306)/seckill?parseTime=true",
		RedisAddrs:       []string{"r1:6379", "r2:6380", "r3:6381"},
		Strategy:         "optimistic",
		LockTTL:          1500 * time.Millisecond,
		LockWait:         2 * time.Second,
		AdminToken:       "s3cret-token",
		StrategyOverride: true,
		PerUserLimit:     0,
		Fencing:          false,
		Batch:            7,
		Watchdog:         false,
		LogFormat:        "json",
		MySQLMaxConns:    8,
		DrainDelay:       0,
		IPLimit:          20,
		IPWindow:         time.Second,
		TrustedProxies:   []string{"10.0.0.0/8", "127.0.0.1", "::1/128"},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load() = %+v; want %+v", c, want)
	}
}

func TestLoadOverrideUnderDemo(t *testing.T) {
	for _, tc := range []struct {
		value string
		demo  bool
		want  bool
	}{
		{"", false, false},
		{"", true, true},
		{"false", true, false},
		{"true", false, true},
	} {
		c, err := config.Load(env(map[string]string{"SECKILL_STRATEGY_OVERRIDE": tc.value}), tc.demo)
		if err != nil {
			t.Fatalf("Load(override=%q, demo=%v) error = %v", tc.value, tc.demo, err)
		}
		if c.StrategyOverride != tc.want {
			t.Errorf("Load(override=%q, demo=%v).StrategyOverride = %v; want %v", tc.value, tc.demo, c.StrategyOverride, tc.want)
		}
	}
}

func TestLoadAcceptsListenAddresses(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", ":8080", "[::1]:8080", "localhost:65535"} {
		c, err := config.Load(env(map[string]string{"SECKILL_ADDR": addr}), false)
		if err != nil || c.Addr != addr {
			t.Errorf("Load(SECKILL_ADDR=%s) = %q, %v; want %q, nil", addr, c.Addr, err, addr)
		}
	}
}

func TestLoadRejectsBadValues(t *testing.T) {
	tests := []struct {
		variable, value string
	}{
		{"SECKILL_LOCK_TTL", "abc"},
		{"SECKILL_LOCK_TTL", "8"},
		{"SECKILL_LOCK_TTL", "0"},
		{"SECKILL_LOCK_TTL", "0s"},
		{"SECKILL_LOCK_TTL", "-1s"},
		{"SECKILL_LOCK_WAIT", "5 seconds"},
		{"SECKILL_LOCK_WAIT", "0ms"},
		{"SECKILL_LOCK_WAIT", "-5s"},
		{"SECKILL_ADDR", "localhost"},
		{"SECKILL_ADDR", "127.0.0.1:8080:1"},
		{"SECKILL_ADDR", "127.0.0.1:abc"},
		{"SECKILL_ADDR", "127.0.0.1:65536"},
		{"SECKILL_ADDR", "127.0.0.1:-1"},
		{"SECKILL_REDIS_ADDRS", "localhost"},
		{"SECKILL_REDIS_ADDRS", ":6379"},
		{"SECKILL_REDIS_ADDRS", "r1:0"},
		{"SECKILL_REDIS_ADDRS", "r1:65536"},
		{"SECKILL_REDIS_ADDRS", "r1:port"},
		{"SECKILL_REDIS_ADDRS", "r1:6379,,r2:6379"},
		{"SECKILL_REDIS_ADDRS", "r1:6379,"},
		{"SECKILL_REDIS_ADDRS", "r1:6379,r1:6379"},
		{"SECKILL_STRATEGY_OVERRIDE", "maybe"},
		{"SECKILL_WATCHDOG", "sometimes"},
		{"SECKILL_BATCH", "0"},
		{"SECKILL_BATCH", "1001"},
		{"SECKILL_BATCH", "ten"},
		{"SECKILL_STRATEGY_OVERRIDE", "yes"},
		{"SECKILL_FENCING", "on"},
		{"SECKILL_PER_USER_LIMIT", "-1"},
		{"SECKILL_PER_USER_LIMIT", "abc"},
		{"SECKILL_PER_USER_LIMIT", "1.5"},
		{"SECKILL_PER_USER_LIMIT", "99999999999999999999999"},
		{"SECKILL_MYSQL_DSN", "not a dsn"},
		{"SECKILL_MYSQL_DSN", "root@tcp(127.0.0.1:3306"},
		{"SECKILL_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/db?timeout=forever"},
		{"SECKILL_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/db?charset=gbk"},
		{"SECKILL_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/db?charset=big5"},
		{"SECKILL_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/db?parseTime=true&charset=sjis"},
		{"SECKILL_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/db?charset=utf8mb4,cp932"},
		{"SECKILL_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/db?collation=utf8mb4_bin"},
		{"SECKILL_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/db?Charset=latin1"},
		{"SECKILL_LOG_FORMAT", "xml"},
		{"SECKILL_LOG_FORMAT", "logfmt"},
		{"SECKILL_MYSQL_MAX_CONNS", "0"},
		{"SECKILL_MYSQL_MAX_CONNS", "-4"},
		{"SECKILL_MYSQL_MAX_CONNS", "twenty"},
		{"SECKILL_MYSQL_MAX_CONNS", "10001"},
		{"SECKILL_DRAIN_DELAY", "-1s"},
		{"SECKILL_DRAIN_DELAY", "5"},
		{"SECKILL_IP_LIMIT", "20"},
		{"SECKILL_IP_LIMIT", "0/1s"},
		{"SECKILL_IP_LIMIT", "20/forever"},
		{"SECKILL_IP_LIMIT", "x/1s"},
		{"SECKILL_IP_LIMIT", "20/0s"},
		{"SECKILL_TRUSTED_PROXIES", "10.0.0.0/33"},
		{"SECKILL_TRUSTED_PROXIES", "nginx"},
	}
	for _, tc := range tests {
		t.Run(tc.variable+"="+tc.value, func(t *testing.T) {
			c, err := config.Load(env(map[string]string{tc.variable: tc.value}), false)
			if err == nil {
				t.Fatalf("Load(%s=%q) = %+v, nil; want an error", tc.variable, tc.value, c)
			}
			if !strings.Contains(err.Error(), tc.variable) {
				t.Errorf("Load(%s=%q) error = %q; want it to name %s", tc.variable, tc.value, err, tc.variable)
			}
		})
	}
}

// TestLoadDSNErrorHidesPassword: an error about a DSN names the variable,
// not the password in it.
func TestLoadDSNErrorHidesPassword(t *testing.T) {
	for _, dsn := range []string{
		"app:hunter2@tcp(127.0.0.1:3306",
		"app:hunter2@tcp(127.0.0.1:3306)/db?timeout=forever",
	} {
		_, err := config.Load(env(map[string]string{"SECKILL_MYSQL_DSN": dsn}), false)
		if err == nil {
			t.Errorf("Load(SECKILL_MYSQL_DSN=%q) error = nil; want an error", dsn)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Load(SECKILL_MYSQL_DSN=%q) error = %q; want no password in it", dsn, err)
		}
	}
}

// TestLogValueMasksSecrets prints the configuration the way the program
// does, through slog, and looks for the secrets in the text.
func TestLogValueMasksSecrets(t *testing.T) {
	vars := map[string]string{
		"SECKILL_MYSQL_DSN":   "app:hunter2-pw@tcp(db.internal:3306)/seckill?parseTime=true",
		"SECKILL_REDIS_ADDRS": "r1:6379,r2:6379,r3:6379",
		"SECKILL_ADMIN_TOKEN": "admin-tok-ABC123",
	}
	c, err := config.Load(env(vars), false)
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	for name, handler := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		slog.New(handler(&buf)).Info("seckill starting", "config", c)
		out := buf.String()
		for _, secret := range []string{"hunter2-pw", "admin-tok-ABC123"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s log of the config = %s; want %q masked", name, out, secret)
			}
		}
		for _, want := range []string{"app:***@tcp(db.internal:3306)/seckill", "r1:6379,r2:6379,r3:6379", "redlock"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s log of the config = %s; want it to contain %q", name, out, want)
			}
		}
	}

	// The JSON form has one field per setting and the token only as ***.
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "config", c)
	var line struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("decode %s: %v", buf.String(), err)
	}
	if got := line.Config["admin_token"]; got != "***" {
		t.Errorf("config.admin_token = %v; want ***", got)
	}
	if got := line.Config["lock_ttl"]; got != float64(2*time.Second) {
		t.Errorf("config.lock_ttl = %v; want %d (2s in nanoseconds)", got, 2*time.Second)
	}
	for _, key := range []string{"addr", "mysql_dsn", "redis_addrs", "lock", "lock_ttl", "watchdog", "lock_wait",
		"strategy_override", "per_user_limit", "fencing", "batch", "log_format", "mysql_max_conns", "drain_delay"} {
		if _, ok := line.Config[key]; !ok {
			t.Errorf("config log %s has no %q", buf.String(), key)
		}
	}
}

func TestLogValueEmbeddedStores(t *testing.T) {
	c, err := config.Load(env(nil), false)
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "config", c)
	if out := buf.String(); strings.Contains(out, c.AdminToken) || !strings.Contains(out, "config.mysql_dsn=(embedded)") ||
		!strings.Contains(out, "config.redis_addrs=(embedded)") {
		t.Errorf("config log = %s; want embedded stores named and the generated token masked", out)
	}
}
