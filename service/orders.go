package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
)

// Reading orders: one order, to its buyer or to the admin; a product's
// orders, a page at a time, to the admin.

// Limits of a page of orders.
const (
	DefaultOrdersPage = 100
	MaxOrdersPage     = 1000
)

// Order returns order id to its buyer (user) or, with admin, to anyone:
// order_not_found for an order that is not there and for another user's
// alike, so that an order ID reveals nothing.
func (s *Seckill) Order(ctx context.Context, id int64, user string, admin bool) (model.Order, error) {
	notThere := failure.Errorf(failure.CodeOrderNotFound, "order %d not found", id)
	switch {
	case id <= 0:
		return model.Order{}, failure.Errorf(failure.CodeInvalid, "order id must be a positive integer")
	case !admin && user == "":
		return model.Order{}, notThere
	case !admin && checkID(user) != nil:
		return model.Order{}, failure.Errorf(failure.CodeInvalid, "user_id must be 1 to %d characters of valid UTF-8, without control characters", maxIDLength)
	}
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	var o model.Order
	err := s.db.WithContext(ctx).Take(&o, id).Error
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
func (s *Seckill) Orders(ctx context.Context, id int64, page OrdersPage) ([]model.Order, string, error) {
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
	if _, err := s.Product(ctx, id); err != nil {
		return nil, "", err
	}
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	q := s.db.WithContext(ctx).Where("product_id = ? AND id > ?", id, after)
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
