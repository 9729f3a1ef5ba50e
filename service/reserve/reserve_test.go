package reserve_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/service/reserve"
)

func newStore(t *testing.T) (*reserve.Store, context.Context) {
	t.Helper()
	addrs := testenv.RedisAddrs(t)[:1]
	return reserve.New(testenv.Clients(t, addrs)[0], testenv.KeyPrefix(t, addrs)), t.Context()
}

func reserveOK(t *testing.T, s *reserve.Store, r reserve.Request) reserve.Result {
	t.Helper()
	res, err := s.Reserve(t.Context(), r)
	if err != nil {
		t.Fatalf("Reserve(%+v) = %v", r, err)
	}
	return res
}

// TestReserve: a product's counter must be loaded before it sells; then
// the script takes units while they last, counts the buyer's units against
// the limit, answers a used request ID with its record (the buyer, the
// quantity, the stock it left) and appends each reservation to the
// bucket's stream, with its generation and the stock it left.
func TestReserve(t *testing.T) {
	s, ctx := newStore(t)
	const product = 7
	r := func(user string, q int64, rid string) reserve.Request {
		return reserve.Request{Product: product, User: user, Quantity: q, RequestID: rid, Limit: 2}
	}
	if res := reserveOK(t, s, r("u|1", 1, "r-1")); res.Verdict != reserve.NotLoaded {
		t.Fatalf("before Load: %+v; want NotLoaded", res)
	}
	if loaded, stock, gen, err := s.Load(ctx, product, 3, 4); err != nil || !loaded || stock != 3 || gen != 4 {
		t.Fatalf("Load(3, gen 4) = %v, %d, %d, %v; want loaded, 3, 4", loaded, stock, gen, err)
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
	if loaded, stock, _, err := s.Load(ctx, product, 3, 4); err != nil || loaded || stock != 0 {
		t.Fatalf("Load of the same generation again = %v, %d, %v; want not loaded, 0 left", loaded, stock, err)
	}
	entries, err := testenv.Clients(t, testenv.RedisAddrs(t)[:1])[0].XRange(ctx, s.KeysOf(product).Stream, "-", "+").Result()
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
	// A newer generation (a stock reset) replaces the counter and forgets
	// the older generation's buyers and requests.
	if loaded, stock, gen, err := s.Load(ctx, product, 5, 5); err != nil || !loaded || stock != 5 || gen != 5 {
		t.Fatalf("Load(5, gen 5) = %v, %d, %d, %v; want loaded", loaded, stock, gen, err)
	}
	if res := reserveOK(t, s, r("u|1", 2, "r-1")); res.Verdict != reserve.Reserved || res.Left != 3 || res.Generation != 5 {
		t.Errorf("after the reset, u|1 for 2 with r-1 again: %+v; want Reserved, 3 left, generation 5", res)
	}
	// A buyer who knows of a newer reset than the counter's does not sell
	// from it.
	newer := r("u-9", 1, "r-9")
	newer.Generation = 6
	if res := reserveOK(t, s, newer); res.Verdict != reserve.NotLoaded {
		t.Errorf("a purchase in generation 6 from a counter of generation 5: %+v; want NotLoaded", res)
	}
	if loaded, _, _, err := s.Load(ctx, product, 9, 4); err != nil || loaded {
		t.Errorf("Load of an older generation = %v, %v; want not loaded", loaded, err)
	}
}

// TestReserveConcurrent: buyers racing for the last units take exactly the
// stock, each once, and the stream holds one reservation each.
func TestReserveConcurrent(t *testing.T) {
	s, ctx := newStore(t)
	const product, stock, buyers = 11, 10, 50
	if _, _, _, err := s.Load(ctx, product, stock, 1); err != nil {
		t.Fatal(err)
	}
	var reserved, soldOut atomic.Int64
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			res, err := s.Reserve(ctx, reserve.Request{Product: product, User: fmt.Sprint("u-", i), Quantity: 1, RequestID: fmt.Sprint("r-", i), Limit: 1})
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
	n, err := testenv.Clients(t, testenv.RedisAddrs(t)[:1])[0].XLen(ctx, s.KeysOf(product).Stream).Result()
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
