package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/metrics"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

// announceWait bounds a cancel's wait for every instance to hear that its
// units are coming back (stockcache.Cache.HoldHeard).
const announceWait = 500 * time.Millisecond

// Pay marks order id paid, for its buyer user: 200 with the order, paid,
// also when it was paid already; order_not_found for an order that is not
// there or not user's; order_closed for one cancelled or expired. An order
// whose time has come is expired here if the sweep has not yet done it.
func (s *Service) Pay(ctx context.Context, id int64, user string) (model.Order, error) {
	if err := checkOrderAction(id, user); err != nil {
		return model.Order{}, err
	}
	dctx, cancel := s.dbCtx(ctx)
	res := s.cfg.DB.WithContext(dctx).Model(&model.Order{}).
		Where("id = ? AND user_id = ? AND status = ? AND (expires_at IS NULL OR expires_at > ?)", id, user, model.StatusUnpaid, s.now()).
		Updates(map[string]any{"status": model.StatusPaid, "expires_at": nil})
	cancel()
	if res.Error == nil && res.RowsAffected == 1 {
		s.cfg.Metrics.Paid()
	}
	var o model.Order
	var err error
	if res.Error != nil {
		o, err = s.orderSettled(ctx, id, user)
	} else {
		o, err = s.Order(ctx, id, user, false)
	}
	switch {
	case err != nil && res.Error != nil && failure.CodeOf(err) != failure.CodeOrderNotFound:
		return model.Order{}, settleErr(fmt.Sprintf("pay order %d", id), res.Error, err)
	case err != nil && res.RowsAffected == 1:
		// Paid now, and not read back: a retry answers it.
		return model.Order{}, settleErr(fmt.Sprintf("pay order %d", id), errors.New("paid"), err)
	case err != nil:
		return model.Order{}, err
	case res.Error != nil && o.Status == model.StatusUnpaid:
		return model.Order{}, failure.Store(fmt.Sprintf("pay order %d", id), res.Error) // it did not take
	case o.Status == model.StatusUnpaid:
		// Its time has come and the sweep has not been by.
		if o, _, err = s.returnOrder(ctx, o, metrics.ReturnExpiry); err != nil {
			return model.Order{}, err
		}
	}
	switch o.Status {
	case model.StatusPaid:
		return o, nil
	case model.StatusUnpaid:
		// Not paid, and not due by this clock (another instance's ran
		// ahead): nothing changed, and asking again settles it.
		return model.Order{}, failure.ErrUnavailable.Because(fmt.Errorf("order %d is still unpaid after its payment", id))
	}
	return model.Order{}, failure.Errorf(failure.CodeOrderClosed, "order %d is %s", id, o.Status)
}

// Cancel cancels order id for its buyer user and puts its units back on
// sale: 200 with the order, cancelled, also when it was cancelled already
// (nothing more comes back); order_not_found for an order that is not
// there or not user's; order_paid for a paid one; order_closed for one
// expired (also one whose time has come: it is expired here).
func (s *Service) Cancel(ctx context.Context, id int64, user string) (model.Order, error) {
	if err := checkOrderAction(id, user); err != nil {
		return model.Order{}, err
	}
	o, err := s.Order(ctx, id, user, false)
	if err != nil {
		return model.Order{}, err
	}
	returned := false
	if o.Status == model.StatusUnpaid {
		reason := metrics.ReturnCancel
		if due(o, s.now()) {
			reason = metrics.ReturnExpiry
		}
		if o, returned, err = s.returnOrder(ctx, o, reason); err != nil {
			return model.Order{}, err
		}
	}
	switch o.Status {
	case model.StatusCancelled:
		if !returned {
			// Cancelled by an earlier call, maybe still announcing it:
			// this answer waits, as that one's does, until every instance
			// sells the units again.
			s.reannounce(ctx, o.ProductID)
		}
		return o, nil
	case model.StatusPaid:
		return model.Order{}, failure.Errorf(failure.CodeOrderPaid, "order %d is paid", id)
	case model.StatusExpired:
		return model.Order{}, failure.Errorf(failure.CodeOrderClosed, "order %d is expired", id)
	}
	return model.Order{}, failure.ErrUnavailable.Because(fmt.Errorf("order %d is still %s after its cancel", id, o.Status))
}

// checkOrderAction checks what a buyer's action on an order names.
func checkOrderAction(id int64, user string) error {
	switch {
	case id <= 0:
		return failure.Errorf(failure.CodeInvalid, "order id must be a positive integer")
	case api.CheckID(user) != nil:
		return invalidUser()
	}
	return nil
}

// returnOrder returns the units of order o, for reason, if it is still
// unpaid, and reads it back as it is then; returned says this call gave
// them back. When the return's outcome is unknown (its COMMIT's reply
// lost, say), the order read back says what became of it; when it cannot
// be read either, the answer is outcome_unknown.
func (s *Service) returnOrder(ctx context.Context, o model.Order, reason string) (model.Order, bool, error) {
	n, rerr := s.returnUnits(ctx, o.ProductID, []int64{o.ID}, reason)
	var got model.Order
	var err error
	if rerr != nil {
		got, err = s.orderSettled(ctx, o.ID, "")
	} else {
		got, err = s.Order(ctx, o.ID, "", true)
	}
	switch {
	case err != nil && rerr == nil && n > 0:
		// This call returned them: the order is what it made of it.
		o.Status, o.ExpiresAt = model.StatusCancelled, nil
		if reason == metrics.ReturnExpiry {
			o.Status = model.StatusExpired
		}
		return o, true, nil
	case err != nil && rerr == nil:
		rerr = errors.New("another call changed it first")
		fallthrough
	case err != nil:
		return model.Order{}, false, settleErr(fmt.Sprintf("return the units of order %d", o.ID), rerr, err)
	case rerr != nil && got.Status == model.StatusUnpaid:
		return model.Order{}, false, rerr // it did not take
	}
	return got, n > 0 || rerr != nil, nil
}

// orderSettled reads order id (user's, or anyone's for "") after an action
// on it failed, with a locking read: a transaction whose COMMIT was sent
// and has not been applied yet still holds the order's row, so the read
// waits for it to end rather than miss what it did (as the sale store
// settles a sale whose COMMIT's outcome is unknown).
func (s *Service) orderSettled(ctx context.Context, id int64, user string) (model.Order, error) {
	var o model.Order
	ctx, cancel := s.dbCtx(ctx)
	defer cancel()
	err := s.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return salestore.ForUpdate(tx).Take(&o, id).Error
	})
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound) || err == nil && user != "" && string(o.UserID) != user:
		return model.Order{}, failure.Errorf(failure.CodeOrderNotFound, "order %d not found", id)
	case err != nil:
		return model.Order{}, fmt.Errorf("read order %d: %w", id, err)
	}
	return o, nil
}

// settleErr is the answer to an action on an order that failed (err), and
// whose order could not be read back to learn whether it took (read):
// outcome_unknown, whose retry answers the truth.
func settleErr(op string, err, read error) error {
	return &failure.Error{Code: failure.CodeOutcomeUnknown, Message: op + ": the outcome is not known; ask again",
		Err: errors.Join(err, fmt.Errorf("read the order back: %w", read))}
}

// reannounce tells every instance again that the product's units came
// back, and waits until they have heard (ReopenHeard), for a cancel that
// found its order cancelled by another call that may still be announcing
// it.
func (s *Service) reannounce(ctx context.Context, product int64) {
	rctx, cancel := s.dbCtx(ctx)
	p, err := s.cfg.Product(rctx, product)
	cancel()
	if err != nil {
		sleep(ctx, 2*stockcache.Refresh) // the refreshers have read it by then
		return
	}
	if !s.cfg.Cache.ReopenHeard(ctx, product, stockcache.Of(p), announceWait) {
		sleep(ctx, 2*stockcache.Refresh)
	}
}
