package testenv

import (
	"os"
	"testing"
)

// TiDBServerDSN returns the DSN of the test TiDB server, without a
// database: SECKILL_TEST_TIDB_DSN, which scripts/tidb.sh sets. Without it
// t is skipped, saying how to run it.
func TiDBServerDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("SECKILL_TEST_TIDB_DSN")
	if dsn == "" {
		t.Skip("SECKILL_TEST_TIDB_DSN is not set: no TiDB server to test against " +
			"(run make test-tidb, which builds tidb-server from the Go module proxy and starts one)")
	}
	return dsn
}

// TiDB creates a database with a random name on the test TiDB server, drops
// it when t ends, and returns a DSN for it (with parseTime=true). Without a
// server (SECKILL_TEST_TIDB_DSN unset) t is skipped.
func TiDB(t testing.TB) string {
	t.Helper()
	return databaseOn(t, "SECKILL_TEST_TIDB_DSN", TiDBServerDSN(t), true)
}
