package locker_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/locker"
)

// TestWatchOthers: a watch for the others' releases is not woken by the
// value it excepts, and wakes once per release at the need-th message of
// the value released (the nodes' announcements of one release); a message
// that names no value (in process, or "released" from a single-node lock)
// wakes it at once.
func TestWatchOthers(t *testing.T) {
	r := locker.NewReleases()
	w := r.WatchOthers("k", "mine", 2)
	defer w.Stop()
	woken := func() bool {
		select {
		case <-w.Released():
			return true
		default:
			return false
		}
	}
	// A message names a key and the value released; no value is a release
	// in process (Notify).
	type message struct{ key, value string }
	for _, step := range []struct {
		messages []message
		woken    bool
		what     string
	}{
		{[]message{{"k", "mine"}, {"k", "mine"}, {"k", "mine"}, {"other key", "theirs"}, {"k", "theirs"}}, false,
			"its own value's releases, another key's and one node's message of another release (asleep until two)"},
		{[]message{{"k", "theirs"}}, true, "two nodes' messages of another holder's release"},
		{[]message{{"k", "theirs"}}, false, "the third node's message of the same release, a release it woke for"},
		{[]message{{"k", "next"}}, false, "one node's message of the next release"},
		{[]message{{"k", "next"}}, true, "two nodes' messages of the next release (the count of the one before carried over)"},
		{[]message{{"k", ""}}, true, "a release in process, at once"},
		{[]message{{"k", "released"}}, true, `a single-node lock's "released", at once`},
	} {
		for _, m := range step.messages {
			if m.value == "" {
				r.Notify(m.key)
			} else {
				r.NotifyValue(m.key, m.value)
			}
		}
		if got := woken(); got != step.woken {
			t.Fatalf("woken = %t after %s; want %t", got, step.what, step.woken)
		}
	}
}

// redlockInstance is a Redlock as one process of the service has it: its
// own subscription to the release announcements of prefix's keys.
func redlockInstance(t *testing.T, addrs []string, prefix string, yield time.Duration) *locker.Redlock {
	t.Helper()
	clients := testenv.Clients(t, addrs)
	return locker.NewRedlock(clients, locker.Options{TTL: 20 * time.Second, Wait: 20 * time.Second,
		Releases: subscribed(t, clients, prefix), Yield: yield})
}

// subscribed returns Releases subscribed to the release announcements of
// prefix's keys on clients' nodes, closed when t ends.
func subscribed(t *testing.T, clients []redis.UniversalClient, prefix string) *locker.Releases {
	t.Helper()
	releases := locker.NewReleases()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := releases.Subscribe(ctx, clients, prefix); err != nil {
		t.Fatalf("Releases.Subscribe: %v", err)
	}
	t.Cleanup(func() {
		if err := releases.Close(); err != nil {
			t.Errorf("Releases.Close: %v", err)
		}
	})
	return releases
}

// lockAsync runs l.Lock(key) in a goroutine; its lease (or error) comes on
// the channel.
func lockAsync(l locker.Locker, key string) <-chan locker.Lease {
	out := make(chan locker.Lease, 1)
	go func() {
		lease, err := l.Lock(context.Background(), key)
		if err != nil {
			lease = nil
		}
		out <- lease
	}()
	return out
}

// receive waits for a lease from ch, failing t after 10 s or on a failed
// Lock.
func receive(t *testing.T, ch <-chan locker.Lease, what string) locker.Lease {
	t.Helper()
	select {
	case lease := <-ch:
		if lease == nil {
			t.Fatalf("%s: Lock failed", what)
		}
		return lease
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no lease in 10 s", what)
	}
	return nil
}

// lockedOut runs l.Lock(key) in a goroutine, as lockAsync, and returns
// once its first round has failed, the key held by another: three SET NX
// and redsync's release on every one of the nodes sent, so that the Lock
// now waits.
func lockedOut(t *testing.T, l *locker.Redlock, nodes int, key string) <-chan locker.Lease {
	t.Helper()
	_, before := l.Pipelined()
	ch := lockAsync(l, key)
	testenv.Eventually(t, 10*time.Second, "a first round that failed", func() bool {
		_, sent := l.Pipelined()
		return sent >= before+int64(2*nodes)
	})
	return ch
}

// unlock gives lease back, failing t when it cannot.
func unlock(t *testing.T, lease locker.Lease, what string) {
	t.Helper()
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatalf("%s: Unlock = %v", what, err)
	}
}

// TestRedlockHandsOverContendedKey: two instances that want one key take it
// in turn. An instance that gives back a key it had to wait for, and wants
// it again at once, lets the other instance's waiting Lock have it first,
// instead of racing it, and takes it when that holder gives it back. The
// other instance hears no releases and tries again only every 50-100 ms,
// so that A, trying at once, would win every race it ran.
func TestRedlockHandsOverContendedKey(t *testing.T) {
	addrs := testenv.RedisAddrs(t)
	prefix := testenv.KeyPrefix(t, addrs)
	a := redlockInstance(t, addrs, prefix, 10*time.Second)
	b := locker.NewRedlock(testenv.Clients(t, addrs), locker.Options{TTL: 20 * time.Second, Wait: 20 * time.Second,
		Fallback: 100 * time.Millisecond})
	key := prefix + "hot"

	b1, err := b.Lock(context.Background(), key)
	if err != nil {
		t.Fatalf("B: Lock = %v", err)
	}
	a1c := lockedOut(t, a, len(addrs), key) // waits for B: contended
	unlock(t, b1, "B's first hold")
	a1 := receive(t, a1c, "A's first hold")
	b2c := lockedOut(t, b, len(addrs), key) // B waits for A
	unlock(t, a1, "A's first hold")
	if !a.HandingOver(key) {
		t.Fatal("A gave back a key it had waited for and does not remember it")
	}
	a2c := lockAsync(a, key) // at once: A yields to B
	var b2 locker.Lease
	select {
	case b2 = <-b2c:
		if b2 == nil {
			t.Fatal("B's second Lock failed")
		}
	case <-a2c:
		t.Fatal("A took the key back while B waited for it; want B to have it first")
	case <-time.After(10 * time.Second):
		t.Fatal("neither A nor B took the key in 10 s")
	}
	select {
	case <-a2c:
		t.Fatal("A took the key while B held it")
	case <-time.After(200 * time.Millisecond):
	}
	unlock(t, b2, "B's second hold")
	a2 := receive(t, a2c, "A's second hold, after B's")
	unlock(t, a2, "A's second hold")
}

// TestRedlockYieldRunsOutAlone: an instance that gave back a contended key
// and wants it again when nobody else does waits out its yield once and
// takes it; the key is then no longer contended, and the next Lock does
// not yield.
func TestRedlockYieldRunsOutAlone(t *testing.T) {
	addrs := testenv.RedisAddrs(t)
	prefix := testenv.KeyPrefix(t, addrs)
	a := redlockInstance(t, addrs, prefix, 50*time.Millisecond)
	b := redlockInstance(t, addrs, prefix, 50*time.Millisecond)
	key := prefix + "once hot"
	ctx := context.Background()

	b1, err := b.Lock(ctx, key)
	if err != nil {
		t.Fatalf("B: Lock = %v", err)
	}
	a1c := lockedOut(t, a, len(addrs), key)
	unlock(t, b1, "B's hold")
	unlock(t, receive(t, a1c, "A's first hold"), "A's first hold")
	if !a.HandingOver(key) {
		t.Fatal("A gave back a key it had waited for and does not remember it")
	}
	start := time.Now()
	a2, err := a.Lock(ctx, key) // nobody else wants it: the yield runs out
	if err != nil {
		t.Fatalf("A: Lock after the yield = %v", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("A took the key back after %v; want it to wait out its yield of 50ms first", waited)
	}
	unlock(t, a2, "A's second hold")
	if a.HandingOver(key) {
		t.Fatal("A remembers the key after a hold nobody contended; want it forgotten")
	}
}
