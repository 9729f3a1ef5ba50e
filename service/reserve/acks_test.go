package reserve_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/rediscluster"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/store"
)

// TestAcks: with Acks, a reservation is Unacked when its master's replica
// did not acknowledge it in time (the replica frozen), and so is a replay
// of it while the replica still lacks it; once the replica is back, the
// replay is acknowledged. Without Acks nothing is ever Unacked, and a
// store on a node without replicas never acknowledges.
func TestAcks(t *testing.T) {
	t.Parallel()
	master := testenv.StartRedis(t)
	replica := testenv.StartRedisReplica(t, master)
	rdb := testenv.Clients(t, []string{master.Addr})[0]
	plain := reserve.New(rdb, "acks:")
	acks := reserve.Acks{Replicas: 1, Timeout: 250 * time.Millisecond}
	s := plain.WithAcks(acks)
	const product = 3
	load(t, s, product, 10, 1, nil)
	r := func(rid string) reserve.Request {
		return reserve.Request{Product: product, User: "u-" + rid, Quantity: 1, RequestID: rid, Generation: 1}
	}
	if res := reserveOK(t, s, r("r-1")); res.Verdict != reserve.Reserved || res.Unacked {
		t.Fatalf("with the replica up: %+v; want Reserved, acknowledged", res)
	}
	replica.Freeze(t)
	if res := reserveOK(t, s, r("r-2")); res.Verdict != reserve.Reserved || res.Unacked != true || res.Left != 8 {
		t.Errorf("with the replica frozen: %+v; want Reserved (8 left), unacknowledged", res)
	}
	// The replay on a connection of its own, which wrote nothing before:
	// only the script's own write makes its WAIT wait for the replica.
	fresh := reserve.New(testenv.Clients(t, []string{master.Addr})[0], "acks:").WithAcks(acks)
	if res := reserveOK(t, fresh, r("r-2")); res.Verdict != reserve.Seen || !res.Unacked {
		t.Errorf("its replay, the replica frozen: %+v; want Seen, unacknowledged", res)
	}
	if ok, err := fresh.Replicated(t.Context(), product); err != nil || ok {
		t.Errorf("Replicated, the replica frozen = %v, %v; want false", ok, err)
	}
	big := r("r-big")
	big.Quantity = 100
	if res := reserveOK(t, fresh, big); res.Verdict != reserve.SoldOut || !res.Unacked {
		t.Errorf("sold out, the replica frozen: %+v; want SoldOut, unacknowledged: it read reservations the replica lacks", res)
	}
	if res := reserveOK(t, plain, r("r-3")); res.Verdict != reserve.Reserved || res.Unacked {
		t.Errorf("without acks, the replica frozen: %+v; want Reserved, never unacknowledged", res)
	}
	replica.Thaw(t)
	testenv.Eventually(t, 10*time.Second, "the replay acknowledged once the replica is back", func() bool {
		res := reserveOK(t, s, r("r-2"))
		return res.Verdict == reserve.Seen && !res.Unacked
	})
	if ok, err := fresh.Replicated(t.Context(), product); err != nil || !ok {
		t.Errorf("Replicated, the replica back = %v, %v; want true", ok, err)
	}
	alone := reserve.New(testenv.Clients(t, []string{testenv.StartRedis(t).Addr})[0], "acks:").WithAcks(reserve.Acks{Replicas: 1, Timeout: 10 * time.Millisecond})
	load(t, alone, product, 10, 1, nil)
	if res := reserveOK(t, alone, r("r-1")); res.Verdict != reserve.Reserved || !res.Unacked {
		t.Errorf("on a node without replicas: %+v; want Reserved, unacknowledged", res)
	}
}

// TestAcksOnCluster: on a Redis Cluster the script and its WAIT go to the
// master of the product's slot, so its replica acknowledges, in every
// bucket; while the product's slot moves to another master (its keys
// migrated, the old master answering ASK) and after (MOVED), reservations
// with acks and without go on, each taking one unit.
func TestAcksOnCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.StartRedisCluster(t, 3, 1)
	rdb := store.OpenReserveRedis(cl.Addrs(), true)
	t.Cleanup(func() { rdb.Close() })
	plain := reserve.New(rdb, "acks:")
	s := plain.WithAcks(reserve.Acks{Replicas: 1, Timeout: time.Second})
	for product := range int64(reserve.Buckets) {
		load(t, s, product, 5, 1, nil)
		res := reserveOK(t, s, reserve.Request{Product: product, User: "u", Quantity: 1, RequestID: "r", Generation: 1})
		if res.Verdict != reserve.Reserved || res.Unacked || res.Left != 4 {
			t.Errorf("product %d: %+v; want Reserved, 4 left, acknowledged", product, res)
		}
	}
	const product = 1 // 4 left
	left := int64(4)
	buy := func(st *reserve.Store, rid string) {
		t.Helper()
		res := reserveOK(t, st, reserve.Request{Product: product, User: "u-" + rid, Quantity: 1, RequestID: rid, Generation: 1})
		left--
		if res.Verdict != reserve.Reserved || res.Unacked || res.Left != left {
			t.Errorf("%s: %+v; want Reserved, %d left, acknowledged", rid, res, left)
		}
	}
	slot, err := rdb.ClusterKeySlot(t.Context(), s.KeysOf(product).Counter).Result()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	from, _, err := cl.MasterOf(ctx, int(slot))
	if err != nil {
		t.Fatal(err)
	}
	masters, err := cl.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var to *rediscluster.Node
	for _, m := range masters {
		if m != from {
			to = m
		}
	}
	err = cl.MoveSlot(ctx, int(slot), to, func() error {
		buy(s, "asked-acked") // first: a redirection of the plain one reloads the shared map
		buy(plain, "asked-plain")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	buy(s, "moved-acked")
	buy(plain, "moved-plain")
	if m, _, err := cl.MasterOf(ctx, int(slot)); err != nil || m != to {
		t.Errorf("slot %d is on %v, %v; want %s", slot, m, err, to.Addr)
	}
}
