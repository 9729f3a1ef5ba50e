package locker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
)

// TestRedlockRoundsShareRoundTrips: many Redlock rounds at once, on many
// keys and on one key that all of them contend for, share pipelines to the
// nodes (fewer pipelines than commands), and each round still gets its own
// answer: every key is taken and given back, and no two holders of the
// shared key are ever inside at once.
func TestRedlockRoundsShareRoundTrips(t *testing.T) {
	addrs := testenv.RedisAddrs(t)
	prefix := testenv.KeyPrefix(t, addrs)
	l := locker.NewRedlock(testenv.Clients(t, addrs), locker.Options{TTL: 10 * time.Second, Wait: 20 * time.Second})
	ctx := context.Background()
	const workers, rounds = 48, 10
	var inside, overlaps, shared atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				key := fmt.Sprintf("%sown:%d:%d", prefix, w, r)
				if r%2 == 1 {
					key = prefix + "shared"
				}
				lease, err := l.Lock(ctx, key)
				if err != nil {
					errs <- fmt.Errorf("Lock(%s) = %w", key, err)
					return
				}
				if r%2 == 1 {
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					shared.Add(1)
					inside.Add(-1)
				}
				if err := lease.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("Unlock(%s) = %w", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d times two holders were inside the shared key at once; want none", n)
	}
	if n := shared.Load(); n != workers*rounds/2 {
		t.Errorf("the shared key was held %d times; want %d", n, workers*rounds/2)
	}
	pipelines, commands := l.Pipelined()
	t.Logf("%d commands in %d pipelines", commands, pipelines)
	if commands < 3*workers*rounds*2 || pipelines >= commands {
		t.Errorf("%d commands in %d pipelines; want at least %d commands (a SET NX and a release per node per hold), sharing pipelines", commands, pipelines, 3*workers*rounds*2)
	}
}

// TestRedlockReleaseAnnouncesWhatItDeletes: a Redlock release announces
// itself on each node where it deleted its key, once, and not on a node
// where the key has meanwhile gone to another holder (whose waiters would
// wake for nothing).
func TestRedlockReleaseAnnouncesWhatItDeletes(t *testing.T) {
	addrs := testenv.RedisAddrs(t)
	prefix := testenv.KeyPrefix(t, addrs)
	clients := testenv.Clients(t, addrs)
	l := locker.NewRedlock(clients, locker.Options{TTL: 10 * time.Second, Wait: 5 * time.Second})
	ctx := context.Background()
	key := prefix + "announced"
	subs := make([]<-chan *redis.Message, len(clients))
	for i, c := range clients {
		sub := c.Subscribe(ctx, key)
		if _, err := sub.ReceiveTimeout(ctx, 5*time.Second); err != nil {
			t.Fatalf("node %d: subscribe to %s: %v", i, key, err)
		}
		t.Cleanup(func() { _ = sub.Close() })
		subs[i] = sub.Channel()
	}
	lease, err := l.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock(%s) = %v; want nil", key, err)
	}
	// The last node's key now holds another holder's value, as after an
	// expiry there and someone else's SET.
	last := len(clients) - 1
	if err := clients[last].Set(ctx, key, "someone else", time.Minute).Err(); err != nil {
		t.Fatalf("node %d: SET %s: %v", last, key, err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock(%s) = %v; want nil (a majority held it)", key, err)
	}
	for i, ch := range subs {
		want := 1
		if i == last {
			want = 0
		}
		got := 0
		timeout := time.After(time.Second)
	count:
		for {
			select {
			case <-ch:
				got++
			case <-timeout:
				break count
			}
		}
		if got != want {
			t.Errorf("node %d: %d release messages for %s; want %d", i, got, key, want)
		}
	}
	if v, err := clients[last].Get(ctx, key).Result(); err != nil || v != "someone else" {
		t.Errorf("node %d: GET %s = %q, %v; want the other holder's value kept", last, key, v, err)
	}
}
