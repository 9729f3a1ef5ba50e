package client_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testkit/apptest"
)

func TestClient(t *testing.T) {
	in := apptest.Start(t, nil)
	ctx := t.Context()
	c := &client.Client{BaseURL: in.URL, AdminToken: in.AdminToken}
	if err := c.Healthz(ctx); err != nil {
		t.Fatalf("Healthz = %v", err)
	}
	st, err := c.Strategies(ctx)
	if err != nil || len(st) == 0 {
		t.Fatalf("Strategies = %v, %v; want the server's list", st, err)
	}
	p, err := c.CreateProduct(ctx, "phone", 2)
	if err != nil || p.ID <= 0 || p.Stock != 2 || p.InitialStock != 2 {
		t.Fatalf("CreateProduct = %+v, %v", p, err)
	}
	if all, err := c.Products(ctx); err != nil || len(all) != 1 || all[0] != p {
		t.Errorf("Products = %+v, %v; want [%+v]", all, err, p)
	}
	yes := true
	o, err := c.Buy(ctx, p.ID, client.Purchase{UserID: "u-1", Quantity: 1, RequestID: "r-1"},
		client.Override{Strategy: "token", Hold: time.Millisecond, Fencing: &yes})
	if err != nil || o.ProductID != p.ID || o.Strategy != "token" || o.RemainingStock != 1 {
		t.Fatalf("Buy = %+v, %v; want an order under token leaving 1", o, err)
	}
	if st, err := c.PurchaseState(ctx, "r-1"); err != nil || st.State != "ordered" || st.Order == nil || st.Order.OrderID != o.OrderID {
		t.Errorf("PurchaseState(r-1) = %+v, %v; want ordered, order %d", st, err, o.OrderID)
	}
	_, err = c.Buy(ctx, p.ID, client.Purchase{UserID: "u-1", Quantity: 1}, client.Override{})
	var e *client.Error
	if _, err := c.PurchaseState(ctx, "r/unknown"); !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Code != "purchase_not_found" {
		t.Errorf("PurchaseState(r/unknown) = %v; want 404 purchase_not_found", err)
	}
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != "limit_exceeded" {
		t.Errorf("a second unit for u-1: %v; want 409 limit_exceeded", err)
	}
	m, err := c.Metrics(ctx)
	if err != nil {
		t.Fatalf("Metrics = %v", err)
	}
	if got := m.Sum("seckill_purchases_total", "strategy", "token", "outcome", "ok"); got != 1 {
		t.Errorf("Metrics: purchases under token, ok = %g; want 1", got)
	}
	if got := m.Sum("seckill_purchases_total", "outcome", "limit_exceeded"); got != 1 {
		t.Errorf("Metrics: purchases answered limit_exceeded = %g; want 1", got)
	}
	if got := m.Sum("seckill_lock_wait_seconds", "strategy", "token", "result", "acquired"); got != 1 {
		t.Errorf("Metrics: token lock waits acquired = %g; want 1 (a histogram's count)", got)
	}
	if got := m.Sum("no_such_metric"); got != 0 {
		t.Errorf("Metrics: an absent family sums to %g; want 0", got)
	}
	a, err := c.Audit(ctx, p.ID)
	if err != nil || a.Orders != 1 || a.Stock != 1 || !a.Held() {
		t.Errorf("Audit = %+v, %v; want 1 order, 1 left, held", a, err)
	}
	if p, err = c.SetStock(ctx, p.ID, 5); err != nil || p.Stock != 5 {
		t.Errorf("SetStock = %+v, %v", p, err)
	}
	if _, err := c.Product(ctx, 987654); !errors.As(err, &e) || e.Status != http.StatusNotFound || e.Code != "product_not_found" {
		t.Errorf("Product(987654) = %v; want 404 product_not_found", err)
	}
	anon := &client.Client{BaseURL: in.URL}
	if _, err := anon.CreateProduct(ctx, "x", 1); !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		t.Errorf("CreateProduct without a token = %v; want 401", err)
	}
}

func TestOverrideQuery(t *testing.T) {
	no := false
	for _, tc := range []struct {
		o    client.Override
		want string
	}{
		{client.Override{}, ""},
		{client.Override{Strategy: "redlock"}, "strategy=redlock"},
		{client.Override{Hold: 3 * time.Millisecond, Pause: time.Second, Batch: 1, Fencing: &no},
			"batch=1&fencing=false&hold_ms=3&pause_ms=1000"},
	} {
		if got := tc.o.Query(); got != tc.want {
			t.Errorf("%+v.Query() = %q; want %q", tc.o, got, tc.want)
		}
	}
}
