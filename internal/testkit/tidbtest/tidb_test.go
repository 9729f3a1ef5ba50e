package tidbtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestTiDB runs two instances of one sale on TiDB (scripts/tidb.sh starts
// it; skipped without it) and checks what the contract promises on MySQL:
// under each safe strategy, with one lock per purchase and with batches of
// 50, every unit is sold exactly once and the answers are linearizable; a
// replayed request ID answers the first order from the other instance; a
// user's second purchase is over the limit, one after the other and when
// 10 users send 8 purchases each at once (apptest.LimitRuns: every safe
// strategy, redlock one purchase per hold, and their mix).
func TestTiDB(t *testing.T) {
	dsn := testenv.TiDB(t)
	// A long lock wait: the machine is shared and slow, and a lock_timeout
	// is not what this test is about.
	a := apptest.Start(t, map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_LOCK_WAIT": "30s"})
	b := a.Another(t)
	if !strings.Contains(a.Config.MySQLDSN, "seckill_test_") || a.Stores.DB.Dialector.Name() != "mysql" {
		t.Fatalf("instance runs on %q (%s); want the TiDB test database over the MySQL protocol", a.Config.MySQLDSN, a.Stores.DB.Dialector.Name())
	}
	var version string
	if err := a.Stores.DB.WithContext(t.Context()).Raw("SELECT VERSION()").Scan(&version).Error; err != nil {
		t.Fatalf("SELECT VERSION() = %v", err)
	}
	if !strings.Contains(version, "TiDB") {
		t.Fatalf("SELECT VERSION() = %q; want a TiDB server behind SECKILL_TEST_TIDB_DSN", version)
	}
	for _, batch := range []int{1, 50} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) { apptest.SellEverySafe(t, a, b, batch, apptest.SafeStrategies()) })
	}
	t.Run("replay and limit", func(t *testing.T) { apptest.ReplayAndLimit(t, a, b) })
	t.Run("order life", func(t *testing.T) {
		c := apptest.Start(t, map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_LOCK_WAIT": "30s", "SECKILL_PAYMENT_TIMEOUT": "1s"})
		apptest.OrderLife(t, a, b, c, []string{"redlock", "pessimistic"})
	})
	for _, run := range apptest.LimitRuns() {
		t.Run("limit under fire/"+run.Name(), func(t *testing.T) { apptest.CheckPerUserLimit(t, []*apptest.Instance{a, b}, run) })
	}
}
