package controller_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/apptest"
)

// TestPurchaseState: GET /api/v1/purchases/{request_id} answers, under any
// strategy, what became of a purchase attempt: "ordered" with the very
// order its purchase answered, a request ID holding a "/" included; 404 purchase_not_found for an attempt that was refused or
// never made; 400 for a request ID the contract does not allow.
func TestPurchaseState(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "lamp", 1)

	bought := in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1,"request_id":"state-1"}`)
	if bought.Status != http.StatusCreated {
		t.Fatalf("purchase = %v; want 201", bought)
	}
	var made order
	apptest.Decode(t, bought, &made)
	refused := in.PostPurchase(t, id, "", `{"user_id":"u-2","quantity":1,"request_id":"state-2"}`)
	apptest.WantError(t, "purchase when sold out", refused, http.StatusConflict, "sold_out")

	r := in.Get(t, "/api/v1/purchases/state-1")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /api/v1/purchases/state-1 = %v; want 200", r)
	}
	wantKeys(t, "a purchase's state", r.Body, []string{"order", "request_id", "state"})
	var raw struct {
		Order json.RawMessage `json:"order"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	wantKeys(t, "a purchase's order", raw.Order, orderKeys)
	var got api.PurchaseState
	apptest.Decode(t, r, &got)
	if got.RequestID != "state-1" || got.State != api.StateOrdered || got.Order == nil || !reflect.DeepEqual(*got.Order, made) {
		t.Errorf("state of state-1 = %+v (order %+v); want ordered, the order %+v", got, got.Order, made)
	}

	slash := in.Create(t, "shelf", 1)
	if r := in.PostPurchase(t, slash, "", `{"user_id":"u-3","quantity":1,"request_id":"shop/7"}`); r.Status != http.StatusCreated {
		t.Fatalf("purchase with request ID shop/7 = %v; want 201", r)
	}
	var withSlash api.PurchaseState
	apptest.Decode(t, in.Get(t, "/api/v1/purchases/shop%2F7"), &withSlash)
	if withSlash.RequestID != "shop/7" || withSlash.Order == nil || withSlash.Order.ProductID != slash {
		t.Errorf("state of shop/7 = %+v; want its order of product %d", withSlash, slash)
	}

	apptest.WantError(t, "the state of a refused purchase", in.Get(t, "/api/v1/purchases/state-2"), http.StatusNotFound, "purchase_not_found")
	apptest.WantError(t, "the state of a purchase never made", in.Get(t, "/api/v1/purchases/never"), http.StatusNotFound, "purchase_not_found")
	apptest.WantError(t, "a request ID with a control character", in.Get(t, "/api/v1/purchases/a%01b"), http.StatusBadRequest, "invalid_argument")
}

// TestPurchaseStateOfServerRequestID: a purchase sent without a request ID
// can be found by the one the server made, which its order carries.
func TestPurchaseStateOfServerRequestID(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "desk", 2)
	r := in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1}`)
	var made order
	apptest.Decode(t, r, &made)
	if made.RequestID == nil {
		t.Fatalf("order %+v carries no request ID", made)
	}
	var got api.PurchaseState
	apptest.Decode(t, in.Get(t, "/api/v1/purchases/"+*made.RequestID), &got)
	if got.Order == nil || got.Order.OrderID != made.OrderID {
		t.Errorf("state of %s = %+v; want order %d", *made.RequestID, got, made.OrderID)
	}
}
