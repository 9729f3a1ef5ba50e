package testenv

import (
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/sqlproxy"
)

// Proxy starts a sqlproxy in front of the server of dsn, closed when t
// ends, and returns it with dsn rewritten to go through it.
func Proxy(t testing.TB, dsn string) (*sqlproxy.Proxy, string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	p, err := sqlproxy.Start(cfg.Addr)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("testenv: close the proxy: %v", err)
		}
	})
	cfg.Addr = p.Addr()
	return p, cfg.FormatDSN()
}
