// Package tidbtest holds the test of the service on a MySQL-protocol
// distributed database: TiDB's SQL layer (tidb-server on its embedded
// store, unistore), which scripts/tidb.sh builds from the Go module proxy
// and starts. Two instances sell one product under each safe strategy,
// and the audits, the history of answers, replays and the per-user limit
// are checked as on MariaDB. Without SECKILL_TEST_TIDB_DSN the test is
// skipped: run make test-tidb. docs/distributed.md tells what the service
// asks of its database and what changes on TiDB and Vitess. It has no
// code of its own outside its tests.
package tidbtest
