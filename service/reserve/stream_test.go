package reserve_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/service/reserve"
)

// TestStreams: the writers' group reads each reservation once, with what
// the script appended; what one writer read and did not acknowledge,
// another claims; what is acknowledged is nobody's any more; a refused
// reservation's record says why, and a request ID the store never saw has
// no record.
func TestStreams(t *testing.T) {
	s, ctx, rdb := newStore(t)
	for range 2 { // joining again keeps the group
		if err := s.Join(ctx); err != nil {
			t.Fatalf("Join = %v", err)
		}
	}
	for _, p := range []int64{3, 20} { // buckets 3 and 4
		load(t, s, p, 10, 2, nil)
	}
	reqs := []reserve.Request{
		{Product: 3, User: "u|1", Quantity: 2, RequestID: "r-1", Generation: 2},
		{Product: 20, User: "u-2", Quantity: 1, RequestID: "r-2", Generation: 2},
		{Product: 3, User: "u-3", Quantity: 1, RequestID: "r-3", Generation: 2},
	}
	for _, r := range reqs {
		if res := reserveOK(t, s, r); res.Verdict != reserve.Reserved {
			t.Fatalf("Reserve(%+v) = %+v; want Reserved", r, res)
		}
	}
	show := func(es []reserve.Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, fmt.Sprintf("%d %s %d %s g%d l%d", e.Product, e.User, e.Quantity, e.RequestID, e.Generation, e.Left))
		}
		slices.Sort(out)
		return out
	}
	want := []string{"20 u-2 1 r-2 g2 l9", "3 u-3 1 r-3 g2 l7", "3 u|1 2 r-1 g2 l8"}
	read, err := s.Read(ctx, "a", 100, 0)
	if err != nil || !slices.Equal(show(read), want) {
		t.Fatalf("Read = %q, %v; want %q", show(read), err, want)
	}
	if again, err := s.Read(ctx, "b", 100, 0); err != nil || len(again) != 0 {
		t.Errorf("Read by another writer = %q, %v; want nothing: each is read once", show(again), err)
	}
	claimed, err := s.Claim(ctx, "b", 0, 100)
	if err != nil || !slices.Equal(show(claimed), want) {
		t.Fatalf("Claim of what a left = %q, %v; want %q", show(claimed), err, want)
	}
	if err := s.Ack(ctx, claimed); err != nil {
		t.Fatalf("Ack = %v", err)
	}
	if left, err := s.Claim(ctx, "c", 0, 100); err != nil || len(left) != 0 {
		t.Errorf("Claim after Ack = %q, %v; want nothing", show(left), err)
	}
	if err := s.Fail(ctx, read[0], "sold_out"); err != nil {
		t.Fatalf("Fail = %v", err)
	}
	rec, ok, err := s.RecordOf(ctx, read[0].Product, read[0].RequestID)
	want0 := reserve.Record{Quantity: read[0].Quantity, Left: read[0].Left, User: read[0].User, Code: "sold_out"}
	if err != nil || !ok || rec != want0 || rec.Pending() {
		t.Errorf("RecordOf a refused reservation = %+v, %v, %v; want %+v", rec, ok, err, want0)
	}
	if rec, ok, err := s.RecordOf(ctx, read[1].Product, read[1].RequestID); err != nil || !ok || !rec.Pending() {
		t.Errorf("RecordOf a pending reservation = %+v, %v, %v; want pending", rec, ok, err)
	}
	if _, ok, err := s.RecordOf(ctx, 3, "never"); err != nil || ok {
		t.Errorf("RecordOf an unknown request = %v, %v; want none", ok, err)
	}

	// An entry the script did not write is read as bad, beside the good
	// ones, rather than stopping the read.
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.StreamOf(3), Values: map[string]any{"p": "x"}}).Err(); err != nil {
		t.Fatal(err)
	}
	take := reserve.Request{Product: 3, User: "u-4", Quantity: 1, RequestID: "r-4", Generation: 2}
	if res := reserveOK(t, s, take); res.Verdict != reserve.Reserved {
		t.Fatalf("Reserve(%+v) = %+v", take, res)
	}
	mixed, err := s.Read(ctx, "a", 100, 0)
	if err != nil || len(mixed) != 2 || mixed[0].Bad == nil || mixed[1].Bad != nil || mixed[1].RequestID != "r-4" {
		t.Errorf("Read of a bad entry and a good one = %+v, %v; want the bad one marked, then r-4", mixed, err)
	}
}
