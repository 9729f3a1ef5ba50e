package testenv

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// LockingReads returns how many connections to db's database (the test's
// own), other than the one asking, are running a locking read (SELECT ...
// FOR UPDATE) right now: while the test holds the row such a read wants,
// how many wait for it. It reads the process list, which is live; InnoDB's
// INNODB_TRX is not (it serves a copy that is only renewed once nobody has
// read it for 0.1 s, so a test polling it sees the same copy for ever). The
// server must let db's user see every connection (PROCESS), as root does.
func LockingReads(t testing.TB, db *sql.DB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND COMMAND = 'Query'
		AND INFO LIKE 'SELECT %' AND INFO LIKE '%FOR UPDATE%'`).Scan(&n)
	if err != nil {
		t.Fatalf("testenv: count the locking reads: %v", err)
	}
	return n
}
