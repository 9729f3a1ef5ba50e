package controller_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/testkit/apptest"
)

// TestOrders: GET /api/v1/orders/{id} answers an order to its buyer and to
// the admin, and 404 order_not_found to anyone else, as for an order that
// is not there; GET /api/v1/products/{id}/orders pages a product's orders,
// oldest first, for the admin only, filtered by status; malformed ids and
// parameters answer 400.
func TestOrders(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "lamp", 5)
	var made []order
	for i := range 3 {
		r := in.PostPurchase(t, id, "", fmt.Sprintf(`{"user_id":"u-%d","quantity":1}`, i))
		if r.Status != http.StatusCreated {
			t.Fatalf("purchase = %v; want 201", r)
		}
		var o order
		apptest.Decode(t, r, &o)
		if o.Status != "unpaid" || o.ExpiresAt == nil || o.ExpiresAt.Location() != time.UTC {
			t.Errorf("order = %s; want unpaid, with expires_at in UTC", r.Body)
		}
		made = append(made, o)
	}
	first := fmt.Sprintf("/api/v1/orders/%d", made[0].OrderID)
	r := in.Get(t, first+"?user_id=u-0")
	var got order
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s?user_id=u-0 = %v; want 200", first, r)
	}
	apptest.Decode(t, r, &got)
	wantKeys(t, "an order", r.Body, orderKeys)
	if got.OrderID != made[0].OrderID || got.UserID != "u-0" {
		t.Errorf("GET %s as its buyer = %+v; want %+v", first, got, made[0])
	}
	if r := in.Admin(t, http.MethodGet, first, ""); r.Status != http.StatusOK {
		t.Errorf("GET %s as the admin = %v; want 200", first, r)
	}
	for _, path := range []string{first + "?user_id=u-1", first, "/api/v1/orders/999999?user_id=u-0"} {
		apptest.WantError(t, "GET "+path, in.Get(t, path), http.StatusNotFound, "order_not_found")
	}
	for _, path := range []string{"/api/v1/orders/0", "/api/v1/orders/x", first + "?user_id=u-0&user_id=u-0"} {
		apptest.WantError(t, "GET "+path, in.Get(t, path), http.StatusBadRequest, "invalid_argument")
	}

	list := fmt.Sprintf("/api/v1/products/%d/orders", id)
	apptest.WantError(t, "GET "+list+" without the token", in.Get(t, list), http.StatusUnauthorized, "unauthorized")
	var page api.Orders
	r = in.Admin(t, http.MethodGet, list+"?limit=2", "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s?limit=2 = %v; want 200", list, r)
	}
	apptest.Decode(t, r, &page)
	if len(page.Orders) != 2 || page.Orders[0].OrderID != made[0].OrderID || page.Orders[1].OrderID != made[1].OrderID || page.Next == "" {
		t.Fatalf("the first page of 2 = %s; want the first two orders and a next", r.Body)
	}
	r = in.Admin(t, http.MethodGet, list+"?limit=2&status=unpaid&after="+page.Next, "")
	page = api.Orders{}
	apptest.Decode(t, r, &page)
	if len(page.Orders) != 1 || page.Orders[0].OrderID != made[2].OrderID || page.Next != "" {
		t.Errorf("the second page = %s; want the third order and no next", r.Body)
	}
	r = in.Admin(t, http.MethodGet, list+"?status=cancelled", "")
	page = api.Orders{}
	apptest.Decode(t, r, &page)
	if len(page.Orders) != 0 || page.Orders == nil {
		t.Errorf("the cancelled orders = %s; want an empty list", r.Body)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?status=lost", "?after=x", "?color=red", "?limit=1&limit=2"} {
		apptest.WantError(t, "GET "+list+q, in.Admin(t, http.MethodGet, list+q, ""), http.StatusBadRequest, "invalid_argument")
	}
	apptest.WantError(t, "GET the orders of a product that is not there",
		in.Admin(t, http.MethodGet, "/api/v1/products/999999/orders", ""), http.StatusNotFound, "product_not_found")
}
