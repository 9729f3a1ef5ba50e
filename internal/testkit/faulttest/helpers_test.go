package faulttest_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

func TestMain(m *testing.M) {
	// These tests stop Redis nodes on purpose.
	testenv.QuietRedis()
	os.Exit(apptest.Main(m))
}

// start starts an instance of the program's binary with env over the
// harness's defaults (a database and Redis nodes of the test's own, the
// strategy override on) and no per-user limit: the buyers here are many
// purchases of one user each, or one user many times.
func start(t *testing.T, env map[string]string) *apptest.Program {
	t.Helper()
	vars := map[string]string{"SECKILL_PER_USER_LIMIT": "0"}
	maps.Copy(vars, env)
	return apptest.Exec(t, vars)
}

// lockAcquisitions reads, from in's /metrics, how many purchases have
// taken the strategy's lock on in: the count of
// seckill_lock_wait_seconds{strategy, result="acquired"}. The count only
// goes up, so a wait for it to rise cannot miss a lock that was held for a
// moment only, as a wait for the lock's key in Redis can.
func lockAcquisitions(t *testing.T, in *apptest.Program, strategy string) float64 {
	t.Helper()
	const family = "seckill_lock_wait_seconds"
	m := in.Metrics(t)
	if _, ok := m[family]; !ok {
		t.Fatalf("%s/metrics has no %s", in.URL, family)
	}
	return m.Sum(family, "strategy", strategy, "result", "acquired")
}

// waitForLockAcquired waits until in has taken the strategy's lock more
// than before times (a count read with lockAcquisitions before the
// purchase was sent): the purchase holds the lock, or has held it.
func waitForLockAcquired(t *testing.T, in *apptest.Program, strategy string, before float64) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("a purchase on %s to take the %s lock", in.URL, strategy), func() bool {
		return lockAcquisitions(t, in, strategy) > before
	})
}

// waitForLockKey waits until need of in's nodes hold the product's redlock
// key: a purchase holds the lock.
func waitForLockKey(t *testing.T, in *apptest.Program, id int64, need int) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("a purchase to take %s on %d nodes", in.LockKey("redlock", id), need), func() bool {
		return in.LockHolders(t, "redlock", id) >= need
	})
}

// lockPTTL returns the longest time to live the product's redlock key has
// on any of in's nodes (negative when no node has it): it only goes up when
// the holder's lease is renewed.
func lockPTTL(t *testing.T, in *apptest.Program, id int64) time.Duration {
	t.Helper()
	longest := time.Duration(-1)
	for _, n := range in.Nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialerRetries: 1})
		if ttl, err := c.PTTL(context.Background(), in.LockKey("redlock", id)).Result(); err == nil {
			longest = max(longest, ttl)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close the client of %s: %v", n.Addr, err)
		}
	}
	return longest
}

// readyz returns the status of in's GET /readyz, 0 when nothing answers
// within a second.
func readyz(in *apptest.Program) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := in.Send(ctx, http.MethodGet, "/readyz", "", nil)
	if err != nil {
		return 0
	}
	return r.Status
}

// orderRequestIDs reads, from the database of dsn itself, the request IDs
// of the product's orders.
func orderRequestIDs(t *testing.T, dsn string, product int64) map[string]bool {
	t.Helper()
	db := testenv.OpenDB(t, dsn)
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
