// Package orders is an order's life after its sale: reading orders (to
// their buyer, or a product's to the admin), paying one, cancelling one,
// and expiring those whose payment did not come (the sweep), each of the
// last two giving the order's units back to the stock (a return).
//
// An order is written unpaid when orders wait for their payment
// (Config.PaymentTimeout of the service), and then:
//
//   - its buyer pays it (Pay): one conditional UPDATE of its row, unpaid
//     and not yet due to paid;
//   - its buyer cancels it (Cancel), or its time runs out and the sweep
//     expires it (Sweep): its units come back (returnUnits).
//
// A return is one transaction under the product's row lock, the lock every
// sale of the product takes first: it locks the orders by primary key,
// keeps those still unpaid, marks them cancelled or expired, puts their
// units back in the stock, takes them off their buyers' units (so that the
// per-user limit counts only orders unpaid or paid) and counts one more
// return on the product (model.Product.Returns). So a return never races a
// sale into a lost update: whatever a sale decided, it decided under the
// same lock, and each order's units come back once, whoever else returns
// them at the same time, because only an unpaid order gives any back. A
// payment racing a return changes the same row from unpaid, and only one
// of them finds it so.
//
// After the COMMIT the stock cache hears of the new stock in the product's
// new version (stockcache.Version: a write that began before the return
// cannot hide the units it gave back), and every instance hears of it
// through the Redis nodes; their refreshers are what a lost announcement
// falls back on (stockcache.Refresh). A cancel first holds every
// instance's sold-out answers of the product (stockcache.Cache.HoldHeard),
// before its transaction, until the new stock reaches them: a purchase
// that begins after its answer finds the units on sale on any instance,
// which is what the histories' check asks.
package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/metrics"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/service/stockcache"
)

// Limits of a page of orders.
const (
	DefaultOrdersPage = 100
	MaxOrdersPage     = 1000
)

// Config is what the orders' life reads, writes and tells.
type Config struct {
	// DB holds the orders and products; every call is bounded by
	// DBTimeout.
	DB        *gorm.DB
	DBTimeout time.Duration
	// Cache is the instance's stock cache, which a return tells of the
	// stock it left and which announces it to the other instances.
	Cache   *stockcache.Cache
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// Reserve is the reserve strategy's Redis side, whose counters take
	// returned units back (refund); nil when there is none.
	Reserve *reserve.Store
	// Product reads a product as the service does (a product_not_found
	// for one that is not there).
	Product func(ctx context.Context, id int64) (model.Product, error)
	// Retry runs fn, a transaction, again for as long as ctx allows when
	// the database chose it as a deadlock's victim (the sale store's
	// policy, which every transaction of a product's row shares).
	Retry func(ctx context.Context, fn func() error) error
	// Returned, when not nil, runs between a return's COMMIT and its
	// announcement; true stops the return there, as a crash would (a
	// test's).
	Returned func(product int64) bool
}

// Service reads, pays, cancels and expires orders.
type Service struct {
	cfg Config
	// outboxAfter is where the sweep's next look at the returns on their
	// way to Redis begins (finishReturns).
	outboxAfter atomic.Int64
}

// New returns the orders' life over cfg; Sweep runs its sweep.
func New(cfg Config) *Service {
	return &Service{cfg: cfg}
}

// dbCtx bounds a database call.
func (s *Service) dbCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.DBTimeout)
}

// now is the time orders' expiries are written and compared in: the
// instance's clock, in UTC (the embedded SQLite compares times as text).
func (s *Service) now() time.Time { return s.cfg.DB.NowFunc().UTC() }

// due says order o is unpaid and its time has come at now.
func due(o model.Order, now time.Time) bool {
	return o.Status == model.StatusUnpaid && o.ExpiresAt != nil && !o.ExpiresAt.After(now)
}

// invalidUser is the answer to a user ID the contract does not accept.
func invalidUser() error {
	return failure.Errorf(failure.CodeInvalid, "user_id must be 1 to %d characters of valid UTF-8, without control characters", api.MaxIDLength)
}

// Order returns order id to its buyer (user) or, with admin, to anyone:
// order_not_found for an order that is not there and for another user's
// alike, so that an order ID reveals nothing.
func (s *Service) Order(ctx context.Context, id int64, user string, admin bool) (model.Order, error) {
	notThere := failure.Errorf(failure.CodeOrderNotFound, "order %d not found", id)
	switch {
	case id <= 0:
		return model.Order{}, failure.Errorf(failure.CodeInvalid, "order id must be a positive integer")
	case !admin && user == "":
		return model.Order{}, notThere
	case !admin && api.CheckID(user) != nil:
		return model.Order{}, invalidUser()
	}
	ctx, cancel := s.dbCtx(ctx)
	defer cancel()
	var o model.Order
	err := s.cfg.DB.WithContext(ctx).Take(&o, id).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return model.Order{}, notThere
	case err != nil:
		return model.Order{}, failure.Store(fmt.Sprintf("read order %d", id), err)
	case !admin && string(o.UserID) != user:
		return model.Order{}, notThere
	}
	return o, nil
}

// OrdersPage asks for a page of a product's orders.
type OrdersPage struct {
	// Status, when not empty, keeps only the orders in that state.
	Status string
	// Limit is the most orders of the page (0: DefaultOrdersPage).
	Limit int
	// After is the Next of the page before (empty: the first page).
	After string
}

// Orders returns a page of product id's orders, oldest first, and the
// After of the next page ("" on the last).
func (s *Service) Orders(ctx context.Context, id int64, page OrdersPage) ([]model.Order, string, error) {
	var after int64
	switch {
	case id <= 0:
		return nil, "", failure.Errorf(failure.CodeInvalid, "product id must be a positive integer")
	case page.Status != "" && page.Status != model.StatusUnpaid && page.Status != model.StatusPaid &&
		page.Status != model.StatusCancelled && page.Status != model.StatusExpired:
		return nil, "", failure.Errorf(failure.CodeInvalid, "status must be unpaid, paid, cancelled or expired")
	case page.Limit < 0 || page.Limit > MaxOrdersPage:
		return nil, "", failure.Errorf(failure.CodeInvalid, "limit must be from 1 to %d", MaxOrdersPage)
	case page.After != "":
		var err error
		if after, err = strconv.ParseInt(page.After, 10, 64); err != nil || after < 0 {
			return nil, "", failure.Errorf(failure.CodeInvalid, "after must be the next of a page before")
		}
	}
	if page.Limit == 0 {
		page.Limit = DefaultOrdersPage
	}
	if _, err := s.cfg.Product(ctx, id); err != nil {
		return nil, "", err
	}
	ctx, cancel := s.dbCtx(ctx)
	defer cancel()
	q := s.cfg.DB.WithContext(ctx).Where("product_id = ? AND id > ?", id, after)
	if page.Status != "" {
		q = q.Where("status = ?", page.Status)
	}
	var orders []model.Order
	// One more than the page: whether there is a next one.
	if err := q.Order("id").Limit(page.Limit + 1).Find(&orders).Error; err != nil {
		return nil, "", failure.Store(fmt.Sprintf("read the orders of product %d", id), err)
	}
	next := ""
	if len(orders) > page.Limit {
		orders = orders[:page.Limit]
		next = strconv.FormatInt(orders[len(orders)-1].ID, 10)
	}
	return orders, next, nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
