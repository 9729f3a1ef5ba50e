package service_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/reserve"
)

// reserveSettings are an instance selling under reserve, one unit per
// buyer.
func reserveSettings(consumer string, noWriter bool) settings {
	return settings{Strategy: "reserve", PerUserLimit: 1, Consumer: consumer, NoWriter: noWriter}
}

// buyAll makes the purchases at once, spread over the instances, and
// returns each one's receipt and error, in order.
func buyAcross(ins []*instance, ps []service.Purchase) ([]service.Receipt, []error) {
	rs, errs := make([]service.Receipt, len(ps)), make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { rs[i], errs[i] = ins[i%len(ins)].svc.Purchase(context.Background(), p) })
	}
	wg.Wait()
	return rs, errs
}

// TestReserveTwoInstances: two instances sell one product under reserve,
// its first purchases arriving together on both: the stock moves into
// Redis once (every reservation left a different stock, the last 0), each
// buyer gets a reservation (202) or sold_out, never more than the stock;
// both instances' writers write every reservation, once, with the stock
// it left, and the audit is consistent; every answer can be looked up.
func TestReserveTwoInstances(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ins := []*instance{f.instance(reserveSettings("a", false)), f.instance(reserveSettings("b", false))}
	const stock, buyers = 30, 80
	prod := ins[0].product(t, stock)
	ps := make([]service.Purchase, buyers)
	for i := range ps {
		ps[i] = service.Purchase{ProductID: prod.ID, UserID: fmt.Sprint("u-", i), Quantity: 1, RequestID: fmt.Sprint("r-", i)}
	}
	rs, errs := buyAcross(ins, ps)
	var lefts []int64
	for i, r := range rs {
		switch {
		case errs[i] == nil && r.Reservation != nil && !r.Replayed:
			lefts = append(lefts, r.Reservation.Left)
		case errors.Is(errs[i], failure.ErrSoldOut):
		default:
			t.Errorf("Purchase(%s) = %+v, %v; want a reservation or sold_out", show(ps[i]), r, errs[i])
		}
	}
	slices.Sort(lefts)
	if want := countdown(stock); !slices.Equal(lefts, want) {
		t.Fatalf("the reservations left %v; want %v: every unit once", lefts, want)
	}
	waitOrders(t, f, prod.ID, stock)
	ins[1].wantAudit(t, consistentAudit(prod.ID, stock, stock))
	for i, r := range rs {
		a, err := ins[i%2].svc.PurchaseOf(t.Context(), ps[i].RequestID)
		switch {
		case r.Reservation != nil:
			if err != nil || a.Order == nil || a.Order.RemainingStock != r.Reservation.Left || a.Order.Strategy != "reserve" {
				t.Errorf("PurchaseOf(%s) = %+v, %v; want its order, leaving %d", ps[i].RequestID, a, err, r.Reservation.Left)
			}
		case !errors.Is(err, failure.ErrPurchaseNotFound):
			t.Errorf("PurchaseOf(%s), sold out = %+v, %v; want purchase_not_found", ps[i].RequestID, a, err)
		}
	}
	if n := ins[0].counter(t, "reserve", "reserved") + ins[1].counter(t, "reserve", "reserved"); n != stock {
		t.Errorf("seckill_purchases_total{reserve,reserved} = %v over both; want %d", n, stock)
	}
	written := ins[0].metrics(t).Sum("seckill_reserve_written_total") + ins[1].metrics(t).Sum("seckill_reserve_written_total")
	if written < stock {
		t.Errorf("seckill_reserve_written_total = %v over both; want at least %d", written, stock)
	}
}

// countdown is n-1, ..., 0 in increasing order: the stock left by each of
// n reservations of one unit from a stock of n.
func countdown(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// waitOrders waits until the product has orders orders and the reserve
// writers have nothing pending, for 30 s at the most.
func waitOrders(t *testing.T, f *fixture, product int64, orders int64) {
	t.Helper()
	waitWritten(t, f, reserve.New(f.clients[0], f.prefix), []int64{product}, orders)
}

// TestReserveReplaysAndLimits: before the writers write it, a replay of a
// reservation answers it again (202, replayed) and GET purchases says
// pending; a replay with another body answers request_id_reused; the
// buyer's second unit passes the limit; the other strategies answer
// strategy_conflict. Once written, a replay answers the order (200) and
// GET purchases says ordered.
func TestReserveReplaysAndLimits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	seller := f.instance(reserveSettings("", true))
	prod := seller.product(t, 5)
	p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "r-1"}
	first, err := seller.svc.Purchase(ctx, p)
	if err != nil || first.Reservation == nil || first.Reservation.Left != 4 || first.Replayed {
		t.Fatalf("Purchase(%s) = %+v, %v; want a reservation leaving 4", show(p), first, err)
	}
	again, err := seller.svc.Purchase(ctx, p)
	if err != nil || again.Reservation == nil || !again.Replayed || again.Reservation.Left != 4 {
		t.Errorf("a replay before it is written = %+v, %v; want the reservation again, replayed", again, err)
	}
	if a, err := seller.svc.PurchaseOf(ctx, "r-1"); err != nil || a.Reservation == nil || a.Reservation.Left != 4 || a.Reservation.UserID != "u-1" {
		t.Errorf("PurchaseOf(r-1) while pending = %+v, %v; want the reservation", a, err)
	}
	for _, bad := range []service.Purchase{
		{ProductID: prod.ID, UserID: "u-2", Quantity: 1, RequestID: "r-1"},
		{ProductID: prod.ID, UserID: "u-1", Quantity: 2, RequestID: "r-1"},
	} {
		if r, err := seller.svc.Purchase(ctx, bad); !errors.Is(err, failure.ErrRequestIDReused) {
			t.Errorf("Purchase(%s) = %+v, %v; want request_id_reused", show(bad), r, err)
		}
	}
	more := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "r-2"}
	if r, err := seller.svc.Purchase(ctx, more); !errors.Is(err, failure.ErrLimitExceeded) {
		t.Errorf("Purchase(%s), past the limit of 1 = %+v, %v; want limit_exceeded", show(more), r, err)
	}
	for _, st := range strategies {
		other := service.Purchase{ProductID: prod.ID, UserID: "u-3", Quantity: 1, Strategy: st}
		if r, err := seller.svc.Purchase(ctx, other); !errors.Is(err, failure.ErrStrategyConflict) {
			t.Errorf("Purchase(%s) of a product under reserve = %+v, %v; want strategy_conflict", show(other), r, err)
		}
	}
	seller.wantAudit(t, consistentAudit(prod.ID, 5, 0))

	f.instance(reserveSettings("w", false))
	waitOrders(t, f, prod.ID, 1)
	written, err := seller.svc.Purchase(ctx, p)
	if err != nil || written.Reservation != nil || !written.Replayed || written.Order.RemainingStock != 4 {
		t.Errorf("a replay once written = %+v, %v; want its order, replayed", written, err)
	}
	if a, err := seller.svc.PurchaseOf(ctx, "r-1"); err != nil || a.Order == nil || a.Order.ID != written.Order.ID {
		t.Errorf("PurchaseOf(r-1) once written = %+v, %v; want order %d", a, err, written.Order.ID)
	}
	seller.wantAudit(t, consistentAudit(prod.ID, 5, 1))
}

// TestReserveRefusedIsFailed: a reservation the database refuses (its
// request ID made an order of another product, under another strategy) is
// written as nothing, recorded as failed with the reason, which GET
// purchases and a replay answer, and its unit goes back on sale.
func TestReserveRefusedIsFailed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	in := f.instance(reserveSettings("w", false))
	other, prod := in.product(t, 5), in.product(t, 1)
	taken := service.Purchase{ProductID: other.ID, UserID: "u-1", Quantity: 1, RequestID: "r-1", Strategy: "optimistic"}
	if _, err := in.svc.Purchase(ctx, taken); err != nil {
		t.Fatal(err)
	}
	p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "r-1"}
	if r, err := in.svc.Purchase(ctx, p); err != nil || r.Reservation == nil {
		t.Fatalf("Purchase(%s) = %+v, %v; want a reservation (Redis knows its product's requests only)", show(p), r, err)
	}
	// r-1 is the other product's order in the database: the
	// reservation's failure is in its own product's records.
	store := reserve.New(f.clients[0], f.prefix)
	var rec reserve.Record
	if !testenv.Until(30*time.Second, func() bool {
		r, ok, err := store.RecordOf(ctx, prod.ID, "r-1")
		rec = r
		return err == nil && ok && !r.Pending()
	}) {
		t.Fatalf("the record of the reservation after 30 s = %+v; want it failed", rec)
	}
	if rec.Code != string(failure.CodeRequestIDReused) {
		t.Errorf("the reservation failed with %q; want request_id_reused", rec.Code)
	}
	if r, err := in.svc.Purchase(ctx, p); !errors.Is(err, failure.ErrRequestIDReused) {
		t.Errorf("a replay of the refused reservation = %+v, %v; want request_id_reused", r, err)
	}
	again := service.Purchase{ProductID: prod.ID, UserID: "u-2", Quantity: 1, RequestID: "r-2"}
	if r, err := in.svc.Purchase(ctx, again); err != nil || r.Reservation == nil || r.Reservation.Left != 0 {
		t.Errorf("Purchase(%s) after the refusal = %+v, %v; want the unit given back, reserved", show(again), r, err)
	}
	waitOrders(t, f, prod.ID, 1)
	in.wantAudit(t, consistentAudit(prod.ID, 1, 1))
	if n := in.metrics(t).Sum("seckill_reserve_failed_total", "reason", "request_id_reused"); n != 1 {
		t.Errorf("seckill_reserve_failed_total{request_id_reused} = %v; want 1", n)
	}
}

// TestReserveFailedState: GET purchases of a reservation the database
// refused answers failed, with the code and a message.
func TestReserveFailedState(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	in := f.instance(reserveSettings("", true))
	prod := in.product(t, 3)
	p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "r-f"}
	if _, err := in.svc.Purchase(ctx, p); err != nil {
		t.Fatal(err)
	}
	store := reserve.New(f.clients[0], f.prefix)
	if err := store.Join(ctx); err != nil {
		t.Fatal(err)
	}
	es, err := store.Read(ctx, "t", 10, 0)
	if err != nil || len(es) != 1 {
		t.Fatalf("Read = %v, %v", es, err)
	}
	if err := store.Fail(ctx, es[0], string(failure.CodeLimitExceeded)); err != nil {
		t.Fatal(err)
	}
	a, err := in.svc.PurchaseOf(ctx, "r-f")
	if err != nil || a.Failed == nil || a.Failed.Code != failure.CodeLimitExceeded || a.Failed.Message == "" {
		t.Errorf("PurchaseOf a refused reservation = %+v, %v; want failed, limit_exceeded, with a message", a, err)
	}
}

// TestReserveResetWhilePending: a stock reset while reservations wait to
// be written discards them with the generation's orders: they are never
// written, their request IDs are not found, and the new stock sells from
// the top.
func TestReserveResetWhilePending(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	seller := f.instance(reserveSettings("", true))
	prod := seller.product(t, 5)
	for i := range 3 {
		p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprint("u-", i), Quantity: 1, RequestID: fmt.Sprint("old-", i)}
		if r, err := seller.svc.Purchase(ctx, p); err != nil || r.Reservation == nil {
			t.Fatalf("Purchase(%s) = %+v, %v", show(p), r, err)
		}
	}
	if _, err := seller.svc.SetStock(ctx, prod.ID, 2); err != nil {
		t.Fatal(err)
	}
	p := service.Purchase{ProductID: prod.ID, UserID: "u-0", Quantity: 1, RequestID: "new-0"}
	if r, err := seller.svc.Purchase(ctx, p); err != nil || r.Reservation == nil || r.Reservation.Left != 1 {
		t.Fatalf("Purchase(%s) after the reset = %+v, %v; want a reservation leaving 1 of 2", show(p), r, err)
	}
	f.instance(reserveSettings("w", false))
	waitOrders(t, f, prod.ID, 1)
	seller.wantAudit(t, consistentAudit(prod.ID, 2, 1))
	if a, err := seller.svc.PurchaseOf(ctx, "old-1"); !errors.Is(err, failure.ErrPurchaseNotFound) {
		t.Errorf("PurchaseOf(old-1), discarded by the reset = %+v, %v; want purchase_not_found", a, err)
	}
}

// TestReserveRedisLost: the reserve Redis restarted without its data
// (killed, no persistence) while reservations wait: the promises it had
// not written are lost (their buyers find purchase_not_found), the next
// purchase notices the counter is gone and derives it again from the
// database, nothing is oversold, and the writers join again and write
// what is sold next. With appendonly yes and appendfsync always, a
// SIGKILL loses nothing: every reservation is written.
func TestReserveRedisLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		start   func(testing.TB) *testenv.Redis
		keepsIt bool
	}{
		{"no persistence", testenv.StartRedis, false},
		{"appendfsync always", testenv.StartRedisAOF, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			node := tc.start(t)
			f := newFixture(t, []string{node.Addr})
			seller := f.instance(reserveSettings("", true))
			const stock = 6
			prod := seller.product(t, stock)
			buy := func(i int) service.Receipt {
				t.Helper()
				p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprint("u-", i), Quantity: 1, RequestID: fmt.Sprint("r-", i)}
				r, err := seller.svc.Purchase(ctx, p)
				if err != nil || r.Reservation == nil {
					t.Fatalf("Purchase(%s) = %+v, %v; want a reservation", show(p), r, err)
				}
				return r
			}
			for i := range 3 {
				buy(i)
			}
			node.Stop()
			node.Restart(t)
			r := buy(3)
			writer := f.instance(reserveSettings("w", false))
			if tc.keepsIt {
				if r.Reservation.Left != 2 {
					t.Errorf("after the restart, a reservation left %d; want 2: the counter kept", r.Reservation.Left)
				}
				waitOrders(t, f, prod.ID, 4)
				seller.wantAudit(t, consistentAudit(prod.ID, stock, 4))
				return
			}
			if r.Reservation.Left != stock-1 {
				t.Errorf("after the restart, a reservation left %d; want %d: the counter derived from the database", r.Reservation.Left, stock-1)
			}
			if n := seller.metrics(t).Sum("seckill_reserve_counters_recovered_total"); n != 1 {
				t.Errorf("seckill_reserve_counters_recovered_total = %v; want 1", n)
			}
			for i := 4; i < stock+4; i++ { // 5 units left, 6 buyers
				p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprint("u-", i), Quantity: 1, RequestID: fmt.Sprint("r-", i)}
				if _, err := seller.svc.Purchase(ctx, p); err != nil && !errors.Is(err, failure.ErrSoldOut) {
					t.Fatalf("Purchase(%s) = %v", show(p), err)
				}
			}
			waitOrders(t, f, prod.ID, stock)
			writer.wantAudit(t, consistentAudit(prod.ID, stock, stock))
			for i := range 3 {
				if a, err := seller.svc.PurchaseOf(ctx, fmt.Sprint("r-", i)); !errors.Is(err, failure.ErrPurchaseNotFound) {
					t.Errorf("PurchaseOf(r-%d), lost with the Redis = %+v, %v; want purchase_not_found", i, a, err)
				}
			}
		})
	}
}

// TestReserveLoadsOrdersSoldBefore: reserve takes over a product other
// strategies sold since its reset: the counter starts from the database's
// stock, the buyers' units count against the limit, and a replay of an
// order made before answers that order rather than reserving again.
func TestReserveLoadsOrdersSoldBefore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	in := f.instance(reserveSettings("w", false))
	prod := in.product(t, 4)
	before := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "r-1", Strategy: "optimistic"}
	made, err := in.svc.Purchase(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	next := service.Purchase{ProductID: prod.ID, UserID: "u-2", Quantity: 1, RequestID: "r-2"}
	if r, err := in.svc.Purchase(ctx, next); err != nil || r.Reservation == nil || r.Reservation.Left != 2 {
		t.Errorf("the first reserve purchase = %+v, %v; want a reservation leaving 2", r, err)
	}
	more := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "r-3"}
	if r, err := in.svc.Purchase(ctx, more); !errors.Is(err, failure.ErrLimitExceeded) {
		t.Errorf("u-1, who bought under optimistic, under reserve = %+v, %v; want limit_exceeded", r, err)
	}
	replay := before
	replay.Strategy = "reserve"
	if r, err := in.svc.Purchase(ctx, replay); err != nil || !r.Replayed || r.Order.ID != made.Order.ID {
		t.Errorf("a replay under reserve of r-1, ordered before = %+v, %v; want order %d", r, err, made.Order.ID)
	}
	waitOrders(t, f, prod.ID, 2)
	in.wantAudit(t, consistentAudit(prod.ID, 4, 2))
	var p model.Product
	if err := f.db.Take(&p, prod.ID).Error; err != nil || !p.Reserve || !p.ReserveLoaded {
		t.Errorf("the product = %+v, %v; want it marked under reserve and loaded", p, err)
	}
}

// TestReserveReconcile: a counter that disagrees with the database and
// the reservations waiting is moved back where they say: one Redis raised
// (decrements it lost) comes down; one whose reservation's stream entry
// is gone (its record left) goes up, its units back on sale, and that
// reservation is reported lost. A counter that agrees is left alone, the
// reservations not yet written counted as taken.
func TestReserveReconcile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	seller := f.instance(reserveSettings("", true))
	prod := seller.product(t, 10)
	buy := func(i int) {
		t.Helper()
		p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprint("u-", i), Quantity: 1, RequestID: fmt.Sprint("r-", i)}
		if r, err := seller.svc.Purchase(ctx, p); err != nil || r.Reservation == nil {
			t.Fatalf("Purchase(%s) = %+v, %v", show(p), r, err)
		}
	}
	for i := range 3 {
		buy(i)
	}
	f.instance(reserveSettings("w", false))
	waitOrders(t, f, prod.ID, 3)
	for i := 3; i < 5; i++ {
		buy(i) // not written: no writer reads them before the checks below
	}
	reconcile := func(wantDelta, wantLost int64) {
		t.Helper()
		if delta, lost, err := seller.svc.Reconcile(ctx, prod.ID); err != nil || delta != wantDelta || lost != wantLost {
			t.Errorf("Reconcile = moved %d, %d lost, %v; want moved %d, %d lost", delta, lost, err, wantDelta, wantLost)
		}
	}
	store := reserve.New(f.clients[0], f.prefix)
	counter := func() int64 {
		t.Helper()
		n, err := f.clients[0].HGet(ctx, store.KeysOf(prod.ID).Counter, "stock").Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The writer may write r-3 and r-4 meanwhile: either way the counter
	// agrees (5 = 10 - 3 written - 2 waiting, or - 5 written).
	reconcile(0, 0)
	if err := f.clients[0].HIncrBy(ctx, store.KeysOf(prod.ID).Counter, "stock", 2).Err(); err != nil {
		t.Fatal(err)
	}
	reconcile(-2, 0)
	if n := counter(); n != 5 {
		t.Errorf("the counter after the correction = %d; want 5", n)
	}
	waitOrders(t, f, prod.ID, 5)
	// A reservation whose stream entry Redis lost, its record and its
	// decrement kept (as a restart from an older AOF, or a replica, can
	// leave it): the counter took its unit, and nobody will write it.
	k := store.KeysOf(prod.ID)
	rec := reserve.Record{Quantity: 1, Left: 4, User: "u-lost"}
	if err := f.clients[0].HSet(ctx, k.Requests, "r-lost", rec.String()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.clients[0].HIncrBy(ctx, k.Counter, "stock", -1).Err(); err != nil {
		t.Fatal(err)
	}
	reconcile(1, 1)
	if n := counter(); n != 5 {
		t.Errorf("the counter after the correction = %d; want 5, the lost unit back on sale", n)
	}
	if n := seller.metrics(t).Sum("seckill_reserve_lost_reservations_total"); n != 1 {
		t.Errorf("seckill_reserve_lost_reservations_total = %v; want 1", n)
	}
	seller.wantAudit(t, consistentAudit(prod.ID, 10, 5))
}

// TestReserveRedisAheadOfTheDatabase: a Redis that kept the keys of a
// database since restored or recreated (its counter of a generation the
// database never reached) does not stop the sale: the database's word
// goes, and the counter is loaded from it.
func TestReserveRedisAheadOfTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	in := f.instance(reserveSettings("w", false))
	prod := in.product(t, 4)
	k := reserve.New(f.clients[0], f.prefix).KeysOf(prod.ID)
	if err := f.clients[0].HSet(ctx, k.Counter, "stock", 100, "gen", 99).Err(); err != nil {
		t.Fatal(err)
	}
	p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "r-1"}
	if r, err := in.svc.Purchase(ctx, p); err != nil || r.Reservation == nil || r.Reservation.Left != 3 {
		t.Fatalf("Purchase(%s) over a counter of generation 99 = %+v, %v; want a reservation leaving 3 of the database's 4", show(p), r, err)
	}
	waitOrders(t, f, prod.ID, 1)
	in.wantAudit(t, consistentAudit(prod.ID, 4, 1))
}
