package store_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// openEmbeddedRedis starts the embedded nodes and stops them when t ends. It
// returns a client per node and the nodes' addresses.
func openEmbeddedRedis(t *testing.T) ([]redis.UniversalClient, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	clients, closeNodes, err := store.OpenRedisNodes(ctx, nil)
	if err != nil {
		t.Fatalf("OpenRedisNodes(nil) = %v; want embedded nodes", err)
	}
	t.Cleanup(func() {
		if err := closeNodes(); err != nil {
			t.Errorf("close embedded redis: %v", err)
		}
	})
	addrs := make([]string, len(clients))
	for i, c := range clients {
		rc, ok := c.(*redis.Client)
		if !ok {
			t.Fatalf("client %d is a %T; want *redis.Client", i, c)
		}
		addrs[i] = rc.Options().Addr
	}
	return clients, addrs
}

func TestEmbedded(t *testing.T) {
	for _, tc := range []struct {
		dsn               string
		addrs             []string
		wantSQL, wantNode bool
	}{
		{"", nil, true, true},
		{"root@tcp(db:3306)/seckill", nil, false, true},
		{"", []string{"r:6379"}, true, false},
		{"root@tcp(db:3306)/seckill", []string{"r:6379"}, false, false},
	} {
		gotSQL, gotNode := store.Embedded(tc.dsn, tc.addrs)
		if gotSQL != tc.wantSQL || gotNode != tc.wantNode {
			t.Errorf("Embedded(%q, %q) = %v, %v; want %v, %v", tc.dsn, tc.addrs, gotSQL, gotNode, tc.wantSQL, tc.wantNode)
		}
	}
}

// TestEmbeddedRedisNodes checks that three independent nodes answer on
// distinct loopback ports.
func TestEmbeddedRedisNodes(t *testing.T) {
	clients, addrs := openEmbeddedRedis(t)
	if len(clients) != store.EmbeddedRedisNodes || store.EmbeddedRedisNodes != 3 {
		t.Fatalf("OpenRedisNodes(nil) gave %d clients; want 3", len(clients))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for i, c := range clients {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("PING node %d (%s) = %v", i, addrs[i], err)
		}
		host, port, err := net.SplitHostPort(addrs[i])
		if err != nil || host != "127.0.0.1" {
			t.Errorf("node %d address %q; want 127.0.0.1:port", i, addrs[i])
		}
		if seen[port] {
			t.Errorf("node %d port %s used twice: %q", i, port, addrs)
		}
		seen[port] = true
	}
	// Independent: a key written on one node is not on the others.
	if err := clients[0].Set(ctx, "only-on-0", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients[1:] {
		if err := c.Get(ctx, "only-on-0").Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("GET on node %d of a key set on node 0 = %v; want redis.Nil", i+1, err)
		}
	}
}

// TestEmbeddedRedisExpiresByClock checks that a TTL runs down in real time
// (miniredis alone would keep the key for ever).
func TestEmbeddedRedisExpiresByClock(t *testing.T) {
	clients, _ := openEmbeddedRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, c := range clients {
		start := time.Now()
		if err := c.Set(ctx, "lease", "v", 200*time.Millisecond).Err(); err != nil {
			t.Fatalf("SET PX on node %d: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond) // the scenario: time passes, less than the TTL
		err := c.Get(ctx, "lease").Err()
		if time.Since(start) < 150*time.Millisecond && err != nil {
			t.Errorf("node %d: GET 50 ms into a 200 ms lease = %v; want the key", i, err)
		}
		var last error
		gone := testenv.Until(3*time.Second, func() bool {
			last = c.Get(ctx, "lease").Err()
			return errors.Is(last, redis.Nil)
		})
		// start was before the SET: at least this long passed since it.
		if took := time.Since(start); !gone {
			t.Errorf("node %d: GET %v after SET PX 200 = %v; want redis.Nil", i, took, last)
		} else if took < 200*time.Millisecond-store.MiniRedisTick {
			t.Errorf("node %d: the key of SET PX 200 was gone %v after it; want it kept to its TTL (within a tick)", i, took)
		}
	}
}

func TestEmbeddedRedisCommands(t *testing.T) {
	clients, _ := openEmbeddedRedis(t)
	c := clients[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	t.Run("SET NX PX", func(t *testing.T) {
		ok, err := c.SetNX(ctx, "nx", "first", time.Minute).Result()
		if err != nil || !ok {
			t.Fatalf("first SET NX = %v, %v; want true, nil", ok, err)
		}
		ok, err = c.SetNX(ctx, "nx", "second", time.Minute).Result()
		if err != nil || ok {
			t.Fatalf("second SET NX = %v, %v; want false, nil", ok, err)
		}
		if got, err := c.Get(ctx, "nx").Result(); err != nil || got != "first" {
			t.Errorf("GET = %q, %v; want first", got, err)
		}
		if ttl, err := c.PTTL(ctx, "nx").Result(); err != nil || ttl <= 0 || ttl > time.Minute {
			t.Errorf("PTTL = %v, %v; want (0, 1m]", ttl, err)
		}
	})

	t.Run("GETSET", func(t *testing.T) {
		if err := c.Set(ctx, "gs", "old", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := c.GetSet(ctx, "gs", "new").Result(); err != nil || got != "old" {
			t.Errorf("GETSET = %q, %v; want old", got, err)
		}
		if got, err := c.Get(ctx, "gs").Result(); err != nil || got != "new" {
			t.Errorf("GET after GETSET = %q, %v; want new", got, err)
		}
	})

	t.Run("EVALSHA compare-and-delete", func(t *testing.T) {
		const script = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`
		sha, err := c.ScriptLoad(ctx, script).Result()
		if err != nil {
			t.Fatalf("SCRIPT LOAD = %v", err)
		}
		if err := c.Set(ctx, "cad", "mine", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := c.EvalSha(ctx, sha, []string{"cad"}, "theirs").Int(); err != nil || n != 0 {
			t.Errorf("EVALSHA with a foreign token = %d, %v; want 0", n, err)
		}
		if n, err := c.EvalSha(ctx, sha, []string{"cad"}, "mine").Int(); err != nil || n != 1 {
			t.Errorf("EVALSHA with the owner's token = %d, %v; want 1", n, err)
		}
		if err := c.Get(ctx, "cad").Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("GET after delete = %v; want redis.Nil", err)
		}
		// redis.Script tries EVALSHA and falls back to EVAL, as the lockers do.
		if n, err := redis.NewScript(script).Run(ctx, c, []string{"cad"}, "mine").Int(); err != nil || n != 0 {
			t.Errorf("Script.Run on a missing key = %d, %v; want 0", n, err)
		}
	})
}

// TestEmbeddedRedisRedsync runs redsync's Redlock over the three embedded
// nodes: exclusion, release, and the expiry of an abandoned lock.
func TestEmbeddedRedisRedsync(t *testing.T) {
	clients, _ := openEmbeddedRedis(t)
	pools := make([]redsyncredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = goredis.NewPool(c)
	}
	rs := redsync.New(pools...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// redsync gives each node expiry × 5% to answer by default: 15 ms here,
	// which a loaded machine misses; half the expiry is still well inside it.
	a := rs.NewMutex("product:1", redsync.WithExpiry(300*time.Millisecond), redsync.WithTries(1), redsync.WithTimeoutFactor(0.5))
	if err := a.TryLockContext(ctx); err != nil {
		t.Fatalf("first TryLock = %v; want nil", err)
	}
	b := rs.NewMutex("product:1", redsync.WithExpiry(time.Second), redsync.WithTries(1), redsync.WithTimeoutFactor(0.5))
	var taken *redsync.ErrTaken
	if err := b.TryLockContext(ctx); !errors.As(err, &taken) {
		t.Fatalf("TryLock of a held lock = %v; want ErrTaken", err)
	}
	if ok, err := a.ExtendContext(ctx); err != nil || !ok {
		t.Fatalf("Extend = %v, %v; want true", ok, err)
	}

	// a abandons its lock: it must expire by the clock, on every node.
	testenv.Eventually(t, 3*time.Second, "the abandoned lock's key to expire on every node", func() bool {
		for _, c := range clients {
			if n, err := c.Exists(ctx, "product:1").Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
	if err := b.TryLockContext(ctx); err != nil {
		t.Fatalf("TryLock after the abandoned lease ran out = %v; want nil", err)
	}
	// redsync's release script tells a key held by someone else (ErrTaken)
	// from one that is gone (ErrLockAlreadyExpired), as on a real Redis.
	if ok, err := a.UnlockContext(ctx); ok || !errors.As(err, &taken) {
		t.Errorf("Unlock by the expired holder while b holds = %v, %v; want false, ErrTaken", ok, err)
	}
	c := rs.NewMutex("product:1", redsync.WithTries(1))
	if err := c.TryLockContext(ctx); !errors.As(err, &taken) {
		t.Errorf("TryLock after a foreign Unlock = %v; want ErrTaken (b still holds)", err)
	}
	if ok, err := b.UnlockContext(ctx); err != nil || !ok {
		t.Errorf("Unlock by the holder = %v, %v; want true, nil", ok, err)
	}
	if ok, err := a.UnlockContext(ctx); ok || !errors.Is(err, redsync.ErrLockAlreadyExpired) {
		t.Errorf("Unlock by the expired holder of a free lock = %v, %v; want false, ErrLockAlreadyExpired", ok, err)
	}
	if err := c.TryLockContext(ctx); err != nil {
		t.Errorf("TryLock after Unlock = %v; want nil", err)
	} else if ok, err := c.UnlockContext(ctx); err != nil || !ok {
		t.Errorf("Unlock = %v, %v; want true, nil", ok, err)
	}
}

// TestEmbeddedRedisCloserStopsNodes checks that after the closer every port
// refuses connections, and that a second call is harmless.
func TestEmbeddedRedisCloserStopsNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	clients, closeNodes, err := store.OpenRedisNodes(ctx, nil)
	if err != nil {
		t.Fatalf("OpenRedisNodes(nil) = %v", err)
	}
	var addrs []string
	for _, c := range clients {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING = %v", err)
		}
		addrs = append(addrs, c.(*redis.Client).Options().Addr)
	}
	if err := closeNodes(); err != nil {
		t.Fatalf("close = %v; want nil", err)
	}
	for _, a := range addrs {
		if conn, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			conn.Close()
			t.Errorf("dial %s after close succeeded; want connection refused", a)
		}
	}
	if err := closeNodes(); err != nil {
		t.Errorf("second close = %v; want nil", err)
	}
}

func TestStartMiniRedisRejectsZero(t *testing.T) {
	if _, _, err := store.StartMiniRedis(0); err == nil {
		t.Error("StartMiniRedis(0) = nil error; want an error")
	}
}

// TestMiniRedisStopAndRestartEmpty: a stopped node refuses connections while
// the others answer; started again it answers on the same address with
// none of its keys or cached scripts, as a redis-server restarted without
// persistence.
func TestMiniRedisStopAndRestartEmpty(t *testing.T) {
	m, err := store.StartMiniRedisNodes(3)
	if err != nil {
		t.Fatalf("StartMiniRedisNodes(3) = %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs := m.Addrs()
	clients := store.OpenRedis(addrs)
	t.Cleanup(func() {
		if err := store.CloseRedis(clients); err != nil {
			t.Errorf("CloseRedis = %v", err)
		}
	})
	script := redis.NewScript(`return 7`)
	for i, c := range clients {
		if err := c.Set(ctx, "k", i, 0).Err(); err != nil {
			t.Fatalf("SET on node %d = %v", i, err)
		}
		if err := script.Load(ctx, c).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD on node %d = %v", i, err)
		}
	}

	if err := m.Stop(1); err != nil {
		t.Fatalf("Stop(1) = %v", err)
	}
	if m.Up(1) || !m.Up(0) || !m.Up(2) {
		t.Errorf("Up after Stop(1) = %t, %t, %t; want true, false, true", m.Up(0), m.Up(1), m.Up(2))
	}
	if conn, err := net.DialTimeout("tcp", addrs[1], time.Second); err == nil {
		conn.Close()
		t.Errorf("dial stopped node %s succeeded; want connection refused", addrs[1])
	}
	if err := clients[1].Get(ctx, "k").Err(); err == nil {
		t.Errorf("GET on the stopped node = nil error; want an error")
	}
	if got, err := clients[0].Get(ctx, "k").Result(); err != nil || got != "0" {
		t.Errorf("GET on node 0 while node 1 is down = %q, %v; want \"0\"", got, err)
	}

	if err := m.Start(1); err != nil {
		t.Fatalf("Start(1) = %v", err)
	}
	if got := m.Addrs()[1]; got != addrs[1] {
		t.Errorf("node 1 restarted on %s; want its address %s", got, addrs[1])
	}
	if err := clients[1].Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k on the restarted node = %v; want redis.Nil (empty)", err)
	}
	if ok, err := clients[1].ScriptExists(ctx, script.Hash()).Result(); err != nil || len(ok) != 1 || ok[0] {
		t.Errorf("SCRIPT EXISTS on the restarted node = %v, %v; want [false]", ok, err)
	}
	if got, err := clients[2].Get(ctx, "k").Result(); err != nil || got != "2" {
		t.Errorf("GET on node 2 = %q, %v; want \"2\" (untouched)", got, err)
	}

	if err := m.Restart(2); err != nil {
		t.Fatalf("Restart(2) = %v", err)
	}
	if err := clients[2].Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k after Restart(2) = %v; want redis.Nil (empty)", err)
	}
	if err := m.Stop(3); err == nil {
		t.Errorf("Stop(3) of 3 nodes = nil; want an error")
	}
}
