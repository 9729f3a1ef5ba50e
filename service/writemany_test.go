package service_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/reserve"
)

// TestWriteManyReservations: the reservations of many products in one
// transaction are written as each product's alone would be: orders with
// the stock their reservations left and the IDs the database gave them;
// the refusals of the rule (fewer units than Redis said, the buyer past
// the limit, a request ID another product's order holds) write nothing of
// theirs and hold none of the others back; a product whose generation a
// reset ended is refused whole, its own answer; writing them all again
// writes nothing more, each answering its order.
func TestWriteManyReservations(t *testing.T) {
	ctx := t.Context()
	// A sale of one product in the MySQL form counts its trips: a sale of
	// many is not one sale per product.
	var mu sync.Mutex
	alone := 0
	in := newFixture(t, nil).instance(settings{PerUserLimit: 2, Hooks: service.Hooks{
		BatchTrips: func(int64) { mu.Lock(); alone++; mu.Unlock() },
	}})
	sales := func() int { mu.Lock(); defer mu.Unlock(); n := alone; alone = 0; return n }
	one, two, three := in.product(t, 5), in.product(t, 2), in.product(t, 4)
	gens := make([]int64, 3)
	for i, p := range []model.Product{one, two, three} {
		gen, err := in.svc.MoveToReserve(ctx, p.ID)
		if err != nil {
			t.Fatalf("MoveToReserve(%d) = %v", p.ID, err)
		}
		gens[i] = gen
	}
	if _, err := in.svc.SetStock(ctx, three.ID, 4); err != nil {
		t.Fatalf("SetStock = %v", err)
	}
	res := func(p model.Product, user string, q int64, rid string, left int64) service.Reservation {
		return service.Reservation{Purchase: service.Purchase{ProductID: p.ID, UserID: user, Quantity: q, RequestID: rid}, Left: left}
	}
	if _, errs, err := in.svc.WriteReservations(ctx, gens[0], []service.Reservation{res(one, "u-0", 1, "r-0", 4)}); err != nil || errs[0] != nil {
		t.Fatalf("WriteReservations(r-0) = %v, %v", errs, err)
	}
	batches := [][]service.Reservation{
		{res(one, "u-1", 2, "r-1", 2), res(one, "u-2", 1, "r-2", 1), res(one, "u-1", 1, "r-3", 0)},
		{res(two, "u-3", 1, "r-4", 1), res(two, "u-4", 2, "r-5", 0), res(two, "u-5", 1, "r-0", 0)},
		{res(three, "u-6", 1, "r-6", 3)},
	}
	sales()
	receipts, errs, refusals, err := in.svc.WriteManyReservations(ctx, gens, batches)
	if err != nil {
		t.Fatalf("WriteManyReservations = %v", err)
	}
	if n := sales(); n != 0 {
		t.Errorf("%d sales of one product; want the three products in one transaction", n)
	}
	want := [][]error{{nil, nil, failure.ErrLimitExceeded}, {nil, failure.ErrSoldOut, failure.ErrRequestIDReused}}
	ids := map[int64]bool{}
	for b, wantErrs := range want {
		if refusals[b] != nil {
			t.Fatalf("batch %d refused whole: %v", b, refusals[b])
		}
		for i, wantErr := range wantErrs {
			r, got := receipts[b][i], errs[b][i]
			switch {
			case wantErr != nil && !errors.Is(got, wantErr):
				t.Errorf("%s: %+v, %v; want %v", show(batches[b][i].Purchase), r, got, wantErr)
			case wantErr == nil && (got != nil || r.Replayed || r.Order.ID == 0 || ids[r.Order.ID] || r.Order.RemainingStock != batches[b][i].Left):
				t.Errorf("%s: %+v, %v; want a new order of its own leaving %d", show(batches[b][i].Purchase), r, got, batches[b][i].Left)
			case wantErr == nil:
				ids[r.Order.ID] = true
				if o, err := in.svc.Order(ctx, r.Order.ID, "", true); err != nil || o.RequestID == nil || string(*o.RequestID) != batches[b][i].RequestID {
					t.Errorf("order %d of %s in the database: %+v, %v; want its request ID's", r.Order.ID, show(batches[b][i].Purchase), o, err)
				}
			}
		}
	}
	if !service.ErrGenerationGone(refusals[2]) || receipts[2] != nil {
		t.Errorf("the batch of a generation a reset ended: %v, %+v; want it refused whole", refusals[2], receipts[2])
	}
	in.wantAudit(t, service.Audit{ProductID: one.ID, InitialStock: 5, Stock: 1, Orders: 3, UnitsSold: 4, Consistent: true})
	in.wantAudit(t, service.Audit{ProductID: two.ID, InitialStock: 2, Stock: 1, Orders: 1, UnitsSold: 1, Consistent: true})
	in.wantAudit(t, consistentAudit(three.ID, 4, 0))

	again, errs, _, err := in.svc.WriteManyReservations(ctx, gens[:2], batches[:2])
	if err != nil {
		t.Fatalf("WriteManyReservations again = %v", err)
	}
	for b := range 2 {
		for i, r := range again[b] {
			if first := receipts[b][i]; errs[b][i] == nil && (!r.Replayed || r.Order.ID != first.Order.ID) {
				t.Errorf("%s again: %+v; want its order %d replayed", show(batches[b][i].Purchase), r, first.Order.ID)
			}
		}
	}
	in.wantAudit(t, service.Audit{ProductID: one.ID, InitialStock: 5, Stock: 1, Orders: 3, UnitsSold: 4, Consistent: true})

	// Two parts that share a request ID are written apart: the second
	// finds the first's order.
	shared := [][]service.Reservation{{res(one, "u-7", 1, "r-9", 0)}, {res(two, "u-8", 1, "r-9", 0)}}
	_, errs, _, err = in.svc.WriteManyReservations(ctx, gens[:2], shared)
	if err != nil || errs[0][0] != nil || !errors.Is(errs[1][0], failure.ErrRequestIDReused) {
		t.Errorf("two parts sharing r-9: %v, %v; want the first written, the second request_id_reused", errs, err)
	}
	if n := sales(); n != 2 {
		t.Errorf("%d sales of one product for two parts sharing a request ID; want 2, one each", n)
	}
	in.wantAudit(t, service.Audit{ProductID: one.ID, InitialStock: 5, Stock: 0, Orders: 4, UnitsSold: 5, Consistent: true})
}

// TestReserveWriterDeadLetters: a reservation whose row the database
// refuses (a user ID longer than its column) in a transaction of many
// products is written again a product at a time, so that it holds the
// others back no longer than its tries: the others are written, and it
// goes to its bucket's dead letters, recorded as failed, counted.
func TestReserveWriterDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	in := f.instance(settings{NoWriter: true})
	store := reserve.New(f.clients[0], f.prefix)
	one, two := in.product(t, 10), in.product(t, 10)
	take := reserveTaker(t, in, store, 0, one, two)
	take(one.ID, strings.Repeat("x", 300), "r-bad")
	take(one.ID, "u-1", "r-1")
	take(two.ID, "u-2", "r-2")
	writer := f.instance(settings{Consumer: "a"})
	waitWritten(t, f, store, []int64{one.ID, two.ID}, 2)
	rec, ok, err := store.RecordOf(ctx, one.ID, "r-bad")
	if err != nil || !ok || rec.Pending() {
		t.Errorf("the record of r-bad = %+v, %v, %v; want failed", rec, ok, err)
	}
	if n, err := f.clients[0].XLen(ctx, store.DeadOf(reserve.Bucket(one.ID))).Result(); err != nil || n != 1 {
		t.Errorf("the dead letters of product %d's bucket: %d, %v; want r-bad's", one.ID, n, err)
	}
	if n := writer.metrics(t).Sum("seckill_reserve_dead_letters_total"); n != 1 {
		t.Errorf("seckill_reserve_dead_letters_total = %v; want 1", n)
	}
}

// reserveTaker moves products into Redis on in and returns a func that
// reserves a unit of one of them (under limit, 0: none) straight through
// store, as the script does for a purchase, failing t unless it is
// reserved.
func reserveTaker(t *testing.T, in *instance, store *reserve.Store, limit int64, products ...model.Product) func(product int64, user, rid string) {
	t.Helper()
	gens := map[int64]int64{}
	for _, p := range products {
		gen, err := in.svc.MoveToReserve(t.Context(), p.ID)
		if err != nil {
			t.Fatal(err)
		}
		gens[p.ID] = gen
	}
	return func(product int64, user, rid string) {
		t.Helper()
		res, err := store.Reserve(t.Context(), reserve.Request{Product: product, User: user, Quantity: 1, RequestID: rid, Limit: limit, Generation: gens[product]})
		if err != nil || res.Verdict != reserve.Reserved {
			t.Fatalf("Reserve(%d, %s, %s) = %+v, %v; want Reserved", product, user, rid, res, err)
		}
	}
}
