package reserve_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service/reserve"
)

// newStore returns a store on one Redis node of the test's, its client
// (for a look at the keys themselves) and the test's context.
func newStore(t *testing.T) (*reserve.Store, context.Context, redis.UniversalClient) {
	t.Helper()
	addrs := testenv.RedisAddrs(t)[:1]
	rdb := testenv.Clients(t, addrs)[0]
	return reserve.New(rdb, testenv.KeyPrefix(t, addrs)), t.Context(), rdb
}

func reserveOK(t *testing.T, s *reserve.Store, r reserve.Request) reserve.Result {
	t.Helper()
	res, err := s.Reserve(t.Context(), r)
	if err != nil {
		t.Fatalf("Reserve(%+v) = %v", r, err)
	}
	return res
}

// load loads a product's counter and fails the test on an error.
func load(t *testing.T, s *reserve.Store, product, stock, gen int64, units map[string]int64) reserve.Loaded {
	t.Helper()
	l, err := s.Load(t.Context(), product, stock, gen, 0, units, nil, nil, false, true)
	if err != nil {
		t.Fatalf("Load(product %d, %d, gen %d) = %v", product, stock, gen, err)
	}
	return l
}

// TestReserve: a product's counter must be loaded before it sells; then
// the script takes units while they last, counts the buyer's units against
// the limit, answers a used request ID with its record (the buyer, the
// quantity, the stock it left) and appends each reservation to the
// bucket's stream, with its generation and the stock it left.
func TestReserve(t *testing.T) {
	s, ctx, rdb := newStore(t)
	const product = 7
	gen := int64(4)
	r := func(user string, q int64, rid string) reserve.Request {
		return reserve.Request{Product: product, User: user, Quantity: q, RequestID: rid, Limit: 2, Generation: gen}
	}
	if res := reserveOK(t, s, r("u|1", 1, "r-1")); res.Verdict != reserve.NotLoaded {
		t.Fatalf("before Load: %+v; want NotLoaded", res)
	}
	if l := load(t, s, product, 3, 4, nil); l != (reserve.Loaded{Loaded: true, Stock: 3, Generation: 4, Before: -1}) {
		t.Fatalf("Load(3, gen 4) = %+v; want loaded, 3, 4, none before", l)
	}
	if res := reserveOK(t, s, r("u|1", 1, "r-1")); res.Verdict != reserve.Reserved || res.Left != 2 || res.Generation != 4 {
		t.Fatalf("first reservation: %+v; want Reserved, 2 left, generation 4", res)
	}
	res := reserveOK(t, s, r("u|1", 1, "r-1"))
	if res.Verdict != reserve.Seen || res.Record != (reserve.Record{Quantity: 1, Left: 2, User: "u|1"}) {
		t.Fatalf("the same request again: %+v; want Seen, its record", res)
	}
	if res := reserveOK(t, s, r("u|1", 2, "r-2")); res.Verdict != reserve.OverLimit || res.Units != 1 {
		t.Fatalf("u|1 for 2 more under a limit of 2: %+v; want OverLimit holding 1", res)
	}
	if res := reserveOK(t, s, r("u-2", 2, "r-3")); res.Verdict != reserve.Reserved || res.Left != 0 {
		t.Fatalf("u-2 for the last 2: %+v; want Reserved, 0 left", res)
	}
	if res := reserveOK(t, s, r("u-3", 1, "r-4")); res.Verdict != reserve.SoldOut || res.Left != 0 {
		t.Fatalf("when none is left: %+v; want SoldOut, 0 left", res)
	}
	// Loading the same generation again (another instance, late) keeps the
	// counter as the reservations left it.
	if l := load(t, s, product, 3, 4, nil); l.Loaded || l.Stock != 0 {
		t.Fatalf("Load of the same generation again = %+v; want not loaded, 0 left", l)
	}
	entries, err := rdb.XRange(ctx, s.KeysOf(product).Stream, "-", "+").Result()
	if err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%v %v %v %v %v %v", e.Values["p"], e.Values["u"], e.Values["q"], e.Values["r"], e.Values["g"], e.Values["l"]))
	}
	want := []string{"7 u|1 1 r-1 4 2", "7 u-2 2 r-3 4 0"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("stream = %q; want %q", got, want)
	}
	if p, rec, ok, err := s.Find(ctx, "r-3"); err != nil || !ok || p != product || rec.User != "u-2" {
		t.Errorf("Find(r-3) = %d, %+v, %v, %v; want product %d, u-2's record", p, rec, ok, err, product)
	}
	// A reset retires the generation: its records are gone, and a late
	// retirement of an older one changes nothing.
	if err := s.Retire(ctx, product, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.Retire(ctx, product, 4); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := s.Find(ctx, "r-1"); err != nil || ok {
		t.Errorf("Find(r-1) after the reset = %v, %v; want the index forgotten with the records", ok, err)
	}
	if res := reserveOK(t, s, r("u-9", 1, "r-9")); res.Verdict != reserve.NotLoaded {
		t.Errorf("a purchase in generation 4 after the reset to 5: %+v; want NotLoaded", res)
	}
	if _, _, ok, err := s.Find(ctx, "r-3"); err != nil || ok {
		t.Errorf("Find(r-3) after the reset = %v, %v; want no record", ok, err)
	}
	// The new generation loads with the units the database gives its
	// buyers (orders sold under another strategy since the reset).
	gen = 5
	if l := load(t, s, product, 5, 5, map[string]int64{"u|1": 2}); !l.Loaded || l.Stock != 5 || l.Before != 5 {
		t.Fatalf("Load(5, gen 5) after the reset = %+v; want loaded, 5, the reset's counter before", l)
	}
	if res := reserveOK(t, s, r("u|1", 1, "r-1")); res.Verdict != reserve.OverLimit || res.Units != 2 {
		t.Errorf("u|1, who bought 2 in the database, for 1 more: %+v; want OverLimit holding 2", res)
	}
	if res := reserveOK(t, s, r("u-4", 2, "r-1")); res.Verdict != reserve.Reserved || res.Left != 3 || res.Generation != 5 {
		t.Errorf("after the reset, r-1 again: %+v; want Reserved, 3 left, generation 5", res)
	}
	// A buyer who knows of a newer reset than the counter's does not sell
	// from it.
	newer := r("u-9", 1, "r-9")
	newer.Generation = 6
	if res := reserveOK(t, s, newer); res.Verdict != reserve.NotLoaded {
		t.Errorf("a purchase in generation 6 from a counter of generation 5: %+v; want NotLoaded", res)
	}
	// A reset's retirement that comes after an instance loaded the new
	// generation leaves that counter alone.
	if err := s.Retire(ctx, product, 5); err != nil {
		t.Fatal(err)
	}
	if l := load(t, s, product, 99, 5, nil); l.Loaded || l.Stock != 3 {
		t.Errorf("the counter of generation 5 after a late retirement to 5 = %+v; want it kept, 3 left", l)
	}
	// The database's word goes: a database recreated under this Redis
	// (its generation back at 1) replaces the counter of generation 5.
	if l := load(t, s, product, 7, 1, nil); !l.Loaded || l.Stock != 7 || l.Generation != 1 || l.Before != 5 {
		t.Errorf("Load(7, gen 1) over a counter of generation 5 = %+v; want it replaced", l)
	}
}

// TestLoadCountsWaitingReservations: a counter lost while reservations
// wait in the stream (Redis lost the key, or it was never there on this
// node) is derived again from the database's stock less what those
// reservations took, read or not read by a writer; the units of each buyer
// likewise. Written ones (acknowledged or not yet), refused ones (their
// units given back) and other products' or other generations' count for
// nothing.
func TestLoadCountsWaitingReservations(t *testing.T) {
	s, ctx, rdb := newStore(t)
	const product, other = 5, 21 // one bucket
	if err := s.Join(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, product, 10, 1, nil)
	load(t, s, other, 10, 1, nil)
	buy := func(p int64, user, rid string, q int64) {
		t.Helper()
		if res := reserveOK(t, s, reserve.Request{Product: p, User: user, Quantity: q, RequestID: rid, Generation: 1}); res.Verdict != reserve.Reserved {
			t.Fatalf("Reserve(%s) = %+v", rid, res)
		}
	}
	buy(product, "u-1", "r-1", 2) // read and acknowledged: written
	buy(product, "u-2", "r-2", 3) // read, not acknowledged
	buy(other, "u-2", "r-3", 4)
	read, err := s.Read(ctx, "w", 10, 0)
	if err != nil || len(read) != 3 {
		t.Fatalf("Read = %d, %v", len(read), err)
	}
	if err := s.Ack(ctx, read[:1]); err != nil {
		t.Fatal(err)
	}
	buy(product, "u-2", "r-4", 1) // read below, not written
	buy(product, "u-6", "r-6", 1) // read below, refused
	// The database wrote r-1: 8 left, u-1 holds 2. It also wrote r-2
	// (not acknowledged yet): 5 left, u-2 holds 3; and it refused r-6.
	rd, err := s.Read(ctx, "w2", 10, 0)
	if err != nil || len(rd) != 2 {
		t.Fatalf("Read = %d, %v", len(rd), err)
	}
	if err := s.Fail(ctx, rd[1], "limit_exceeded"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, s.KeysOf(product).Counter, s.KeysOf(product).Units).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := s.Load(ctx, product, 5, 1, 3, map[string]int64{"u-1": 2, "u-2": 3}, []int64{41},
		[]reserve.Written{{RequestID: "r-1", Record: reserve.Record{Quantity: 2, Left: 8, User: "u-1"}},
			{RequestID: "r-2", Record: reserve.Record{Quantity: 3, Left: 5, User: "u-2"}}}, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := (reserve.Loaded{Loaded: true, Stock: 4, Generation: 1, Waiting: 1, Taken: 1, Before: -1, Returns: 3}); l != want {
		t.Errorf("Load after the counter was lost = %+v; want %+v", l, want)
	}
	// A return on its way when the counter was derived again is marked: the
	// database's stock had its units.
	if done, err := s.Refund(ctx, product, 1, 3, 41, 2, "u-1"); err != nil || !done {
		t.Errorf("Refund of an order marked by the load = %v, %v; want done", done, err)
	}
	if snap, err := s.Check(ctx, product, 1, []int64{41}); err != nil || snap.Stock != 4 || !snap.Refunded[41] {
		t.Errorf("after the refund of a marked order: %+v, %v; want stock 4 still, order 41 refunded", snap, err)
	}
	if res := reserveOK(t, s, reserve.Request{Product: product, User: "u-2", Quantity: 1, RequestID: "r-5", Limit: 4, Generation: 1}); res.Verdict != reserve.OverLimit || res.Units != 4 {
		t.Errorf("u-2, holding 3 written and 1 waiting, for 1 more under a limit of 4: %+v; want OverLimit holding 4", res)
	}
	if res := reserveOK(t, s, reserve.Request{Product: product, User: "u-2", Quantity: 1, RequestID: "r-2", Generation: 1}); res.Verdict != reserve.Seen {
		t.Errorf("r-2 again after the load: %+v; want Seen: the records of the generation stay", res)
	}
}

// TestFail: a refused reservation's record says why, once; its units go
// back to the counter and its buyer unless the refusal was sold_out, and
// recording the refusal again gives nothing back twice.
func TestFail(t *testing.T) {
	s, ctx, rdb := newStore(t)
	const product = 9
	if err := s.Join(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, product, 10, 3, nil)
	for i, q := range []int64{2, 3} {
		req := reserve.Request{Product: product, User: "u-1", Quantity: q, RequestID: fmt.Sprint("r-", i), Generation: 3}
		if res := reserveOK(t, s, req); res.Verdict != reserve.Reserved {
			t.Fatalf("Reserve = %+v", res)
		}
	}
	es, err := s.Read(ctx, "w", 10, 0)
	if err != nil || len(es) != 2 {
		t.Fatalf("Read = %d, %v", len(es), err)
	}
	counter := func() (int64, int64) {
		stock, _ := rdb.HGet(ctx, s.KeysOf(product).Counter, "stock").Int64()
		units, _ := rdb.HGet(ctx, s.KeysOf(product).Units, "u-1").Int64()
		return stock, units
	}
	for range 2 {
		if err := s.Fail(ctx, es[0], "request_id_reused"); err != nil {
			t.Fatal(err)
		}
	}
	if stock, units := counter(); stock != 7 || units != 3 {
		t.Errorf("after r-0 (2 units) was refused twice: stock %d, u-1 holds %d; want 7 and 3", stock, units)
	}
	if err := s.Fail(ctx, es[1], "sold_out"); err != nil {
		t.Fatal(err)
	}
	if stock, units := counter(); stock != 7 || units != 3 {
		t.Errorf("after r-1 was refused sold_out: stock %d, u-1 holds %d; want 7 and 3 (nothing back)", stock, units)
	}
	if rec, ok, err := s.RecordOf(ctx, product, "r-0"); err != nil || !ok || rec.Code != "request_id_reused" {
		t.Errorf("the record of r-0 = %+v, %v, %v; want failed, request_id_reused", rec, ok, err)
	}
	if err := s.Dead(ctx, es[1], "internal", "written 3 times without success"); err != nil {
		t.Fatal(err)
	}
	dead, err := s.DeadLetters(ctx, 10)
	if err != nil || len(dead) != 1 || dead[0].Values["r"] != "r-1" || dead[0].Values["reason"] != "written 3 times without success" {
		t.Errorf("dead letters = %v, %v; want r-1 with its reason", dead, err)
	}
	if n, err := s.Tidy(ctx); err != nil || n != 1 {
		t.Errorf("Tidy = %d, %v; want 1 unwritten (r-0, read and not acknowledged)", n, err)
	}
}

// TestReserveConcurrent: buyers racing for the last units take exactly the
// stock, each once, and the stream holds one reservation each.
func TestReserveConcurrent(t *testing.T) {
	s, ctx, rdb := newStore(t)
	const product, stock, buyers = 11, 10, 50
	load(t, s, product, stock, 1, nil)
	var reserved, soldOut atomic.Int64
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			res, err := s.Reserve(ctx, reserve.Request{Product: product, User: fmt.Sprint("u-", i), Quantity: 1, RequestID: fmt.Sprint("r-", i), Limit: 1, Generation: 1})
			switch {
			case err != nil:
				t.Errorf("Reserve: %v", err)
			case res.Verdict == reserve.Reserved:
				reserved.Add(1)
			case res.Verdict == reserve.SoldOut:
				soldOut.Add(1)
			default:
				t.Errorf("Reserve: %+v; want Reserved or SoldOut", res)
			}
		})
	}
	wg.Wait()
	if reserved.Load() != stock || soldOut.Load() != buyers-stock {
		t.Errorf("%d reserved, %d sold out; want %d and %d", reserved.Load(), soldOut.Load(), stock, buyers-stock)
	}
	n, err := rdb.XLen(ctx, s.KeysOf(product).Stream).Result()
	if err != nil || n != stock {
		t.Errorf("stream length %d, %v; want %d", n, err, stock)
	}
}

// TestKeysShareAHashTag: every key of a product, and its bucket's stream,
// carry the same hash tag, the part between the first "{" and "}" that a
// Redis Cluster hashes; products of different buckets carry different ones.
func TestKeysShareAHashTag(t *testing.T) {
	s := reserve.New(nil, "seckill:")
	tag := func(key string) string {
		i := strings.IndexByte(key, '{')
		j := strings.IndexByte(key[i+1:], '}')
		if i < 0 || j <= 0 {
			t.Fatalf("key %q has no hash tag", key)
		}
		return key[i+1 : i+1+j]
	}
	for _, p := range []int64{1, 7, 16, 17, 1 << 40} {
		k := s.KeysOf(p)
		for _, key := range []string{k.Units, k.Requests, k.Stream, s.StreamOf(reserve.Bucket(p))} {
			if tag(key) != tag(k.Counter) {
				t.Errorf("product %d: key %q is tagged %q; its counter %q", p, key, tag(key), tag(k.Counter))
			}
		}
	}
	if tag(s.KeysOf(1).Counter) == tag(s.KeysOf(2).Counter) {
		t.Errorf("products 1 and 2 share a hash tag; want one per bucket")
	}
}

// TestReserveBatch: one call decides a batch of purchases in order, each
// as if alone after those before it: a request ID used earlier in the same
// batch is seen, a buyer's second unit passes the limit, and what the
// earlier ones took is gone for the later ones.
func TestReserveBatch(t *testing.T) {
	s, _, _ := newStore(t)
	const product = 13
	if rs, err := s.ReserveBatch(t.Context(), product, 1, 2, []reserve.Item{{User: "u-1", Quantity: 1, RequestID: "r-1"}}); err != nil || rs[0].Verdict != reserve.NotLoaded {
		t.Fatalf("a batch before Load = %+v, %v; want NotLoaded", rs, err)
	}
	load(t, s, product, 3, 2, nil)
	rs, err := s.ReserveBatch(t.Context(), product, 1, 2, []reserve.Item{
		{User: "u-1", Quantity: 1, RequestID: "r-1"},
		{User: "u-1", Quantity: 1, RequestID: "r-2"},
		{User: "u-2", Quantity: 1, RequestID: "r-1"},
		{User: "u-3", Quantity: 3, RequestID: "r-3"},
		{User: "u-4", Quantity: 1, RequestID: "r-4"},
		{User: "u-5", Quantity: 1, RequestID: "r-5"},
		{User: "u-6", Quantity: 1, RequestID: "r-6"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []reserve.Result{
		{Verdict: reserve.Reserved, Left: 2, Generation: 2},
		{Verdict: reserve.OverLimit, Units: 1},
		{Verdict: reserve.Seen, Record: reserve.Record{Quantity: 1, Left: 2, User: "u-1"}},
		{Verdict: reserve.SoldOut, Left: 2},
		{Verdict: reserve.Reserved, Left: 1, Generation: 2},
		{Verdict: reserve.Reserved, Left: 0, Generation: 2},
		{Verdict: reserve.SoldOut, Left: 0},
	}
	for i := range want {
		if rs[i] != want[i] {
			t.Errorf("purchase %d of the batch: %+v; want %+v", i, rs[i], want[i])
		}
	}
}

// TestRefund: an order's units go back to the counter and its buyer's
// count once, however often asked; a counter of another generation, or
// none, takes nothing and says so; Check says which orders it took back.
func TestRefund(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := t.Context()
	const product = 11
	if done, err := s.Refund(ctx, product, 1, 1, 9, 1, "u-1"); err != nil || done {
		t.Errorf("Refund before any load = %v, %v; want not done", done, err)
	}
	load(t, s, product, 3, 1, nil)
	if res := reserveOK(t, s, reserve.Request{Product: product, User: "u-1", Quantity: 1, RequestID: "r-1", Limit: 1, Generation: 1}); res.Verdict != reserve.Reserved {
		t.Fatalf("reserve: %+v", res)
	}
	for range 3 {
		if done, err := s.Refund(ctx, product, 1, 1, 9, 1, "u-1"); err != nil || !done {
			t.Fatalf("Refund = %v, %v; want done", done, err)
		}
	}
	if done, err := s.Refund(ctx, product, 2, 1, 10, 1, "u-1"); err != nil || done {
		t.Errorf("Refund for another generation = %v, %v; want not done", done, err)
	}
	snap, err := s.Check(ctx, product, 1, []int64{9, 10})
	if err != nil || snap.Stock != 3 || !snap.Refunded[9] || snap.Refunded[10] {
		t.Errorf("Check = %+v, %v; want stock 3 (the unit back once), order 9 refunded, 10 not", snap, err)
	}
	// The buyer's count went back too: u-1 may buy again under a limit of
	// 1; and the counter's readings are of the version with the return.
	if res := reserveOK(t, s, reserve.Request{Product: product, User: "u-1", Quantity: 1, RequestID: "r-2", Limit: 1, Generation: 1}); res.Verdict != reserve.Reserved || res.Returns != 1 {
		t.Errorf("u-1 again after the refund: %+v; want Reserved, of the counter with 1 return", res)
	}
}

// TestCounterOf: the counter as Redis holds it: none before a load; its
// stock, generation and returns once loaded and sold from; none once a
// reset retired it (the generation stays, without stock).
func TestCounterOf(t *testing.T) {
	t.Parallel()
	s, ctx, _ := newStore(t)
	const product = 12
	counter := func() reserve.Counter {
		t.Helper()
		c, err := s.CounterOf(ctx, product)
		if err != nil {
			t.Fatalf("CounterOf = %v", err)
		}
		return c
	}
	if c := counter(); c.Present {
		t.Errorf("before any load: %+v; want none", c)
	}
	load(t, s, product, 5, 3, nil)
	reserveOK(t, s, reserve.Request{Product: product, User: "u-1", Quantity: 2, RequestID: "r-1", Generation: 3})
	if done, err := s.Refund(ctx, product, 3, 1, 9, 1, "u-1"); err != nil || !done {
		t.Fatalf("Refund = %v, %v; want done", done, err)
	}
	if c := counter(); c != (reserve.Counter{Present: true, Stock: 4, Generation: 3, Returns: 1}) {
		t.Errorf("loaded with 5, 2 reserved, 1 back: %+v; want stock 4 of generation 3, 1 return", c)
	}
	if err := s.Retire(ctx, product, 4); err != nil {
		t.Fatal(err)
	}
	if c := counter(); c.Present {
		t.Errorf("retired: %+v; want none", c)
	}
}
