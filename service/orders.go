package service

import (
	"context"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/orders"
)

// An order's life after its sale is package orders'; the service answers
// for it.

// Order returns order id to its buyer (user) or, with admin, to anyone:
// order_not_found for an order that is not there and for another user's
// alike.
func (s *Seckill) Order(ctx context.Context, id int64, user string, admin bool) (model.Order, error) {
	return s.orders.Order(ctx, id, user, admin)
}

// Orders returns a page of product id's orders, oldest first, and the
// After of the next page ("" on the last).
func (s *Seckill) Orders(ctx context.Context, id int64, page orders.OrdersPage) ([]model.Order, string, error) {
	return s.orders.Orders(ctx, id, page)
}

// Pay marks order id paid, for its buyer user (orders.Service.Pay).
func (s *Seckill) Pay(ctx context.Context, id int64, user string) (model.Order, error) {
	return s.orders.Pay(ctx, id, user)
}

// Cancel cancels order id for its buyer user and puts its units back on
// sale (orders.Service.Cancel).
func (s *Seckill) Cancel(ctx context.Context, id int64, user string) (model.Order, error) {
	return s.orders.Cancel(ctx, id, user)
}

// SweepOnce expires the unpaid orders whose time has come, up to a batch
// of them, oldest first, and returns how many it expired.
func (s *Seckill) SweepOnce(ctx context.Context) (int, error) {
	return s.orders.SweepOnce(ctx)
}

// PayByProvider marks order id paid for the payment provider, whose
// callback names the order and not its buyer (orders.Service.Pay, for the
// order's own buyer): a payment racing an expiry or a cancel, exactly one
// wins.
func (s *Seckill) PayByProvider(ctx context.Context, id int64) (model.Order, error) {
	o, err := s.orders.Order(ctx, id, "", true)
	if err != nil {
		return model.Order{}, err
	}
	return s.orders.Pay(ctx, id, string(o.UserID))
}
