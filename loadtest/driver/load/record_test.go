package load

import (
	"fmt"
	"testing"
)

// TestOrderFigures: the two figures the history keeps of an order, from
// the service's body as it is, from one written otherwise (spaces, other
// key order), and none from a body that lacks one or a key inside a value.
func TestOrderFigures(t *testing.T) {
	for _, tc := range []struct {
		body        string
		order, left int64
		ok          bool
	}{
		{`{"order_id":7,"product_id":1,"user_id":"u","quantity":1,"request_id":"r","strategy":"redlock","remaining_stock":96}`, 7, 96, true},
		{`{"remaining_stock":-2,"order_id":12}`, 12, -2, true},
		{`{ "order_id" : 7, "remaining_stock" : 0 }`, 7, 0, true},
		{`{"user_id":"x,\"order_id\":5,","order_id":8,"remaining_stock":3}`, 8, 3, true},
		{`{"order_id":7,"quantity":1}`, 0, 0, false},
		{`{"order_id":7,"remaining_stock":"3"}`, 0, 0, false},
		{`not json`, 0, 0, false},
		{``, 0, 0, false},
	} {
		order, left, ok := orderFigures([]byte(tc.body))
		if got, want := fmt.Sprint(order, left, ok), fmt.Sprint(tc.order, tc.left, tc.ok); got != want {
			t.Errorf("orderFigures(%s) = %s; want %s", tc.body, got, want)
		}
	}
}

// TestReservationFigures: what the history keeps of a reservation (a 202
// under reserve): what it left, from the service's body as it is or one
// written otherwise, and nothing from a body without it.
func TestReservationFigures(t *testing.T) {
	for _, tc := range []struct {
		body string
		left int64
		ok   bool
	}{
		{`{"request_id":"r-7","product_id":1,"user_id":"u-42","quantity":1,"strategy":"reserve","status":"pending","remaining_stock":96}`, 96, true},
		{`{ "remaining_stock" : 0, "status": "pending" }`, 0, true},
		{`{"user_id":"x,\"remaining_stock\":5,","remaining_stock":3}`, 3, true},
		{`{"request_id":"r-7","status":"pending"}`, 0, false},
		{`{"remaining_stock":"3"}`, 0, false},
		{`not json`, 0, false},
	} {
		left, ok := reservationFigures([]byte(tc.body))
		if left != tc.left || ok != tc.ok {
			t.Errorf("reservationFigures(%s) = %d, %t; want %d, %t", tc.body, left, ok, tc.left, tc.ok)
		}
	}
}
