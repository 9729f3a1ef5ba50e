package controller_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/testkit/apptest"
)

// buy makes one purchase of a unit of product id for user and returns its
// order, which must be a 201.
func buy(t *testing.T, in *apptest.Instance, id int64, user string) order {
	t.Helper()
	r := in.PostPurchase(t, id, "", fmt.Sprintf(`{"user_id":%q,"quantity":1}`, user))
	if r.Status != http.StatusCreated {
		t.Fatalf("purchase of product %d for %s = %v; want 201", id, user, r)
	}
	var o order
	apptest.Decode(t, r, &o)
	return o
}

// act posts a buyer's action (pay or cancel) on order id with body.
func act(t *testing.T, in *apptest.Instance, id int64, action, body string) apptest.Response {
	t.Helper()
	return in.Do(t, http.MethodPost, fmt.Sprintf("/api/v1/orders/%d/%s", id, action), body, nil)
}

// wantOrder checks that r is a 200 with the order id in status.
func wantOrder(t *testing.T, what string, r apptest.Response, id int64, status string) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Errorf("%s = %v; want 200", what, r)
		return
	}
	keys := closedOrderKeys
	if status == "unpaid" {
		keys = orderKeys
	}
	wantKeys(t, what, r.Body, keys)
	var o order
	apptest.Decode(t, r, &o)
	if o.OrderID != id || o.Status != status {
		t.Errorf("%s = %s; want order %d %s", what, r.Body, id, status)
	}
}

// TestOrderLife: an order is written unpaid, with its expiry; its buyer
// pays it (again: 200) or cancels it (again: 200, nothing more back), and
// nobody else can (404); a paid order is not cancelled (order_paid), a
// cancelled one not paid (order_closed); a cancel puts the units back on
// sale, frees the per-user limit and shows in the audit, the order list
// and the metrics; malformed ids and bodies answer 400.
func TestOrderLife(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "1"})
	id := in.Create(t, "kettle", 2)
	before := time.Now()
	paid, cancelled := buy(t, in, id, "payer"), buy(t, in, id, "canceller")
	if paid.Status != "unpaid" || paid.ExpiresAt == nil || paid.ExpiresAt.Before(before.Add(14*time.Minute)) || paid.ExpiresAt.After(time.Now().Add(16*time.Minute)) {
		t.Errorf("order = %+v; want unpaid, expiring 15 minutes after its purchase", paid)
	}
	apptest.WantError(t, "a third purchase", in.PostPurchase(t, id, "", `{"user_id":"late","quantity":1}`), http.StatusConflict, "sold_out")

	apptest.WantError(t, "pay as someone else", act(t, in, paid.OrderID, "pay", `{"user_id":"canceller"}`), http.StatusNotFound, "order_not_found")
	apptest.WantError(t, "cancel as someone else", act(t, in, paid.OrderID, "cancel", `{"user_id":"Payer"}`), http.StatusNotFound, "order_not_found")
	apptest.WantError(t, "pay an order that is not there", act(t, in, 999999, "pay", `{"user_id":"payer"}`), http.StatusNotFound, "order_not_found")
	wantOrder(t, "pay", act(t, in, paid.OrderID, "pay", `{"user_id":"payer"}`), paid.OrderID, "paid")
	wantOrder(t, "pay again", act(t, in, paid.OrderID, "pay", `{"user_id":"payer"}`), paid.OrderID, "paid")
	apptest.WantError(t, "cancel a paid order", act(t, in, paid.OrderID, "cancel", `{"user_id":"payer"}`), http.StatusConflict, "order_paid")

	wantOrder(t, "cancel", act(t, in, cancelled.OrderID, "cancel", `{"user_id":"canceller"}`), cancelled.OrderID, "cancelled")
	if p := in.Product(t, id); p.Stock != 1 {
		t.Errorf("stock after a cancel = %d; want 1", p.Stock)
	}
	wantOrder(t, "cancel again", act(t, in, cancelled.OrderID, "cancel", `{"user_id":"canceller"}`), cancelled.OrderID, "cancelled")
	if p := in.Product(t, id); p.Stock != 1 {
		t.Errorf("stock after a second cancel = %d; want 1: nothing more comes back", p.Stock)
	}
	apptest.WantError(t, "pay a cancelled order", act(t, in, cancelled.OrderID, "pay", `{"user_id":"canceller"}`), http.StatusConflict, "order_closed")
	want := api.Audit{ProductID: id, InitialStock: 2, Stock: 1, Orders: 2, UnitsSold: 1, UnitsReturned: 1, Consistent: true}
	if a := in.Audit(t, id); a != want {
		t.Errorf("audit after a cancel = %+v; want %+v", a, want)
	}

	// The cancel freed the canceller's limit and the unit: they buy again.
	again := buy(t, in, id, "canceller")
	if again.RemainingStock != 0 {
		t.Errorf("the unit bought again left %d; want 0", again.RemainingStock)
	}
	apptest.WantError(t, "a buyer past the limit again", in.PostPurchase(t, id, "", `{"user_id":"canceller","quantity":1}`), http.StatusConflict, "sold_out")

	r := in.Admin(t, http.MethodGet, fmt.Sprintf("/api/v1/products/%d/orders?status=cancelled", id), "")
	var page api.Orders
	apptest.Decode(t, r, &page)
	if len(page.Orders) != 1 || page.Orders[0].OrderID != cancelled.OrderID || page.Orders[0].ExpiresAt != nil {
		t.Errorf("the cancelled orders = %s; want order %d alone, without expires_at", r.Body, cancelled.OrderID)
	}
	m := in.Metrics(t)
	if got := m.Sum("seckill_order_returns_total", "reason", "cancel"); got != 1 {
		t.Errorf("seckill_order_returns_total{reason=cancel} = %v; want 1", got)
	}
	if body := in.Get(t, "/metrics").Body; !strings.Contains(string(body), `seckill_order_returns_total{reason="expiry"} 0`) {
		t.Errorf("seckill_order_returns_total{reason=\"expiry\"} is not there at 0 from the start")
	}

	for _, tc := range []struct{ path, body string }{
		{"/api/v1/orders/0/pay", `{"user_id":"payer"}`},
		{"/api/v1/orders/x/cancel", `{"user_id":"payer"}`},
		{"/api/v1/orders/-3/cancel", `{"user_id":"payer"}`},
		{fmt.Sprintf("/api/v1/orders/%d/pay", paid.OrderID), ``},
		{fmt.Sprintf("/api/v1/orders/%d/pay", paid.OrderID), `{}`},
		{fmt.Sprintf("/api/v1/orders/%d/pay", paid.OrderID), `{"user_id":""}`},
		{fmt.Sprintf("/api/v1/orders/%d/pay", paid.OrderID), `{"user_id":7}`},
		{fmt.Sprintf("/api/v1/orders/%d/cancel", paid.OrderID), `[{"user_id":"payer"}]`},
		{fmt.Sprintf("/api/v1/orders/%d/cancel", paid.OrderID), `{"user_id":"payer","user_id":"x"}`},
		{fmt.Sprintf("/api/v1/orders/%d/cancel", paid.OrderID), `{"user_id":"` + strings.Repeat("u", 65) + `"}`},
		{fmt.Sprintf("/api/v1/orders/%d/cancel", paid.OrderID), "{\"user_id\":\"a\x01b\"}"},
		{fmt.Sprintf("/api/v1/orders/%d/cancel", paid.OrderID), `{"user_id":"payer"} {}`},
	} {
		apptest.WantError(t, "POST "+tc.path+" "+tc.body, in.Do(t, http.MethodPost, tc.path, tc.body, nil), http.StatusBadRequest, "invalid_argument")
	}
	wantOrder(t, "the paid order after the malformed calls", in.Get(t, fmt.Sprintf("/api/v1/orders/%d?user_id=payer", paid.OrderID)), paid.OrderID, "paid")
}

// TestOrderExpiry: an unpaid order expires once SECKILL_PAYMENT_TIMEOUT has
// passed, its units back on sale (a product sold out sells again, on an
// instance that had seen it sold out too) and counted as an expiry; paying
// it then answers order_closed, cancelling it order_closed.
func TestOrderExpiry(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, map[string]string{"SECKILL_PAYMENT_TIMEOUT": "500ms"})
	b := a.Another(t)
	id := a.Create(t, "torch", 1)
	o := buy(t, a, id, "sleeper")
	apptest.WantError(t, "a purchase on the other instance", b.PostPurchase(t, id, "", `{"user_id":"other","quantity":1}`), http.StatusConflict, "sold_out")
	var got order
	for deadline := time.Now().Add(10 * time.Second); ; {
		r := a.Get(t, fmt.Sprintf("/api/v1/orders/%d?user_id=sleeper", o.OrderID))
		got = order{}
		apptest.Decode(t, r, &got)
		if got.Status != "unpaid" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got.Status != "expired" || got.ExpiresAt != nil {
		t.Fatalf("order after its payment timeout = %+v; want expired, without expires_at", got)
	}
	apptest.WantError(t, "pay an expired order", act(t, a, o.OrderID, "pay", `{"user_id":"sleeper"}`), http.StatusConflict, "order_closed")
	apptest.WantError(t, "cancel an expired order", act(t, a, o.OrderID, "cancel", `{"user_id":"sleeper"}`), http.StatusConflict, "order_closed")
	// The instance that had seen it sold out sells the unit again.
	var r apptest.Response
	for deadline := time.Now().Add(5 * time.Second); ; {
		r = b.PostPurchase(t, id, "", `{"user_id":"other","quantity":1}`)
		if r.Status == http.StatusCreated || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.Status != http.StatusCreated {
		t.Errorf("a purchase of the expired order's unit on the other instance = %v; want 201", r)
	}
	a.WantConsistent(t, id)
	expiries := a.Metrics(t).Sum("seckill_order_returns_total", "reason", "expiry") +
		b.Metrics(t).Sum("seckill_order_returns_total", "reason", "expiry")
	// The unit's second order is unpaid too: on a slow machine it may
	// have expired by now, and then counts as well (read after the
	// metrics, so that it expired no later than they were read).
	var again order
	apptest.Decode(t, r, &again)
	var second order
	apptest.Decode(t, a.Admin(t, http.MethodGet, fmt.Sprintf("/api/v1/orders/%d", again.OrderID), ""), &second)
	most := 1.0
	if second.Status == "expired" {
		most = 2
	}
	if expiries < 1 || expiries > most {
		t.Errorf("seckill_order_returns_total{reason=expiry} on both instances = %v; want 1 (2 with the second order %s)",
			expiries, second.Status)
	}
}

// TestNoPaymentTimeout: with SECKILL_PAYMENT_TIMEOUT=0 orders are written
// paid, without an expiry, and are not cancelled.
func TestNoPaymentTimeout(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PAYMENT_TIMEOUT": "0"})
	id := in.Create(t, "mat", 3)
	o := buy(t, in, id, "u-1")
	if o.Status != "paid" || o.ExpiresAt != nil {
		t.Errorf("order = %+v; want paid, no expires_at", o)
	}
	apptest.WantError(t, "cancel", act(t, in, o.OrderID, "cancel", `{"user_id":"u-1"}`), http.StatusConflict, "order_paid")
	wantOrder(t, "pay", act(t, in, o.OrderID, "pay", `{"user_id":"u-1"}`), o.OrderID, "paid")
}
