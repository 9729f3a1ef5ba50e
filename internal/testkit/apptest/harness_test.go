package apptest_test

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

func TestMain(m *testing.M) { os.Exit(apptest.Main(m)) }

// TestHarness plays one sale through each kind of start, an instance in
// the test's process and the program's binary, with the same calls: two
// instances of one sale see one product, a purchase holds its lock key on
// a majority of the nodes while it works, its order answers 201 and its
// replay on the other instance 200, the per-user limit and sold_out answer
// their codes, raw requests their error bodies, the audit and the metrics
// count what was sold, and an instance that dies answers nothing.
func TestHarness(t *testing.T) {
	t.Parallel()
	t.Run("in process", func(t *testing.T) {
		t.Parallel()
		a := apptest.Start(t, nil)
		b, kill := a.AnotherKillable(t)
		checkSale(t, &a.Service, &b.Service, kill)
	})
	t.Run("binary", func(t *testing.T) {
		t.Parallel()
		a := apptest.Exec(t, nil)
		b := a.Another(t)
		checkSale(t, &a.Service, &b.Service, b.Kill)
		if err := a.Stop(t); err != nil {
			t.Errorf("Stop() = %v; want nil (exit 0 after SIGTERM)", err)
		}
		if err := b.Wait(time.Second); err == nil {
			t.Errorf("Wait() of a killed process = nil; want its exit by SIGKILL")
		}
	})
}

// checkSale plays the sale through a and b, instances of one sale; kill
// kills b.
func checkSale(t *testing.T, a, b *apptest.Service, kill func()) {
	ctx := t.Context()
	id := a.Create(t, "harness", 2)
	if p := b.Product(t, id); p.ID != id || p.Name != "harness" || p.Stock != 2 || p.InitialStock != 2 {
		t.Fatalf("Product(%d) on the other instance = %+v; want harness, 2 of 2", id, p)
	}

	answers := make(chan apptest.Answer, 1)
	go func() {
		answers <- a.Buy(context.Background(), id, client.Purchase{UserID: "u-1", Quantity: 1, RequestID: "r-1"},
			client.Override{Strategy: "redlock", Hold: time.Second})
	}()
	testenv.Eventually(t, 20*time.Second, "the purchase to hold its lock on 2 of 3 nodes", func() bool {
		return a.LockHolders(t, "redlock", id) >= 2
	})
	first := <-answers
	if first.Status != http.StatusCreated || first.Outcome() != "ok" || first.Order.RemainingStock != 1 || first.Order.Strategy != "redlock" {
		t.Fatalf("Buy = %d %q %+v, %v; want 201, an order under redlock leaving 1", first.Status, first.Outcome(), first.Order, first.Err)
	}
	if first.Purchase.RequestID != "r-1" || first.Took <= 0 || first.At.IsZero() {
		t.Errorf("Buy = %+v; want the purchase sent, when it came and how long it took", first)
	}
	// The buyers of a hold are answered before its lock is released (so
	// that none waits for the release): it goes moments after.
	testenv.Eventually(t, 10*time.Second, "the lock released after the purchase", func() bool {
		return a.LockHolders(t, "redlock", id) == 0
	})
	replay := b.Buy(ctx, id, client.Purchase{UserID: "u-1", Quantity: 1, RequestID: "r-1"}, client.Override{})
	if replay.Status != http.StatusOK || replay.Outcome() != "ok" || replay.Order.OrderID != first.Order.OrderID {
		t.Errorf("replay on the other instance = %d %+v, %v; want 200 with order %d", replay.Status, replay.Order, replay.Err, first.Order.OrderID)
	}
	for _, tc := range []struct {
		user, want string
	}{{"u-1", "limit_exceeded"}, {"u-2", "ok"}, {"u-3", "sold_out"}} {
		got := b.Buy(ctx, id, client.Purchase{UserID: tc.user, Quantity: 1}, client.Override{})
		if got.Outcome() != tc.want || (tc.want != "ok" && (got.Status != http.StatusConflict || got.Code != tc.want || got.Err == nil)) {
			t.Errorf("purchase by %s = %d %q (%v); want %s", tc.user, got.Status, got.Code, got.Err, tc.want)
		}
	}
	r := a.PostPurchase(t, id, "strategy=bogus", `{"user_id":"u-4","quantity":1}`)
	apptest.WantError(t, "purchase with strategy=bogus", r, http.StatusBadRequest, "invalid_argument")
	r = a.Do(t, http.MethodGet, "/api/v1/products/"+"987654", "", nil)
	apptest.WantError(t, "an unknown product", r, http.StatusNotFound, "product_not_found")

	if au := b.WantConsistent(t, id); au.Orders != 2 || au.UnitsSold != 2 || au.Stock != 0 {
		t.Errorf("audit = %+v; want 2 orders, stock 0", au)
	}
	if ok := a.Metrics(t).Sum("seckill_purchases_total", "strategy", "redlock", "outcome", "ok"); ok != 1 {
		t.Errorf("seckill_purchases_total{strategy=redlock,outcome=ok} on the first instance = %g; want 1", ok)
	}

	kill()
	if got := b.Buy(ctx, id, client.Purchase{UserID: "u-5", Quantity: 1}, client.Override{}); got.Outcome() != apptest.NoAnswer || got.Err == nil {
		t.Errorf("purchase from a killed instance = %d %q, %v; want no answer", got.Status, got.Outcome(), got.Err)
	}
}
