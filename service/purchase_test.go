package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/reserve"
)

// TestPurchaseSellsExactlyStock: many more concurrent buyers than units
// under every correct strategy (local on one instance) give exactly as many
// orders as units, stock 0, a consistent audit, and failure.ErrSoldOut for everyone
// else; every unit is sold once (each order left a different stock).
func TestPurchaseSellsExactlyStock(t *testing.T) {
	const stock, buyersN = 10, 60
	eachStrategy(t, []string{"redlock", "pessimistic", "optimistic", "token", "setnx", "local"}, func(t *testing.T, strategy string) {
		in := newFixture(t, nil).instance(settings{Strategy: strategy})
		prod := in.product(t, stock)

		results := purchaseAll(t.Context(), buyers(in.svc, prod.ID, "", buyersN, 0))
		sold, remaining := 0, map[int64]bool{}
		for _, res := range results {
			switch {
			case res.err == nil:
				sold++
				if remaining[res.r.Order.RemainingStock] {
					t.Errorf("Purchase(%s) left stock %d, as an earlier order did", show(res.p), res.r.Order.RemainingStock)
				}
				remaining[res.r.Order.RemainingStock] = true
				if res.r.Order.Strategy != strategy {
					t.Errorf("Purchase(%s) made an order of strategy %q; want %q", show(res.p), res.r.Order.Strategy, strategy)
				}
			case !errors.Is(res.err, failure.ErrSoldOut):
				t.Errorf("Purchase(%s) = %v; want nil or %v", show(res.p), res.err, failure.ErrSoldOut)
			}
		}
		if sold != stock {
			t.Errorf("%d of %d purchases succeeded; want %d", sold, buyersN, stock)
		}
		in.wantAudit(t, consistentAudit(prod.ID, stock, stock))
		if got := in.counter(t, strategy, "ok"); got != stock {
			t.Errorf("seckill_purchases_total{strategy=%q,outcome=\"ok\"} = %v; want %d", strategy, got, stock)
		}
		if got := in.counter(t, strategy, "sold_out"); got != buyersN-stock {
			t.Errorf("seckill_purchases_total{strategy=%q,outcome=\"sold_out\"} = %v; want %d", strategy, got, buyersN-stock)
		}
	})
}

// TestPurchaseNoneOversells shows the flaw of none: buyers who read the
// stock while others are still working all write, and the stock goes
// negative.
func TestPurchaseNoneOversells(t *testing.T) {
	t.Parallel()
	const stock, buyersN = 2, 12
	in := newFixture(t, nil).instance(settings{Strategy: "none"})
	prod := in.product(t, stock)

	results := purchaseAll(t.Context(), buyers(in.svc, prod.ID, "none", buyersN, 200*time.Millisecond))
	sold := 0
	for _, res := range results {
		switch {
		case res.err == nil:
			sold++
		case !errors.Is(res.err, failure.ErrSoldOut):
			t.Errorf("Purchase(%s) = %v; want nil or %v", show(res.p), res.err, failure.ErrSoldOut)
		}
	}
	a := in.audit(t, prod.ID)
	if sold <= stock || a.Stock >= 0 || a.OversoldUnits <= 0 || a.Consistent {
		t.Errorf("none: %d sold, Audit = %+v; want more than %d sold, stock < 0, oversold units > 0, not consistent", sold, a, stock)
	}
	// The audit still adds up: every order is counted and stock says so.
	if a.Orders != int64(sold) || a.InitialStock-a.Stock != a.UnitsSold || a.OversoldUnits != a.UnitsSold-stock {
		t.Errorf("none: %d sold, Audit = %+v; want the orders and units of what was sold", sold, a)
	}
}

// TestPurchaseLocalInstances: the local lock is correct within one instance
// and oversells across two instances that sell from the same database.
func TestPurchaseLocalInstances(t *testing.T) {
	const buyersN = 4
	for _, tc := range []struct {
		name      string
		instances int
		oversells bool
	}{
		{"one instance", 1, false},
		{"two instances", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			ins := make([]*instance, tc.instances)
			for i := range ins {
				ins[i] = f.instance(settings{Strategy: "local"}) // each its own locker.Local
			}
			prod := ins[0].product(t, 1)
			attempts := make([]attempt, buyersN)
			for i := range attempts {
				attempts[i] = attempt{svc: ins[i%len(ins)].svc, p: service.Purchase{ProductID: prod.ID,
					UserID: fmt.Sprintf("u-%d", i), Quantity: 1, Work: 200 * time.Millisecond}}
			}
			sold := 0
			for _, res := range purchaseAll(t.Context(), attempts) {
				switch {
				case res.err == nil:
					sold++
				case !errors.Is(res.err, failure.ErrSoldOut):
					t.Errorf("Purchase(%s) = %v; want nil or %v", show(res.p), res.err, failure.ErrSoldOut)
				}
			}
			a := ins[0].audit(t, prod.ID)
			if tc.oversells {
				if sold < 2 || a.Stock >= 0 || a.OversoldUnits < 1 || a.Consistent {
					t.Errorf("local on %d instances: %d sold, Audit = %+v; want an oversell", tc.instances, sold, a)
				}
				return
			}
			if sold != 1 {
				t.Errorf("local on %d instance: %d sold; want 1", tc.instances, sold)
			}
			ins[0].wantAudit(t, consistentAudit(prod.ID, 1, 1))
		})
	}
}

// TestPurchaseReplay: a purchase repeated with its request ID answers with
// the first order and sells nothing more, under every strategy.
func TestPurchaseReplay(t *testing.T) {
	eachStrategy(t, strategies, func(t *testing.T, strategy string) {
		ctx := t.Context()
		in := newFixture(t, nil).instance(settings{Strategy: strategy, PerUserLimit: 1, Fencing: true})
		prod := in.product(t, 5)
		p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "req-1"}

		first, err := in.svc.Purchase(ctx, p)
		if err != nil || first.Replayed || first.Order.RemainingStock != 4 {
			t.Fatalf("Purchase(%s) = %+v, %v; want a new order leaving 4", show(p), first, err)
		}
		again, err := in.svc.Purchase(ctx, p)
		if err != nil || !again.Replayed || again.Order.ID != first.Order.ID || again.Order.RemainingStock != 4 {
			t.Errorf("Purchase(%s) again = %+v, %v; want the replayed order %d leaving 4", show(p), again, err, first.Order.ID)
		}
		in.wantAudit(t, consistentAudit(prod.ID, 5, 1))
	})
}

// TestPurchaseStrategyConflict: once a product's stock has moved to
// reserve, every other strategy answers strategy_conflict and writes
// nothing, its single purchase (batch=1) and its batches alike, while a
// replay of an order made before still answers that order; a stock reset
// gives the product back to every strategy.
func TestPurchaseStrategyConflict(t *testing.T) {
	eachStrategy(t, strategies, func(t *testing.T, strategy string) {
		ctx := t.Context()
		in := newFixture(t, nil).instance(settings{Strategy: strategy, PerUserLimit: 1, Fencing: true})
		prod := in.product(t, 5)
		first := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "req-1"}
		made, err := in.svc.Purchase(ctx, first)
		if err != nil {
			t.Fatalf("Purchase(%s) = %v; want an order", show(first), err)
		}
		if _, err := in.svc.MoveToReserve(ctx, prod.ID); err != nil {
			t.Fatalf("MoveToReserve = %v", err)
		}
		if moved, err := in.svc.Product(ctx, prod.ID); err != nil || !moved.Reserve || moved.Stock != 4 {
			t.Fatalf("the product after MoveToReserve = %+v, %v; want it under reserve with 4 left", moved, err)
		}
		for _, p := range []service.Purchase{
			{ProductID: prod.ID, UserID: "u-2", Quantity: 1, RequestID: "req-2"},
			{ProductID: prod.ID, UserID: "u-3", Quantity: 1, Batch: 1},
		} {
			if r, err := in.svc.Purchase(ctx, p); !errors.Is(err, failure.ErrStrategyConflict) {
				t.Errorf("Purchase(%s) of a product under reserve = %+v, %v; want strategy_conflict", show(p), r, err)
			}
		}
		if again, err := in.svc.Purchase(ctx, first); err != nil || !again.Replayed || again.Order.ID != made.Order.ID {
			t.Errorf("a replay of req-1 under reserve = %+v, %v; want the order %d", again, err, made.Order.ID)
		}
		in.wantAudit(t, consistentAudit(prod.ID, 5, 1))
		if _, err := in.svc.SetStock(ctx, prod.ID, 2); err != nil {
			t.Fatalf("SetStock = %v", err)
		}
		p := service.Purchase{ProductID: prod.ID, UserID: "u-2", Quantity: 1, RequestID: "req-3"}
		if r, err := in.svc.Purchase(ctx, p); err != nil || r.Order.RemainingStock != 1 {
			t.Errorf("Purchase(%s) after a reset = %+v, %v; want an order leaving 1", show(p), r, err)
		}
	})
}

// TestWriteReservations: reserve's writer writes a product's reservations
// as orders, each with the stock its reservation left in Redis, decided
// by the sale rule against the database: writing them again writes
// nothing more (each answers its order); one the database cannot honour
// (fewer units left than Redis said, the buyer past the limit, a request ID
// used for another purchase) is refused with its reason and writes
// nothing; after a reset, the older generation's reservations are
// discarded whole.
func TestWriteReservations(t *testing.T) {
	ctx := t.Context()
	in := newFixture(t, nil).instance(settings{PerUserLimit: 2})
	prod := in.product(t, 5)
	gen, err := in.svc.MoveToReserve(ctx, prod.ID)
	if err != nil {
		t.Fatalf("MoveToReserve = %v", err)
	}
	res := func(user string, q int64, rid string, left int64) service.Reservation {
		return service.Reservation{Purchase: service.Purchase{ProductID: prod.ID, UserID: user, Quantity: q, RequestID: rid}, Left: left}
	}
	first := []service.Reservation{res("u-1", 1, "r-1", 4), res("u-2", 1, "r-2", 3), res("u-3", 2, "r-3", 1)}
	receipts, errs, err := in.svc.WriteReservations(ctx, gen, first)
	if err != nil {
		t.Fatalf("WriteReservations = %v", err)
	}
	for i, r := range receipts {
		if errs[i] != nil || r.Replayed || r.Order.ID == 0 || r.Order.Strategy != "reserve" || r.Order.RemainingStock != first[i].Left {
			t.Errorf("reservation %s: %+v, %v; want a new reserve order leaving %d", show(first[i].Purchase), r, errs[i], first[i].Left)
		}
	}
	again, errs, err := in.svc.WriteReservations(ctx, gen, first)
	if err != nil {
		t.Fatalf("WriteReservations again = %v", err)
	}
	for i, r := range again {
		if errs[i] != nil || !r.Replayed || r.Order.ID != receipts[i].Order.ID {
			t.Errorf("reservation %s again: %+v, %v; want its order %d replayed", show(first[i].Purchase), r, errs[i], receipts[i].Order.ID)
		}
	}
	written := service.Audit{ProductID: prod.ID, InitialStock: 5, Stock: 1, Orders: 3, UnitsSold: 4, Consistent: true}
	in.wantAudit(t, written)

	refused := []service.Reservation{res("u-4", 2, "r-4", 0), res("u-3", 1, "r-5", 0), res("u-5", 1, "r-1", 0)}
	_, errs, err = in.svc.WriteReservations(ctx, gen, refused)
	if err != nil {
		t.Fatalf("WriteReservations of refused ones = %v", err)
	}
	for i, want := range []error{failure.ErrSoldOut, failure.ErrLimitExceeded, failure.ErrRequestIDReused} {
		if !errors.Is(errs[i], want) {
			t.Errorf("reservation %s: %v; want %v", show(refused[i].Purchase), errs[i], want)
		}
	}
	in.wantAudit(t, written)

	if _, err := in.svc.SetStock(ctx, prod.ID, 3); err != nil {
		t.Fatalf("SetStock = %v", err)
	}
	if _, _, err := in.svc.WriteReservations(ctx, gen, []service.Reservation{res("u-6", 1, "r-6", 2)}); !service.ErrGenerationGone(err) {
		t.Errorf("WriteReservations of a generation a reset ended = %v; want them discarded", err)
	}
	in.wantAudit(t, consistentAudit(prod.ID, 3, 0))
}

// TestReserveWriters: two instances' writers write every reservation the
// script took, once, as orders: those a writer that died had read and
// never acknowledged too, once they have been idle long enough; a
// reservation the database refuses (its request ID used by another
// product's) is recorded as failed, with its reason; an entry that is not
// a reservation is acknowledged, not read for ever; nothing stays pending;
// and when the Redis loses the writers' group, they join again and go on.
func TestReserveWriters(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, nil)
	in := f.instance(settings{PerUserLimit: 1, NoWriter: true})
	store := reserve.New(f.clients[0], f.prefix)
	one, two := in.product(t, 30), in.product(t, 5)
	take := reserveTaker(t, in, store, 1, one, two)
	for i := range 5 {
		take(one.ID, fmt.Sprint("d-", i), fmt.Sprint("rd-", i))
	}
	if err := store.Join(ctx); err != nil {
		t.Fatal(err)
	}
	// A writer reads them, then dies; two others start.
	if dead, err := store.Read(ctx, "dead", 100, 0); err != nil || len(dead) != 5 {
		t.Fatalf("the dead writer's salestore.Read = %d entries, %v; want 5", len(dead), err)
	}
	for _, c := range []string{"a", "b"} {
		f.instance(settings{PerUserLimit: 1, Consumer: c})
	}
	for i := range 20 {
		take(one.ID, fmt.Sprint("u-", i), fmt.Sprint("r-", i))
	}
	take(two.ID, "z", "r-x")
	take(one.ID, "y", "r-x")
	if err := f.clients[0].XAdd(ctx, &redis.XAddArgs{Stream: store.StreamOf(0), Values: map[string]any{"p": "junk"}}).Err(); err != nil {
		t.Fatal(err)
	}
	waitWritten(t, f, store, []int64{one.ID, two.ID}, 26)

	// The Redis loses the group (as a restart without its data would):
	// the writers join again and write what comes next.
	for b := range reserve.Buckets {
		if err := f.clients[0].XGroupDestroy(ctx, store.StreamOf(b), reserve.Group).Err(); err != nil {
			t.Fatal(err)
		}
	}
	take(one.ID, "w", "r-w")
	waitWritten(t, f, store, []int64{one.ID, two.ID}, 27)
	for _, p := range []int64{one.ID, two.ID} {
		if a := in.audit(t, p); !a.Consistent || a.OversoldUnits != 0 {
			t.Errorf("audit of product %d = %+v; want consistent", p, a)
		}
	}
	failed := 0
	for _, p := range []int64{one.ID, two.ID} {
		rec, ok, err := store.RecordOf(ctx, p, "r-x")
		if err != nil || !ok {
			t.Fatalf("RecordOf(%d, r-x) = %v, %v", p, ok, err)
		}
		if !rec.Pending() {
			failed++
			if rec.Code != "request_id_reused" {
				t.Errorf("r-x of product %d failed with %q; want request_id_reused", p, rec.Code)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d of the two reservations with request ID r-x failed; want 1", failed)
	}
}

// TestResetForgetsReserveKeys: a stock reset deletes what reserve kept of
// the product's ended generation in Redis: its counter (the next purchase
// loads the new stock) and its requests' records.
func TestResetForgetsReserveKeys(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, nil)
	in := f.instance(settings{PerUserLimit: 1, Consumer: "a"})
	store := reserve.New(f.clients[0], f.prefix)
	prod := in.product(t, 3)
	gen, err := in.svc.MoveToReserve(ctx, prod.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := reserve.Request{Product: prod.ID, User: "u-1", Quantity: 1, RequestID: "r-1", Limit: 1, Generation: gen}
	if res, err := store.Reserve(ctx, r); err != nil || res.Verdict != reserve.Reserved {
		t.Fatalf("Reserve = %+v, %v; want Reserved", res, err)
	}
	if _, err := in.svc.SetStock(ctx, prod.ID, 3); err != nil {
		t.Fatalf("SetStock = %v", err)
	}
	if _, ok, err := store.RecordOf(ctx, prod.ID, "r-1"); err != nil || ok {
		t.Errorf("RecordOf(r-1) after a reset = %v, %v; want no record", ok, err)
	}
	// Even a buyer who has not heard of the reset.
	if res, err := store.Reserve(ctx, r); err != nil || res.Verdict != reserve.NotLoaded {
		t.Errorf("Reserve after a reset = %+v, %v; want NotLoaded", res, err)
	}
}

// waitWritten waits until the products have orders in all and no
// reservation is pending with a writer, for 30 s at the most.
func waitWritten(t *testing.T, f *fixture, store *reserve.Store, products []int64, orders int64) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		if err := f.db.Model(&model.Order{}).Where("product_id IN ?", products).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		pending := int64(0)
		for b := range reserve.Buckets {
			if p, err := f.clients[0].XPending(ctx, store.StreamOf(b), reserve.Group).Result(); err == nil {
				pending += p.Count
			}
		}
		if n == orders && pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d orders, %d reservations pending after 30 s; want %d and 0", n, pending, orders)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPurchaseRequestIDReused: a request ID already used by a purchase of
// another product, user or quantity answers failure.ErrRequestIDReused and sells
// nothing.
func TestPurchaseRequestIDReused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	in := newFixture(t, nil).instance(settings{Strategy: "optimistic"})
	prod, other := in.product(t, 5), in.product(t, 5)
	first := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "req-1"}
	if _, err := in.svc.Purchase(ctx, first); err != nil {
		t.Fatalf("Purchase(%s) = %v; want nil", show(first), err)
	}
	for _, p := range []service.Purchase{
		{ProductID: other.ID, UserID: "u-1", Quantity: 1, RequestID: "req-1"},
		{ProductID: prod.ID, UserID: "u-2", Quantity: 1, RequestID: "req-1"},
		{ProductID: prod.ID, UserID: "u-1", Quantity: 2, RequestID: "req-1"},
		{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "req-1", Strategy: "redlock"}, // the strategy is not part of it
	} {
		var want error = failure.ErrRequestIDReused
		if p.Strategy != "" {
			want = nil
		}
		r, err := in.svc.Purchase(ctx, p)
		if !errors.Is(err, want) || (want == nil && !r.Replayed) {
			t.Errorf("Purchase(%s) = %+v, %v; want %v", show(p), r, err, want)
		}
	}
	in.wantAudit(t, consistentAudit(prod.ID, 5, 1))
	in.wantAudit(t, consistentAudit(other.ID, 5, 0))
}

// TestPurchaseConcurrentReplay: ten concurrent purchases with one request
// ID (a client retrying while its first attempt is in flight) make exactly
// one order; every other one answers with that order, replayed, even when
// the first took the last unit and the user's whole limit.
func TestPurchaseConcurrentReplay(t *testing.T) {
	const n = 10
	eachStrategy(t, strategies, func(t *testing.T, strategy string) {
		in := newFixture(t, nil).instance(settings{Strategy: strategy, PerUserLimit: 1, Fencing: true})
		prod := in.product(t, 1)
		p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "req-" + strategy}
		attempts := make([]attempt, n)
		for i := range attempts {
			attempts[i] = attempt{svc: in.svc, p: p}
		}
		results := purchaseAll(t.Context(), attempts)
		orderIDs, fresh := map[int64]bool{}, 0
		for _, res := range results {
			if res.err != nil {
				t.Errorf("Purchase(%s) = %v; want nil", show(res.p), res.err)
				continue
			}
			orderIDs[res.r.Order.ID] = true
			if !res.r.Replayed {
				fresh++
			}
		}
		if len(orderIDs) > 1 || fresh > 1 {
			t.Errorf("%d concurrent Purchase(%s): orders %v, %d not replayed; want one order, made once", n, show(p), orderIDs, fresh)
		}
		in.wantAudit(t, consistentAudit(prod.ID, 1, 1))
	})
}

// TestPurchasePerUserLimit: with a limit of one unit, a user's second
// purchase, or a first one of two units, answers failure.ErrLimitExceeded and sells
// nothing, under every strategy.
func TestPurchasePerUserLimit(t *testing.T) {
	eachStrategy(t, strategies, func(t *testing.T, strategy string) {
		ctx := t.Context()
		in := newFixture(t, nil).instance(settings{Strategy: strategy, PerUserLimit: 1, Fencing: true})
		prod := in.product(t, 5)
		for _, tc := range []struct {
			p    service.Purchase
			want error
		}{
			{service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1}, nil},
			{service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1}, failure.ErrLimitExceeded},
			{service.Purchase{ProductID: prod.ID, UserID: "u-2", Quantity: 2}, failure.ErrLimitExceeded},
			{service.Purchase{ProductID: prod.ID, UserID: "u-2", Quantity: 1}, nil},
		} {
			if _, err := in.svc.Purchase(ctx, tc.p); !errors.Is(err, tc.want) {
				t.Errorf("Purchase(%s) = %v; want %v", show(tc.p), err, tc.want)
			}
		}
		in.wantAudit(t, consistentAudit(prod.ID, 5, 2))
		if got := in.counter(t, strategy, "limit_exceeded"); got != 2 {
			t.Errorf("seckill_purchases_total{strategy=%q,outcome=\"limit_exceeded\"} = %v; want 2", strategy, got)
		}
	})
}

// TestPurchaseValidation: malformed purchases answer failure.ErrInvalid before
// anything is read or locked; the limits themselves are accepted.
func TestPurchaseValidation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	in := newFixture(t, nil).instance(settings{Strategy: "optimistic"})
	prod := in.product(t, 1000)
	id := prod.ID
	long := strings.Repeat("x", 65)
	for _, tc := range []struct {
		name string
		p    service.Purchase
		want error
	}{
		{"product id 0", service.Purchase{ProductID: 0, UserID: "u", Quantity: 1}, failure.ErrInvalid},
		{"negative product id", service.Purchase{ProductID: -1, UserID: "u", Quantity: 1}, failure.ErrInvalid},
		{"empty user", service.Purchase{ProductID: id, UserID: "", Quantity: 1}, failure.ErrInvalid},
		{"blank user", service.Purchase{ProductID: id, UserID: "  ", Quantity: 1}, failure.ErrInvalid},
		{"65-character user", service.Purchase{ProductID: id, UserID: long, Quantity: 1}, failure.ErrInvalid},
		{"user not UTF-8", service.Purchase{ProductID: id, UserID: "u\xff", Quantity: 1}, failure.ErrInvalid},
		{"quantity 0", service.Purchase{ProductID: id, UserID: "u", Quantity: 0}, failure.ErrInvalid},
		{"quantity 101", service.Purchase{ProductID: id, UserID: "u", Quantity: 101}, failure.ErrInvalid},
		{"negative quantity", service.Purchase{ProductID: id, UserID: "u", Quantity: -1}, failure.ErrInvalid},
		{"65-character request id", service.Purchase{ProductID: id, UserID: "u", Quantity: 1, RequestID: long}, failure.ErrInvalid},
		{"unknown strategy", service.Purchase{ProductID: id, UserID: "u", Quantity: 1, Strategy: "mutex"}, failure.ErrInvalid},
		{"work above MaxHold", service.Purchase{ProductID: id, UserID: "u", Quantity: 1, Work: service.MaxHold + time.Millisecond}, failure.ErrInvalid},
		{"negative work", service.Purchase{ProductID: id, UserID: "u", Quantity: 1, Work: -time.Millisecond}, failure.ErrInvalid},
		{"64-character user", service.Purchase{ProductID: id, UserID: strings.Repeat("é", 64), Quantity: 1}, nil},
		{"quantity 100", service.Purchase{ProductID: id, UserID: "u-100", Quantity: 100}, nil},
		{"64-character request id", service.Purchase{ProductID: id, UserID: "u-r", Quantity: 1, RequestID: strings.Repeat("r", 64)}, nil},
	} {
		if _, err := in.svc.Purchase(ctx, tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%s: Purchase(%s) = %v; want %v", tc.name, show(tc.p), err, tc.want)
		}
	}
	in.wantAudit(t, service.Audit{ProductID: id, InitialStock: 1000, Stock: 898, Orders: 3, UnitsSold: 102, Consistent: true})
}

// TestPurchaseNotFound: a product that does not exist answers failure.ErrNotFound
// under every strategy.
func TestPurchaseNotFound(t *testing.T) {
	t.Parallel()
	in := newFixture(t, nil).instance(settings{Fencing: true})
	for _, strategy := range strategies {
		p := service.Purchase{ProductID: 424242, UserID: "u-1", Quantity: 1, Strategy: strategy}
		if _, err := in.svc.Purchase(t.Context(), p); !errors.Is(err, failure.ErrNotFound) {
			t.Errorf("Purchase(%s) = %v; want %v", show(p), err, failure.ErrNotFound)
		}
	}
}

// TestPurchaseSoldOutSkipsLock: a sold-out product answers failure.ErrSoldOut
// without waiting for its lock. The lock is held by someone else
// throughout; the same purchase of the product while it still had stock
// shows that the lock held is the one a purchase would wait for.
func TestPurchaseSoldOutSkipsLock(t *testing.T) {
	eachStrategy(t, []string{"local", "setnx", "token", "redlock", "pessimistic"}, func(t *testing.T, strategy string) {
		ctx := t.Context()
		in := newFixture(t, nil).instance(settings{Strategy: strategy, Wait: 500 * time.Millisecond, TTL: 30 * time.Second})
		prod := in.product(t, 1)
		hold := func() (release func()) {
			if strategy == "pessimistic" {
				tx := in.db.WithContext(ctx).Begin()
				if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&model.Product{}, prod.ID).Error; err != nil {
					t.Fatalf("lock product row: %v", err)
				}
				return func() { tx.Rollback() }
			}
			lease, err := in.lockers[strategy].Lock(ctx, in.lockKey(strategy, prod.ID))
			if err != nil {
				t.Fatalf("Lock(%s) = %v; want nil", in.lockKey(strategy, prod.ID), err)
			}
			return func() {
				if err := lease.Unlock(context.WithoutCancel(ctx)); err != nil {
					t.Errorf("Unlock(%s) = %v; want nil", in.lockKey(strategy, prod.ID), err)
				}
			}
		}
		p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1}

		release := hold()
		if _, err := in.svc.Purchase(ctx, p); !errors.Is(err, failure.ErrLockTimeout) {
			t.Errorf("Purchase(%s) with stock 1 and the lock held = %v; want %v", show(p), err, failure.ErrLockTimeout)
		}
		release()
		if _, err := in.svc.SetStock(ctx, prod.ID, 0); err != nil {
			t.Fatalf("SetStock(%d, 0) = %v; want nil", prod.ID, err)
		}
		release = hold()
		defer release()
		if _, err := in.svc.Purchase(ctx, p); !errors.Is(err, failure.ErrSoldOut) {
			t.Errorf("Purchase(%s) with stock 0 and the lock held = %v; want %v", show(p), err, failure.ErrSoldOut)
		}
	})
}

// TestPurchaseCancelledReleasesLock: buyers who hang up leave no lock
// behind. A's purchase is in a hold (its work lasts 2 s) and B waits in
// line behind it when both hang up: B leaves the line with the context's
// error and buys nothing; A's hold, which may sell for a whole batch, is not
// cut short: its answer is the hold's, an order (its client would never see
// it). Then the next purchase gets the lock at once, with a wait far
// shorter than the lease.
func TestPurchaseCancelledReleasesLock(t *testing.T) {
	eachStrategy(t, []string{"local", "setnx", "token", "redlock", "pessimistic"}, func(t *testing.T, strategy string) {
		in := newFixture(t, nil).instance(settings{Strategy: strategy, Fencing: true,
			TTL: 30 * time.Second, Wait: 10 * time.Second})
		prod := in.product(t, 3)
		a := service.Purchase{ProductID: prod.ID, UserID: "u-a", Quantity: 1, Work: 2 * time.Second}
		b := service.Purchase{ProductID: prod.ID, UserID: "u-b", Quantity: 1}

		ctx, cancel := context.WithCancel(t.Context())
		doneA, doneB := make(chan error, 1), make(chan error, 1)
		go func() {
			_, err := in.svc.Purchase(ctx, a)
			doneA <- err
		}()
		// A is in its hold once granted its lock (pessimistic: its row).
		testenv.Eventually(t, 10*time.Second, "A to be granted its lock", func() bool {
			return in.lockWaits(t, strategy, "acquired") == 1
		})
		go func() {
			_, err := in.svc.Purchase(ctx, b)
			doneB <- err
		}()
		testenv.Eventually(t, 10*time.Second, "B in line", func() bool { return in.svc.Waiting(prod.ID) == 1 })
		cancel()
		if err := <-doneB; !errors.Is(err, context.Canceled) {
			t.Errorf("Purchase(%s) cancelled in line = %v; want %v", show(b), err, context.Canceled)
		}
		if err := <-doneA; err != nil {
			t.Errorf("Purchase(%s) cancelled in its hold = %v; want nil (the hold's answer)", show(a), err)
		}
		in.wantAudit(t, consistentAudit(prod.ID, 3, 1))

		c := service.Purchase{ProductID: prod.ID, UserID: "u-c", Quantity: 1}
		cctx, cancelC := context.WithTimeout(t.Context(), 5*time.Second) // far less than the lease
		defer cancelC()
		if _, err := in.svc.Purchase(cctx, c); err != nil {
			t.Errorf("Purchase(%s) after the buyers hung up = %v; want nil", show(c), err)
		}
		in.wantAudit(t, consistentAudit(prod.ID, 3, 2))
	})
}

// benchGoroutines is about how many buyers RunParallel runs at once.
const benchGoroutines = 32

// BenchmarkPurchase buys one unit of one hot product per operation, from
// about benchGoroutines concurrent buyers with users of their own, under
// each strategy, on the real MySQL and Redis nodes, with the default
// per-user limit of one unit (so the limit's row is written every time).
// The strategies whose buyers wait in line run with the default batch and
// again with batch=1 (a lock per purchase, as in the articles). The stock is reset to
// b.N before each run so that every purchase sells (none oversells nothing
// it could not sell anyway: it is measured only). Besides ns/op it reports
// purchases/s over the whole run.
func BenchmarkPurchase(b *testing.B) {
	f := newFixture(b, nil)
	ctx := context.Background()
	type benchCase struct {
		name, strategy string
		batch          int
	}
	var cases []benchCase
	for _, st := range service.StrategyTable() {
		cases = append(cases, benchCase{st.Name, st.Name, 0})
		if st.Lined() {
			cases = append(cases, benchCase{st.Name + "/batch=1", st.Name, 1})
		}
	}
	for _, bc := range cases {
		strategy := bc.strategy
		// A wait long enough that no buyer gives up: the benchmark measures
		// throughput, not timeouts.
		in := f.instance(settings{Strategy: strategy, Fencing: true, PerUserLimit: 1, Wait: time.Minute})
		prod := in.product(b, 0)
		b.Run(bc.name, func(b *testing.B) {
			if _, err := in.svc.SetStock(ctx, prod.ID, int64(b.N)); err != nil {
				b.Fatalf("SetStock(%d, %d) = %v; want nil", prod.ID, b.N, err)
			}
			testenv.RunParallel(b, benchGoroutines, func() func(int64) error {
				return func(n int64) error {
					p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-%d", n), Quantity: 1, Batch: bc.batch}
					if _, err := in.svc.Purchase(ctx, p); err != nil {
						return fmt.Errorf("Purchase(%s) = %v; want nil", show(p), err)
					}
					return nil
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "purchases/s")
			a, err := in.svc.Audit(ctx, prod.ID)
			switch {
			case err != nil:
				b.Errorf("Audit(%d) = %v; want nil", prod.ID, err)
			case strategy != "none" && (a.Stock != 0 || !a.Consistent):
				b.Errorf("Audit(%d) = %+v; want stock 0, consistent", prod.ID, a)
			}
		})
	}
}

// BenchmarkSoldOut answers purchases of a product this instance has seen
// sold out, from its memory, with allocations: the path a flash sale takes
// for nearly every request once the stock is gone, which touches neither
// MySQL nor Redis (with a request_id of its own, the memory of the
// product's orders answers too).
func BenchmarkSoldOut(b *testing.B) {
	f := newFixture(b, nil)
	ctx := context.Background()
	in := f.instance(settings{Strategy: "redlock", Fencing: true, PerUserLimit: 1})
	prod := in.product(b, 0)
	for _, bc := range []struct{ name, requestID string }{{"no_request_id", ""}, {"request_id", "r-bench"}} {
		b.Run(bc.name, func(b *testing.B) {
			p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: bc.requestID}
			// The first answer reads the stock; from then on the memory
			// answers.
			if _, err := in.svc.Purchase(ctx, p); !errors.Is(err, failure.ErrSoldOut) {
				b.Fatalf("Purchase(%s) = %v; want sold out", show(p), err)
			}
			var failures atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := in.svc.Purchase(ctx, p); !errors.Is(err, failure.ErrSoldOut) {
						failures.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := failures.Load(); n > 0 {
				b.Errorf("%d of %d purchases of a sold-out product did not answer sold out", n, b.N)
			}
		})
	}
}
