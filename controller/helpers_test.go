package controller_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/seckill/seckill/api"
)

// The contract's shapes.
type (
	product = api.Product
	order   = api.Order
	audit   = api.Audit
)

// The fields of the contract's shapes, sorted.
var (
	productKeys = []string{"id", "initial_stock", "name", "stock"}
	// orderKeys are an unpaid order's (SECKILL_PAYMENT_TIMEOUT's default
	// has orders wait for their payment); closedOrderKeys any other's.
	orderKeys       = []string{"expires_at", "order_id", "product_id", "quantity", "remaining_stock", "request_id", "status", "strategy", "user_id"}
	closedOrderKeys = []string{"order_id", "product_id", "quantity", "remaining_stock", "request_id", "status", "strategy", "user_id"}
	auditKeys       = []string{"consistent", "initial_stock", "orders", "oversold_units", "product_id", "stock", "units_returned", "units_sold"}
)

// keysOf returns the sorted keys of the JSON object in b.
func keysOf(t testing.TB, b []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s as an object: %v", b, err)
	}
	return slices.Sorted(maps.Keys(m))
}

// wantKeys fails unless the JSON object in b has exactly keys.
func wantKeys(t testing.TB, what string, b []byte, keys []string) {
	t.Helper()
	if got := keysOf(t, b); !slices.Equal(got, keys) {
		t.Errorf("%s has fields %q; want exactly %q", what, got, keys)
	}
}
