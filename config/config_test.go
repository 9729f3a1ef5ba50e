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
			{"PaymentTimeout", c.PaymentTimeout, 15 * time.Minute},
			{"Fencing", c.Fencing, true},
			{"Batch", c.Batch, 100},
			{"AdminTokenGenerated", c.AdminTokenGenerated, true},
			{"LogFormat", c.LogFormat, "text"},
			{"MySQLMaxConns", c.MySQLMaxConns, 20},
			{"DrainDelay", c.DrainDelay, 5 * time.Second},
			{"IPLimit", c.IPLimit, 0},
			{"len(TrustedProxies)", len(c.TrustedProxies), 0},
			{"BuyerAuth", c.BuyerAuth, "open"},
			{"BuyerAudience", c.BuyerAudience, "seckill"},
			{"PaymentSecret", c.PaymentSecret, ""},
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
		"SECKILL_PAYMENT_TIMEOUT":   "0",
		"SECKILL_FENCING":           "false",
		"SECKILL_BATCH":             "7",
		"SECKILL_WATCHDOG":          "false",
		"SECKILL_LOG_FORMAT":        "JSON",
		"SECKILL_MYSQL_MAX_CONNS":   "8",
		"SECKILL_DRAIN_DELAY":       "0s",
		"SECKILL_IP_LIMIT":          "20/1s",
		"SECKILL_RESERVE_ACKS":      "1/250ms",
		"SECKILL_TRUSTED_PROXIES":   "10.0.0.0/8, 127.0.0.1,::1/128",
		"SECKILL_BUYER_AUTH":        "jwt",
		"SECKILL_BUYER_JWKS":        "https://id.example/jwks.json",
		"SECKILL_BUYER_ISSUER":      "https://id.example",
		"SECKILL_BUYER_AUDIENCE":    "shop",
		"SECKILL_PAYMENT_SECRET":    "whsec-1",
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
		ReserveAcks:      1,
		ReserveAckWait:   250 * time.Millisecond,
		TrustedProxies:   []string{"10.0.0.0/8", "127.0.0.1", "::1/128"},
		BuyerAuth:        "jwt",
		BuyerJWKS:        "https://id.example/jwks.json",
		BuyerIssuer:      "https://id.example",
		BuyerAudience:    "shop",
		PaymentSecret:    "whsec-1",
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

// TestLoadRejectsBadValues: each bad value, set alone, makes Load fail
// with an error that names its variable.
func TestLoadRejectsBadValues(t *testing.T) {
	badValues := []struct {
		variable string
		values   []string
	}{
		{"SECKILL_ADDR", []string{"localhost", "127.0.0.1:8080:1", "127.0.0.1:abc", "127.0.0.1:65536", "127.0.0.1:-1"}},
		{"SECKILL_REDIS_ADDRS", []string{"localhost", ":6379", "r1:0", "r1:65536", "r1:port",
			"r1:6379,,r2:6379", "r1:6379,", "r1:6379,r1:6379"}},
		{"SECKILL_MYSQL_DSN", []string{"not a dsn", "root@tcp(127.0.0.1:3306",
			"root@tcp(127.0.0.1:3306)/db?timeout=forever",
			"root@tcp(127.0.0.1:3306)/db?charset=gbk",
			"root@tcp(127.0.0.1:3306)/db?charset=big5",
			"root@tcp(127.0.0.1:3306)/db?parseTime=true&charset=sjis",
			"root@tcp(127.0.0.1:3306)/db?charset=utf8mb4,cp932",
			"root@tcp(127.0.0.1:3306)/db?collation=utf8mb4_bin",
			"root@tcp(127.0.0.1:3306)/db?Charset=latin1"}},
		{"SECKILL_LOCK_TTL", []string{"abc", "8", "0", "0s", "-1s"}},
		{"SECKILL_LOCK_WAIT", []string{"5 seconds", "0ms", "-5s"}},
		{"SECKILL_DRAIN_DELAY", []string{"-1s", "5"}},
		{"SECKILL_STRATEGY_OVERRIDE", []string{"maybe", "yes"}},
		{"SECKILL_WATCHDOG", []string{"sometimes"}},
		{"SECKILL_FENCING", []string{"on"}},
		{"SECKILL_BATCH", []string{"0", "1001", "ten"}},
		{"SECKILL_PER_USER_LIMIT", []string{"-1", "abc", "1.5", "99999999999999999999999"}},
		{"SECKILL_PAYMENT_TIMEOUT", []string{"15", "-1m", "soon"}},
		{"SECKILL_MYSQL_MAX_CONNS", []string{"0", "-4", "twenty", "10001"}},
		{"SECKILL_LOG_FORMAT", []string{"xml", "logfmt"}},
		{"SECKILL_IP_LIMIT", []string{"20", "0/1s", "20/forever", "x/1s", "20/0s"}},
		{"SECKILL_TRUSTED_PROXIES", []string{"10.0.0.0/33", "nginx"}},
		{"SECKILL_RESERVE_ACKS", []string{"1", "1/0ms", "-1/1s", "one/1s", "1/forever", "17/1s", "1/2s"}},
		{"SECKILL_BUYER_AUTH", []string{"oauth", "none", "JWT2"}},
	}
	for _, bad := range badValues {
		for _, value := range bad.values {
			t.Run(bad.variable+"="+value, func(t *testing.T) {
				c, err := config.Load(env(map[string]string{bad.variable: value}), false)
				if err == nil {
					t.Fatalf("Load(%s=%q) = %+v, nil; want an error", bad.variable, value, c)
				}
				if !strings.Contains(err.Error(), bad.variable) {
					t.Errorf("Load(%s=%q) error = %q; want it to name %s", bad.variable, value, err, bad.variable)
				}
			})
		}
	}
}

// TestLoadBuyerAuth: under jwt the keys must be findable, from a JWK Set
// (a URL or a file) or the issuer's discovery; each wrong pair names the
// variable to fix.
func TestLoadBuyerAuth(t *testing.T) {
	for _, tc := range []struct {
		vars    map[string]string
		wantErr string // the variable named; "": valid
	}{
		{map[string]string{"SECKILL_BUYER_AUTH": "jwt"}, "SECKILL_BUYER_JWKS"},
		{map[string]string{"SECKILL_BUYER_AUTH": "jwt", "SECKILL_BUYER_ISSUER": "seckill-idp"}, "SECKILL_BUYER_ISSUER"},
		{map[string]string{"SECKILL_BUYER_AUTH": "jwt", "SECKILL_BUYER_JWKS": "ftp://keys.example/jwks.json"}, "SECKILL_BUYER_JWKS"},
		{map[string]string{"SECKILL_BUYER_AUTH": "jwt", "SECKILL_BUYER_JWKS": "/etc/seckill/jwks.json"}, ""},
		{map[string]string{"SECKILL_BUYER_AUTH": "JWT", "SECKILL_BUYER_JWKS": "https://id.example/jwks.json"}, ""},
		{map[string]string{"SECKILL_BUYER_AUTH": "jwt", "SECKILL_BUYER_ISSUER": "https://id.example"}, ""},
		{map[string]string{"SECKILL_BUYER_JWKS": "ftp://ignored-under-open"}, ""},
	} {
		c, err := config.Load(env(tc.vars), false)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("Load(%v) = %v; want valid", tc.vars, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("Load(%v) = %+v, %v; want an error naming %s", tc.vars, c, err, tc.wantErr)
		}
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
		"SECKILL_MYSQL_DSN":      "app:hunter2-pw@tcp(db.internal:3306)/seckill?parseTime=true",
		"SECKILL_REDIS_ADDRS":    "r1:6379,r2:6379,r3:6379",
		"SECKILL_ADMIN_TOKEN":    "admin-tok-ABC123",
		"SECKILL_PAYMENT_SECRET": "pay-secret-XYZ789",
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
		for _, secret := range []string{"hunter2-pw", "admin-tok-ABC123", "pay-secret-XYZ789"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s log of the config = %s; want %q masked", name, out, secret)
			}
		}
		for _, want := range []string{"app:***@tcp(db.internal:3306)/seckill", "r1:6379,r2:6379,r3:6379", "redlock", "buyers are not authenticated"} {
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
		"strategy_override", "per_user_limit", "payment_timeout", "fencing", "batch", "log_format", "mysql_max_conns", "drain_delay"} {
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
