package sqlproxy_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/sqlproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// setup returns a proxy in front of a fresh database of the test server,
// a pool through the proxy and a pool straight to the server, with a table
// t(id INT PRIMARY KEY, v MEDIUMTEXT).
func setup(t *testing.T) (*sqlproxy.Proxy, *sql.DB, *sql.DB) {
	t.Helper()
	dsn := testenv.MySQL(t)
	direct := testenv.OpenDB(t, dsn)
	p, proxied := testenv.Proxy(t, dsn)
	cfg, err := mysql.ParseDSN(proxied)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 2 * time.Second
	cfg.InterpolateParams, cfg.MultiStatements = true, true
	via := testenv.OpenDB(t, cfg.FormatDSN())
	if _, err := direct.Exec("CREATE TABLE t (id INT PRIMARY KEY, v MEDIUMTEXT)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	return p, via, direct
}

// count returns how many rows t has with id, read straight from the server.
func count(t *testing.T, direct *sql.DB, id int) int {
	t.Helper()
	var n int
	if err := direct.QueryRow("SELECT COUNT(*) FROM t WHERE id = ?", id).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// commitInBackground inserts id in a transaction through db and sends its
// COMMIT in a goroutine; the channel gets COMMIT's error.
func commitInBackground(t *testing.T, db *sql.DB, id int) <-chan error {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if _, err := tx.Exec("INSERT INTO t (id, v) VALUES (?, 'x')", id); err != nil {
		t.Fatalf("insert: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- tx.Commit() }()
	return done
}

func TestPass(t *testing.T) {
	p, via, direct := setup(t)
	// A multi-statement, and a packet of many TCP reads, pass intact.
	big := strings.Repeat("0123456789", 800_000) // 8 MB: many TCP reads
	if _, err := via.Exec("INSERT INTO t (id, v) VALUES (1, 'a'); INSERT INTO t (id, v) VALUES (2, ?)", big); err != nil {
		t.Fatalf("multi-statement: %v", err)
	}
	var got string
	if err := via.QueryRow("SELECT v FROM t WHERE id = 2").Scan(&got); err != nil || got != big {
		t.Fatalf("read back %d bytes, %v; want %d bytes", len(got), err, len(big))
	}
	if err := <-commitInBackground(t, via, 3); err != nil {
		t.Fatalf("Commit = %v; want nil", err)
	}
	if count(t, direct, 3) != 1 || p.CommitsSeen() != 1 || p.CommitRepliesHeld() != 0 {
		t.Errorf("row 3 %d, commits seen %d, held %d; want 1, 1, 0", count(t, direct, 3), p.CommitsSeen(), p.CommitRepliesHeld())
	}
}

// TestHoldCommitReplies: the COMMIT takes while its reply waits; Pass
// delivers it.
func TestHoldCommitReplies(t *testing.T) {
	p, via, direct := setup(t)
	p.HoldCommitReplies()
	done := commitInBackground(t, via, 1)
	testenv.Eventually(t, 10*time.Second, "a COMMIT reply held", func() bool { return p.CommitRepliesHeld() == 1 })
	testenv.Eventually(t, 10*time.Second, "the row committed", func() bool { return count(t, direct, 1) == 1 })
	select {
	case err := <-done:
		t.Fatalf("Commit returned %v while its reply was held", err)
	default:
	}
	// Other statements still pass.
	if _, err := via.Exec("INSERT INTO t (id, v) VALUES (2, 'y')"); err != nil {
		t.Fatalf("a statement while COMMIT replies are held: %v", err)
	}
	p.Pass()
	if err := <-done; err != nil {
		t.Fatalf("Commit = %v after Pass; want nil", err)
	}
}

// TestLostCommitReply: the COMMIT takes and its reply is lost: the client
// gets an error for a transaction that committed.
func TestLostCommitReply(t *testing.T) {
	p, via, direct := setup(t)
	p.HoldCommitReplies()
	done := commitInBackground(t, via, 1)
	testenv.Eventually(t, 10*time.Second, "a COMMIT reply held", func() bool { return p.CommitRepliesHeld() == 1 })
	if n := p.DropHeldAndCut(); n != 1 {
		t.Fatalf("DropHeldAndCut = %d; want 1", n)
	}
	if err := <-done; err == nil {
		t.Fatal("Commit = nil; want an error: its reply was lost")
	}
	if n := count(t, direct, 1); n != 1 {
		t.Errorf("rows committed = %d; want 1 (the COMMIT took)", n)
	}
	p.Pass()
	if _, err := via.Exec("INSERT INTO t (id, v) VALUES (2, 'y')"); err != nil {
		t.Errorf("a statement after the cut: %v", err)
	}
}

// TestEveryCommitReplyHeld: a COMMIT sent the moment the reply before it
// arrives is still recognised, and its reply held (the proxy once noted
// "that reply passed" after forwarding it, which could come after the
// client had already sent its COMMIT, and let that COMMIT's reply through).
func TestEveryCommitReplyHeld(t *testing.T) {
	p, via, _ := setup(t)
	p.HoldCommitReplies()
	for i := 1; i <= 200; i++ {
		done := commitInBackground(t, via, i)
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("COMMIT reply %d held or answered", i), func() bool {
			return p.CommitRepliesHeld() == i || len(done) > 0
		})
		if len(done) > 0 {
			t.Fatalf("COMMIT %d answered %v; want its reply held (%d held)", i, <-done, p.CommitRepliesHeld())
		}
		if n := p.DropHeldAndCut(); n != 1 {
			t.Fatalf("DropHeldAndCut = %d; want 1", n)
		}
		if err := <-done; err == nil {
			t.Fatalf("COMMIT %d = nil; want an error: its reply was lost", i)
		}
	}
}

// TestHoldReplies: a query's answer waits until Pass.
func TestHoldReplies(t *testing.T) {
	p, via, _ := setup(t)
	conn, err := via.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p.HoldReplies()
	done := make(chan error, 1)
	go func() {
		var one int
		done <- conn.QueryRowContext(context.Background(), "SELECT 1").Scan(&one)
	}()
	select {
	case err := <-done:
		t.Fatalf("SELECT answered %v while every reply was held", err)
	case <-time.After(300 * time.Millisecond):
	}
	p.Pass()
	if err := <-done; err != nil {
		t.Fatalf("SELECT = %v after Pass; want nil", err)
	}
}

// TestCut: open connections fail; new ones work.
func TestCut(t *testing.T) {
	p, via, _ := setup(t)
	conn, err := via.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.PingContext(context.Background()); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	p.Cut()
	if err := conn.PingContext(context.Background()); err == nil {
		t.Error("Ping on a cut connection = nil; want an error")
	}
	if err := via.Ping(); err != nil {
		t.Errorf("Ping on a new connection = %v; want nil", err)
	}
}

// TestPartition: a new connection does not get through (its client times
// out); Heal lets it.
func TestPartition(t *testing.T) {
	p, via, _ := setup(t)
	via.SetMaxIdleConns(0) // every call dials
	p.Partition()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err := via.PingContext(ctx)
	cancel()
	if err == nil {
		t.Fatal("Ping through a partition = nil; want an error")
	}
	p.Heal()
	if err := via.Ping(); err != nil {
		t.Fatalf("Ping after Heal = %v; want nil", err)
	}
}

// TestCloseWhileHolding: Close ends every goroutine, those holding a reply
// included, and a second Close says it was closed.
func TestCloseWhileHolding(t *testing.T) {
	dsn := testenv.MySQL(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sqlproxy.Start(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = p.Addr()
	via := testenv.OpenDB(t, cfg.FormatDSN())
	p.HoldReplies()
	done := make(chan error, 1)
	go func() { done <- via.Ping() }()
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s while a reply was held")
	}
	if err := <-done; err == nil {
		t.Error("Ping through a closed proxy = nil; want an error")
	}
	if err := p.Close(); !errors.Is(err, sqlproxy.ErrClosed) {
		t.Errorf("second Close = %v; want %v", err, sqlproxy.ErrClosed)
	}
}
