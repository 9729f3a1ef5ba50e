package faulttest_test

import (
	"context"
	"database/sql"
	"errors"
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

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testenv"
)

// binary is the seckill program the tests run, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	// go-redis logs every failed dial to stderr; these tests stop nodes on
	// purpose. The errors themselves still reach the tests.
	redis.SetLogger(quietRedisLog{})
	dir, err := os.MkdirTemp("", "seckill-faulttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulttest:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "seckill")
	if out, err := exec.Command("go", "build", "-o", binary, "github.com/seckill/seckill").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faulttest: build the service: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}

// instance is one seckill process.
type instance struct {
	url string
	c   *client.Client
	cmd *exec.Cmd
	out *testenv.Buffer
	// exited is closed once the process has exited, exitErr set.
	exited  chan struct{}
	exitErr error
}

// deployment is what a test's instances share: a database, Redis nodes
// and the admin token.
type deployment struct {
	t     *testing.T
	dsn   string
	nodes []*testenv.Redis
	token string
	env   map[string]string
}

// newDeployment makes a database of the test's own on the server dsn (the
// shared test server when ""), and three redis-server nodes of its own.
func newDeployment(t *testing.T, serverDSN string, env map[string]string) *deployment {
	t.Helper()
	d := &deployment{t: t, token: testenv.RandomName("admin-"), env: env}
	if serverDSN == "" {
		d.dsn = testenv.MySQL(t)
	} else {
		cfg, err := mysql.ParseDSN(serverDSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName, cfg.ParseTime = "seckill", true
		d.dsn = cfg.FormatDSN()
	}
	for range 3 {
		d.nodes = append(d.nodes, testenv.StartRedis(t))
	}
	return d
}

func (d *deployment) redisAddrs() string {
	var addrs []string
	for _, n := range d.nodes {
		addrs = append(addrs, n.Addr)
	}
	return strings.Join(addrs, ",")
}

// start runs an instance and waits until it answers /healthz; it is killed
// when the test ends if still running.
func (d *deployment) start() *instance {
	t := d.t
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	in := &instance{url: "http://" + addr, out: &testenv.Buffer{}, exited: make(chan struct{})}
	in.c = &client.Client{BaseURL: in.url, AdminToken: d.token, CallTimeout: 30 * time.Second}
	in.cmd = exec.Command(binary)
	in.cmd.Env = append(os.Environ(),
		"SECKILL_ADDR="+addr,
		"SECKILL_MYSQL_DSN="+d.dsn,
		"SECKILL_REDIS_ADDRS="+d.redisAddrs(),
		"SECKILL_ADMIN_TOKEN="+d.token,
		"SECKILL_STRATEGY_OVERRIDE=true",
		"SECKILL_PER_USER_LIMIT=0",
	)
	for k, v := range d.env {
		in.cmd.Env = append(in.cmd.Env, k+"="+v)
	}
	in.cmd.Stdout, in.cmd.Stderr = in.out, in.out
	testenv.DieWithParent(in.cmd)
	if err := in.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	go func() {
		in.exitErr = in.cmd.Wait()
		close(in.exited)
	}()
	t.Cleanup(in.kill)
	answered := testenv.Until(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := in.c.Healthz(ctx)
		cancel()
		if err == nil {
			return true
		}
		select {
		case <-in.exited:
			t.Fatalf("the instance exited at start: %v\n%s", in.exitErr, in.out)
		default:
		}
		return false
	})
	if !answered {
		t.Fatalf("the instance did not answer /healthz within 30s\n%s", in.out)
	}
	return in
}

// kill kills the process at once (SIGKILL), as a crash would.
func (in *instance) kill() {
	_ = in.cmd.Process.Signal(syscall.SIGKILL) // gone already is fine: exited says so
	<-in.exited
}

// terminate sends SIGTERM, as an orchestrator stopping it would (again,
// if it was sent already), and waits up to limit for the process to exit;
// it returns how the process exited.
func (in *instance) terminate(limit time.Duration) error {
	_ = in.cmd.Process.Signal(syscall.SIGTERM) // it may be exiting already: exited says how
	select {
	case <-in.exited:
		return in.exitErr
	case <-time.After(limit):
		return errors.New("still running after SIGTERM")
	}
}

// product creates a product with stock units through in.
func (in *instance) product(t *testing.T, stock int64) int64 {
	t.Helper()
	p, err := in.c.CreateProduct(context.Background(), testenv.RandomName("product-"), stock)
	if err != nil {
		t.Fatalf("create a product: %v", err)
	}
	return p.ID
}

// audit reads the product's audit through in.
func (in *instance) audit(t *testing.T, id int64) client.Audit {
	t.Helper()
	a, err := in.c.Audit(context.Background(), id)
	if err != nil {
		t.Fatalf("audit product %d: %v", id, err)
	}
	return a
}

// wantConsistent reads the product's audit, and fails t unless the stock
// invariant held (stock >= 0, initial - stock = units sold).
func (in *instance) wantConsistent(t *testing.T, id int64) client.Audit {
	t.Helper()
	a := in.audit(t, id)
	if !a.Consistent || a.Stock < 0 {
		t.Errorf("audit of product %d = %+v; want stock >= 0 and initial - stock = units sold", id, a)
	}
	return a
}

// answer is what one purchase got.
type answer struct {
	requestID string
	order     client.Order
	code      string // "" for 201, the error code, or "transport"
	status    int
	at        time.Time     // when it came
	took      time.Duration // how long it took
}

// buy makes one purchase and says what it got.
func buy(in *instance, id int64, p client.Purchase, o client.Override) answer {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ord, err := in.c.Buy(ctx, id, p, o)
	a := answer{requestID: p.RequestID, order: ord, at: time.Now(), took: time.Since(start), status: 201}
	var apiErr *client.Error
	switch {
	case err == nil:
	case errors.As(err, &apiErr):
		a.code, a.status = apiErr.Code, apiErr.Status
	default:
		a.code, a.status = "transport", 0
	}
	return a
}

// waitForLockKey waits until a majority of the nodes hold the product's
// lock key: a purchase holds the lock.
func (d *deployment) waitForLockKey(t *testing.T, id int64, need int) {
	t.Helper()
	key := fmt.Sprintf("seckill:lock:redlock:product:%d", id)
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("a purchase to take %s on %d nodes", key, need), func() bool {
		held := 0
		for _, n := range d.nodes {
			c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialerRetries: 1})
			if v, err := c.Exists(context.Background(), key).Result(); err == nil && v == 1 {
				held++
			}
			if err := c.Close(); err != nil {
				t.Errorf("close the client of %s: %v", n.Addr, err)
			}
		}
		return held >= need
	})
}

// lockAcquisitions reads, from in's /metrics, how many purchases have
// taken the strategy's lock on in: the count of
// seckill_lock_wait_seconds{strategy, result="acquired"}. The count only
// goes up, so a wait for it to rise cannot miss a lock that was held for a
// moment only, as a wait for the lock's key in Redis can.
func (in *instance) lockAcquisitions(t *testing.T, strategy string) float64 {
	t.Helper()
	const family = "seckill_lock_wait_seconds"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := in.c.Metrics(ctx)
	if err != nil {
		t.Fatalf("read the metrics of %s: %v", in.url, err)
	}
	if _, ok := m[family]; !ok {
		t.Fatalf("%s/metrics has no %s", in.url, family)
	}
	return m.Sum(family, "strategy", strategy, "result", "acquired")
}

// waitForLockAcquired waits until in has taken the strategy's lock more
// than before times (a count read with lockAcquisitions before the
// purchase was sent): the purchase holds the lock, or has held it.
func (in *instance) waitForLockAcquired(t *testing.T, strategy string, before float64) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("a purchase on %s to take the %s lock", in.url, strategy), func() bool {
		return in.lockAcquisitions(t, strategy) > before
	})
}

// lockPTTL returns the longest time to live the product's lock key has on
// any node (negative when no node has it): it only goes up when the
// holder's lease is renewed.
func (d *deployment) lockPTTL(t *testing.T, id int64) time.Duration {
	t.Helper()
	key := fmt.Sprintf("seckill:lock:redlock:product:%d", id)
	longest := time.Duration(-1)
	for _, n := range d.nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialerRetries: 1})
		if ttl, err := c.PTTL(context.Background(), key).Result(); err == nil {
			longest = max(longest, ttl)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close the client of %s: %v", n.Addr, err)
		}
	}
	return longest
}

func ptr[T any](v T) *T { return &v }

// orderRequestIDs reads, from the database itself, the request IDs of the
// product's orders.
func (d *deployment) orderRequestIDs(t *testing.T, product int64) map[string]bool {
	t.Helper()
	db, err := sql.Open("mysql", d.dsn)
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT request_id FROM orders WHERE product_id = ? AND request_id IS NOT NULL", product)
	if err != nil {
		t.Fatalf("read the orders of product %d: %v", product, err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("read the orders of product %d: %v", product, err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the orders of product %d: %v", product, err)
	}
	return ids
}
