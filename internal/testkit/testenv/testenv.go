// Package testenv gives tests the real MariaDB/MySQL and redis-server
// processes they run against: a database of their own, Redis nodes and a key
// prefix of their own, all cleaned up when the test ends.
//
// SECKILL_TEST_MYSQL_DSN names the server (default
// root@tcp(127.0.0.1:3306)/). SECKILL_TEST_REDIS_ADDRS names three
// independent Redis nodes (scripts/testenv.sh starts them); when it is empty,
// each test starts its own redis-server processes.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/childproc"
)

// RandomName returns prefix followed by 12 random hex digits.
func RandomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return prefix + hex.EncodeToString(b)
}

// MySQLServerDSN is the DSN of the test server, without a database.
func MySQLServerDSN() string {
	if dsn := os.Getenv("SECKILL_TEST_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/"
}

// MySQL creates a database with a random name on the test server, drops it
// when t ends, and returns a DSN for it (with parseTime=true).
func MySQL(t testing.TB) string {
	t.Helper()
	return mysqlDatabase(t, true)
}

// MySQLNotCreated returns a DSN (with parseTime=true) for a database with a
// random name that does not exist yet, and drops it, if something created
// it, when t ends.
func MySQLNotCreated(t testing.TB) string {
	t.Helper()
	return mysqlDatabase(t, false)
}

func mysqlDatabase(t testing.TB, create bool) string {
	t.Helper()
	return databaseOn(t, "SECKILL_TEST_MYSQL_DSN", MySQLServerDSN(), create)
}

// databaseOn names a database with a random name on the server of
// serverDSN (read from the variable env), creates it when create is set,
// drops it when t ends, and returns a DSN for it (with parseTime=true).
func databaseOn(t testing.TB, env, serverDSN string, create bool) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatalf("testenv: %s: %v", env, err)
	}
	cfg.DBName = ""
	server, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("testenv: open the server of %s: %v", env, err)
	}
	t.Cleanup(func() {
		if err := server.Close(); err != nil {
			t.Errorf("testenv: close the server of %s: %v", env, err)
		}
	})
	name := RandomName("seckill_test_")
	if create {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := server.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
			t.Fatalf("testenv: create database on the server of %s (is it running? make test starts MariaDB): %v", env, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := server.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("testenv: drop database %s: %v", name, err)
		}
	})
	return withDatabase(cfg, name)
}

// DatabaseDSN returns a DSN (with parseTime=true) for the database name on
// the server of serverDSN, whether it exists or not: the program creates
// its database at start.
func DatabaseDSN(t testing.TB, serverDSN, name string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return withDatabase(cfg, name)
}

func withDatabase(cfg *mysql.Config, name string) string {
	cfg.DBName = name
	cfg.ParseTime = true
	return cfg.FormatDSN()
}

// RedisAddrs returns three independent Redis nodes: those of
// SECKILL_TEST_REDIS_ADDRS, or three that it starts for t.
func RedisAddrs(t testing.TB) []string {
	t.Helper()
	if v := os.Getenv("SECKILL_TEST_REDIS_ADDRS"); v != "" {
		return strings.Split(v, ",")
	}
	_, addrs := StartRedisNodes(t, 3)
	return addrs
}

// StartRedisNodes starts n redis-server processes (StartRedis), stopped
// when t ends, and returns them with their addresses, in the same order.
func StartRedisNodes(t testing.TB, n int) ([]*Redis, []string) {
	t.Helper()
	nodes := make([]*Redis, n)
	addrs := make([]string, n)
	for i := range nodes {
		nodes[i] = StartRedis(t)
		addrs[i] = nodes[i].Addr
	}
	return nodes, addrs
}

// Clients returns a client per address, closed when t ends. Like the
// program's clients they do not retry, so that a node that is down answers
// at once.
func Clients(t testing.TB, addrs []string) []redis.UniversalClient {
	t.Helper()
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	return clients
}

// KeyPrefix returns a key prefix of t's own and deletes its keys on every
// node in addrs when t ends.
func KeyPrefix(t testing.TB, addrs []string) string {
	t.Helper()
	prefix := RandomName("seckill-test:") + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, a := range addrs {
			c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
			iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
			// A node a test stopped on purpose cannot be cleaned: nothing is left on it.
			c.Close()
		}
	})
	return prefix
}

// Redis is a redis-server process a test started.
type Redis struct {
	Addr string
	port string
	dir  string
	// persistence are the settings of what the node keeps on disk.
	persistence []string
	cmd         *exec.Cmd
}

// StartRedis starts a redis-server on a free port, keeping nothing on disk,
// and stops it when t ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	return startRedis(t, "--save", "", "--appendonly", "no")
}

// StartRedisAOF starts a redis-server that writes every command to its
// append-only file and syncs it before it answers (appendonly yes,
// appendfsync always): a Restart after Stop (SIGKILL) finds everything it
// acknowledged.
func StartRedisAOF(t testing.TB) *Redis {
	t.Helper()
	return startRedis(t, "--save", "", "--appendonly", "yes", "--appendfsync", "always")
}

func startRedis(t testing.TB, persistence ...string) *Redis {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testenv: redis-server not found (make test installs it): %v", err)
	}
	r := &Redis{dir: t.TempDir(), persistence: persistence}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		r.port = port
		r.Addr = net.JoinHostPort("127.0.0.1", port)
		if err = r.start(path); err == nil {
			break
		}
		if attempt == 4 {
			t.Fatalf("testenv: start redis-server: %v", err)
		}
	}
	t.Cleanup(r.Stop)
	return r
}

func (r *Redis) start(path string) error {
	args := append([]string{"--port", r.port, "--bind", "127.0.0.1", "--dir", r.dir,
		"--logfile", filepath.Join(r.dir, "redis.log")}, r.persistence...)
	r.cmd = exec.Command(path, args...)
	childproc.DieWithParent(r.cmd)
	if err := r.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	var err error
	if Until(5*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		return err == nil
	}) {
		return nil
	}
	r.Stop()
	return fmt.Errorf("redis-server on %s did not answer: %w", r.Addr, err)
}

// Stop kills the process (SIGKILL: nothing is flushed on the way out); the
// node is down until Restart.
func (r *Redis) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill() // it may have exited already
	_ = r.cmd.Wait()         // the exit status of a killed process is not news
	r.cmd = nil
}

// Restart starts the node again on the same port: empty, or for
// StartRedisAOF's node with what its append-only file holds.
func (r *Redis) Restart(t testing.TB) {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := r.start(path); err != nil {
		t.Fatalf("testenv: restart redis-server: %v", err)
	}
}

// FreeAddr returns 127.0.0.1 and a port nothing listens on just now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// QuietRedis stops go-redis from logging every failed dial to stderr, for
// the tests that stop nodes on purpose (from TestMain). The errors
// themselves still reach the tests.
func QuietRedis() { redis.SetLogger(quietLog{}) }

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// Freeze stops the process (SIGSTOP), as a frozen VM would: its
// connections stay open and nothing answers, a replica's link to its
// master included. Thaw lets it go on.
func (r *Redis) Freeze(t testing.TB) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("testenv: freeze redis-server on %s: %v", r.Addr, err)
	}
}

// Thaw lets a frozen process go on (SIGCONT).
func (r *Redis) Thaw(t testing.TB) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("testenv: thaw redis-server on %s: %v", r.Addr, err)
	}
}

// StartRedisReplica starts a redis-server that replicates master (keeping
// nothing on disk), waits until its link is up and it has synced, and
// stops it when t ends.
func StartRedisReplica(t testing.TB, master *Redis) *Redis {
	t.Helper()
	host, port, _ := net.SplitHostPort(master.Addr)
	r := startRedis(t, "--save", "", "--appendonly", "no", "--replicaof", host, port)
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	var info string
	if !Until(10*time.Second, func() bool {
		info, _ = c.Info(context.Background(), "replication").Result()
		return strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0")
	}) {
		t.Fatalf("testenv: the replica on %s of %s did not sync in 10 s:\n%s", r.Addr, master.Addr, info)
	}
	return r
}

// OpenDB opens dsn with the MySQL driver, closed when t ends.
func OpenDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("testenv: open %s: %v", dsn, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
