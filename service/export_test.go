package service

import (
	"context"

	"github.com/seckill/seckill/model"
)

// Test hooks: what the tests of package service_test may see inside.

// Waiting returns how many purchases of product wait in this instance's
// lines (not yet taken into a hold).
func (s *Seckill) Waiting(product int64) int {
	return s.lines.Waiting(func(key lineKey) bool { return key.product == product })
}

// BuyOneTrip is the two-round-trip transaction of one purchase with the
// fence claim folded in (a lock holder's): ok says it committed, !ok with a
// nil error that it rolled back and wrote nothing.
func (s *Seckill) BuyOneTrip(ctx context.Context, p Purchase) (model.Order, bool, error) {
	return s.buyOneTrip(ctx, p, fenceWrite{claim: true})
}

// Hooks are the points where a test forces an interleaving (see hooks).
type Hooks struct {
	// OrdersRead runs in loadOrders between its read and keeping it.
	OrdersRead func(product int64)
	// ResetHeard runs after a reset announcement was applied or ignored.
	ResetHeard func(product, gen int64)
	// Committed runs after a write committed, before the memory hears of it.
	Committed func(product int64)
	// TripGroup runs when a sender has gathered a group of one-trip
	// purchases (its size), before it sends them.
	TripGroup func(size int)
	// BatchTrips runs when a batch was answered by its three-trip
	// transaction (committed, or nothing to write).
	BatchTrips func(product int64)
}

// WithHooks returns c with h installed.
func (c Config) WithHooks(h Hooks) Config {
	c.hooks = hooks{ordersRead: h.OrdersRead, resetHeard: h.ResetHeard, committed: h.Committed, tripGroup: h.TripGroup, batchTrips: h.BatchTrips}
	return c
}

// ResetMessage is the announcement of a reset of product to stock in
// generation gen.
func ResetMessage(product, stock, gen int64) string { return resetMessage(product, stock, gen) }

// TripsWaiting is how many one-trip purchases wait for a sender to take
// them.
func (s *Seckill) TripsWaiting() int { return int(s.tripsWaiting.Load()) }

// TripSenders is how many groups of one-trip purchases are sent at once.
const TripSenders = tripSenders
