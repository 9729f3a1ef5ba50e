package api_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
)

// TestShapes marshals each shape and compares it with the contract's
// example of it, as JSON values and key by key in order ("..." in the
// contract filled in with a value).
func TestShapes(t *testing.T) {
	rid := "r-7"
	expires := time.Date(2026, 11, 27, 10, 15, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"product", api.Product{ID: 1, Name: "phone", Stock: 97, InitialStock: 100},
			`{"id": 1, "name": "phone", "stock": 97, "initial_stock": 100}`},
		{"order", api.Order{OrderID: 7, ProductID: 1, UserID: "u-42", Quantity: 1, RequestID: &rid, Strategy: "redlock", RemainingStock: 96,
			Status: "unpaid", ExpiresAt: &expires},
			`{"order_id": 7, "product_id": 1, "user_id": "u-42", "quantity": 1, "request_id": "r-7", "strategy": "redlock", "remaining_stock": 96, "status": "unpaid", "expires_at": "2026-11-27T10:15:00Z"}`},
		{"order without request_id", api.Order{OrderID: 7, ProductID: 1, UserID: "u-42", Quantity: 1, Strategy: "redlock", RemainingStock: 96, Status: "paid"},
			`{"order_id": 7, "product_id": 1, "user_id": "u-42", "quantity": 1, "request_id": null, "strategy": "redlock", "remaining_stock": 96, "status": "paid"}`},
		{"reservation", api.Reservation{RequestID: "r-7", ProductID: 1, UserID: "u-42", Quantity: 1, Strategy: "reserve", Status: "pending", RemainingStock: 96},
			`{"request_id": "r-7", "product_id": 1, "user_id": "u-42", "quantity": 1, "strategy": "reserve", "status": "pending", "remaining_stock": 96}`},
		{"audit", api.Audit{ProductID: 1, InitialStock: 100, Stock: 0, Orders: 100, UnitsSold: 100, OversoldUnits: 0, Consistent: true},
			`{"product_id": 1, "initial_stock": 100, "stock": 0, "orders": 100, "units_sold": 100, "units_returned": 0, "oversold_units": 0, "consistent": true}`},
		{"strategy", api.Strategy{Name: "redlock", Description: "Redlock", Safe: true},
			`{"name": "redlock", "description": "Redlock", "safe": true}`},
		{"purchase", api.Purchase{UserID: "u-42", Quantity: 1, RequestID: "r-7"},
			`{"user_id": "u-42", "quantity": 1, "request_id": "r-7"}`},
		{"purchase without request_id", api.Purchase{UserID: "u-42", Quantity: 1},
			`{"user_id": "u-42", "quantity": 1}`},
		{"new product", api.NewProduct{Name: "phone", Stock: 100}, `{"name": "phone", "stock": 100}`},
		{"set stock", api.SetStock{Stock: 100}, `{"stock": 100}`},
		{"health", api.Health{Status: "ok"}, `{"status": "ok"}`},
		{"ready", api.Ready{Status: "ready"}, `{"status": "ready"}`},
		{"not ready", api.Ready{Down: "redis", Error: &api.Error{Code: "unavailable", Message: "redis is down"}, Status: "unavailable"},
			`{"down": "redis", "error": {"code": "unavailable", "message": "redis is down"}, "status": "unavailable"}`},
		{"error", api.ErrorBody{Error: api.Error{Code: "sold_out", Message: "product 1 is sold out"}},
			`{"error": {"code": "sold_out", "message": "product 1 is sold out"}}`},
	} {
		got, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatalf("%s: marshal: %v", tc.name, err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: unmarshal %s: %v", tc.name, got, err)
		}
		if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
			t.Fatalf("%s: unmarshal the contract's %s: %v", tc.name, tc.want, err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: marshals as %s; the contract says %s", tc.name, got, tc.want)
		}
		if gk, wk := keys(t, got), keys(t, []byte(tc.want)); !reflect.DeepEqual(gk, wk) {
			t.Errorf("%s: keys in order %q; the contract's order is %q", tc.name, gk, wk)
		}
		// And back: the shape reads the contract's example as itself.
		back := reflect.New(reflect.TypeOf(tc.v))
		if err := json.Unmarshal([]byte(tc.want), back.Interface()); err != nil {
			t.Fatalf("%s: decode the contract's %s: %v", tc.name, tc.want, err)
		}
		if !reflect.DeepEqual(back.Elem().Interface(), tc.v) {
			t.Errorf("%s: decodes the contract's %s as %+v; want %+v", tc.name, tc.want, back.Elem().Interface(), tc.v)
		}
	}
}

// keys returns every object key of the JSON in b, in document order.
func keys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	var out []string
	// One entry per open container: whether it is an object whose next
	// token is a key.
	var wantKey []bool
	valueDone := func() { // a value ended: its object's next token is a key
		if n := len(wantKey); n > 0 && !wantKey[n-1] {
			wantKey[n-1] = true
		}
	}
	var objects []bool // per open container: is it an object
	for {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		n := len(wantKey)
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if n > 0 && objects[n-1] {
				wantKey[n-1] = false // this container is the value
			}
			objects = append(objects, tok == json.Delim('{'))
			wantKey = append(wantKey, tok == json.Delim('{'))
			continue
		case json.Delim('}'), json.Delim(']'):
			wantKey, objects = wantKey[:n-1], objects[:n-1]
			if n-1 > 0 && objects[n-2] {
				valueDone()
			}
			continue
		}
		switch {
		case n > 0 && objects[n-1] && wantKey[n-1]:
			out = append(out, tok.(string))
			wantKey[n-1] = false
		case n > 0 && objects[n-1]:
			valueDone()
		}
	}
}
