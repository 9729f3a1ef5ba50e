package service

import (
	"context"
	"errors"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/reservewriter"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

// Test hooks: what the tests of package service_test may see inside.

// Waiting returns how many purchases of product wait in this instance's
// lines (not yet taken into a hold).
func (s *Seckill) Waiting(product int64) int {
	return s.lines.Waiting(func(key lineKey) bool { return key.product == product })
}

// BuyOneTrip is the sale store's cheapest form of one purchase with the
// fence claim folded in (a lock holder's), the MySQL form's two round
// trips: ok says it committed, !ok with a nil error that it wrote nothing
// (always, in the portable form).
func (s *Seckill) BuyOneTrip(ctx context.Context, p Purchase) (model.Order, bool, error) {
	return s.sales.Buy(ctx, p, true)
}

// SaleForm names the form of the sale store New chose: "mysql" or
// "portable".
func (s *Seckill) SaleForm() string {
	return s.sales.Form()
}

// Hooks are the points where a test forces an interleaving (see hooks).
type Hooks struct {
	// OrdersRead runs in loadOrders between its read and keeping it.
	OrdersRead func(product int64)
	// ResetHeard runs after a reset announcement was applied or ignored.
	ResetHeard func(product, gen int64)
	// Committed runs after a sale was answered (committed, or with nothing
	// to write), before the stock cache hears of it.
	Committed func(product int64)
	// TripGroup runs when a sender has gathered a group of one-trip
	// purchases (its size), before it sends them.
	TripGroup func(size int)
	// BatchTrips runs when a sale was answered by the MySQL form's three
	// trips (committed, or nothing to write).
	BatchTrips func(product int64)
	// Returned runs after a return's COMMIT, before reserve's counter gets
	// the units back; true stops there (an instance dying between them).
	Returned func(product int64) bool
}

// WithHooks returns c with h installed.
func (c Config) WithHooks(h Hooks) Config {
	c.hooks = hooks{ordersRead: h.OrdersRead, resetHeard: h.ResetHeard, committed: h.Committed, tripGroup: h.TripGroup, batchTrips: h.BatchTrips, returned: h.Returned}
	return c
}

// ResetMessage is the announcement of a reset of product to stock in
// generation gen.
func ResetMessage(product, stock, gen int64) string {
	return stockcache.Message(product, stock, stockcache.Version{Gen: gen})
}

// TripsWaiting is how many one-trip purchases wait for a sender to take
// them.
func (s *Seckill) TripsWaiting() int {
	if m, ok := s.sales.(interface{ TripsWaiting() int }); ok {
		return m.TripsWaiting()
	}
	return 0
}

// TripSenders is how many groups of one-trip purchases are sent at once.
const TripSenders = salestore.TripSenders

// MoveToReserve moves the product into Redis for reserve, as reserve's
// first purchase does, and returns its generation.
func (s *Seckill) MoveToReserve(ctx context.Context, id int64) (int64, error) {
	return s.loadReserve(ctx, id)
}

// WriteReservations writes reservations of one product taken in
// generation gen, as reserve's writer does, and returns each one's order
// or error.
func (s *Seckill) WriteReservations(ctx context.Context, gen int64, rs []Reservation) ([]Receipt, []error, error) {
	as, err := s.writeReservations(ctx, gen, rs)
	rs2, errs := make([]Receipt, len(as)), make([]error, len(as))
	for i, a := range as {
		rs2[i], errs[i] = a.R, a.Err
	}
	return rs2, errs, err
}

// WriteManyReservations writes batches of reservations of different
// products in one transaction, as reserve's writer does, and returns each
// batch's orders or errors, or its own refusal.
func (s *Seckill) WriteManyReservations(ctx context.Context, gens []int64, batches [][]Reservation) ([][]Receipt, [][]error, []error, error) {
	bs := make([]reservewriter.Batch, len(batches))
	for i, rs := range batches {
		bs[i] = reservewriter.Batch{Gen: gens[i], Reservations: rs}
	}
	ws, err := s.writeManyReservations(ctx, bs)
	if err != nil {
		return nil, nil, nil, err
	}
	receipts, errs, refusals := make([][]Receipt, len(ws)), make([][]error, len(ws)), make([]error, len(ws))
	for i, w := range ws {
		refusals[i] = w.Err
		for _, a := range w.Answers {
			receipts[i] = append(receipts[i], a.R)
			errs[i] = append(errs[i], a.Err)
		}
	}
	return receipts, errs, refusals, nil
}

// ErrGenerationGone says whether err is a write of reservations that a
// reset discarded.
func ErrGenerationGone(err error) bool {
	_, ok := errors.AsType[*salestore.GenerationGone](err)
	return ok
}

// Reconcile holds product id's reserve counter against the database and
// the reservations waiting, as the writers do every so often: how far it
// moved the counter, and how many reservations it found lost.
func (s *Seckill) Reconcile(ctx context.Context, id int64) (delta, lost int64, err error) {
	return s.writer.Reconcile(ctx, id)
}
