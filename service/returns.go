package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/stockcache"
)

// An order's life after its sale. An order is written unpaid when orders
// wait for their payment (Config.PaymentTimeout), and then:
//
//   - its buyer pays it (Pay): one conditional UPDATE of its row, unpaid
//     and not yet due to paid;
//   - its buyer cancels it (Cancel), or its time runs out and the sweep
//     expires it (sweep): its units come back (returnUnits).
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
// through the Redis nodes, as of a reset; their refreshers are what a lost
// announcement falls back on (stockcache.Refresh). A cancel answers its
// buyer once every instance that heard has applied it (at most
// announceWait): a purchase that begins after the answer finds the units
// on sale on any instance, which is what the histories' check asks.

// The reasons units come back, the label of seckill_order_returns_total.
const (
	returnCancel = "cancel"
	returnExpiry = "expiry"
)

// SweepEvery is how often each instance looks for unpaid orders whose
// time has come: a due order waits no longer than that, and the time its
// return takes, while any instance runs.
const SweepEvery = 250 * time.Millisecond

// announceWait bounds a cancel's wait for every instance to hear that its
// units are back (stockcache.Cache.AnnounceHeard).
const announceWait = 500 * time.Millisecond

// sweepBatch bounds the due orders one look returns, oldest first: a
// backlog after an outage is swept over the next looks.
const sweepBatch = 512

// holds says an order in state status holds its units: unpaid or paid.
// The units of a cancelled or expired order are back in the stock.
func holds(status string) bool {
	return status == model.StatusUnpaid || status == model.StatusPaid
}

// due says order o is unpaid and its time has come at now.
func due(o model.Order, now time.Time) bool {
	return o.Status == model.StatusUnpaid && o.ExpiresAt != nil && !o.ExpiresAt.After(now)
}

// Pay marks order id paid, for its buyer user: 200 with the order, paid,
// also when it was paid already; order_not_found for an order that is not
// there or not user's; order_closed for one cancelled or expired. An order
// whose time has come is expired here if the sweep has not yet done it.
func (s *Seckill) Pay(ctx context.Context, id int64, user string) (model.Order, error) {
	if err := checkOrderAction(id, user); err != nil {
		return model.Order{}, err
	}
	dctx, cancel := s.dbCtx(ctx, 0)
	res := s.db.WithContext(dctx).Model(&model.Order{}).
		Where("id = ? AND user_id = ? AND status = ? AND expires_at > ?", id, user, model.StatusUnpaid, s.db.NowFunc()).
		Updates(map[string]any{"status": model.StatusPaid, "expires_at": nil})
	cancel()
	if res.Error != nil {
		return model.Order{}, storeErr(fmt.Sprintf("pay order %d", id), res.Error)
	}
	if res.RowsAffected == 1 {
		s.metrics.paid()
	}
	o, err := s.Order(ctx, id, user, false)
	if err != nil {
		return model.Order{}, err
	}
	if o.Status == model.StatusUnpaid {
		// Its time has come and the sweep has not been by.
		if o, err = s.returnOrder(ctx, o, returnExpiry); err != nil {
			return model.Order{}, err
		}
	}
	switch o.Status {
	case model.StatusPaid:
		return o, nil
	case model.StatusUnpaid:
		return model.Order{}, fmt.Errorf("order %d is still unpaid after its payment", id)
	}
	return model.Order{}, errorf(CodeOrderClosed, "order %d is %s", id, o.Status)
}

// Cancel cancels order id for its buyer user and puts its units back on
// sale: 200 with the order, cancelled, also when it was cancelled already
// (nothing more comes back); order_not_found for an order that is not
// there or not user's; order_paid for a paid one; order_closed for one
// expired (also one whose time has come: it is expired here).
func (s *Seckill) Cancel(ctx context.Context, id int64, user string) (model.Order, error) {
	if err := checkOrderAction(id, user); err != nil {
		return model.Order{}, err
	}
	o, err := s.Order(ctx, id, user, false)
	if err != nil {
		return model.Order{}, err
	}
	if o.Status == model.StatusUnpaid {
		reason := returnCancel
		if due(o, s.db.NowFunc()) {
			reason = returnExpiry
		}
		if o, err = s.returnOrder(ctx, o, reason); err != nil {
			return model.Order{}, err
		}
	}
	switch o.Status {
	case model.StatusCancelled:
		return o, nil
	case model.StatusPaid:
		return model.Order{}, errorf(CodeOrderPaid, "order %d is paid", id)
	case model.StatusExpired:
		return model.Order{}, errorf(CodeOrderClosed, "order %d is expired", id)
	}
	return model.Order{}, fmt.Errorf("order %d is still %s after its cancel", id, o.Status)
}

// checkOrderAction checks what a buyer's action on an order names.
func checkOrderAction(id int64, user string) error {
	switch {
	case id <= 0:
		return errorf(CodeInvalid, "order id must be a positive integer")
	case checkID(user) != nil:
		return errorf(CodeInvalid, "user_id must be 1 to %d characters of valid UTF-8, without control characters", maxIDLength)
	}
	return nil
}

// returnOrder returns the units of order o, for reason, if it is still
// unpaid, and reads it back as it is then.
func (s *Seckill) returnOrder(ctx context.Context, o model.Order, reason string) (model.Order, error) {
	if _, err := s.returnUnits(ctx, o.ProductID, []int64{o.ID}, reason); err != nil {
		return model.Order{}, err
	}
	return s.Order(ctx, o.ID, "", true)
}

// returnUnits returns, for reason, the units of those of the product's
// orders ids that are still unpaid (and, for an expiry, due), in one
// transaction under the product's row lock, and tells the stock cache and
// the other instances the stock it left. It returns how many orders gave
// their units back.
func (s *Seckill) returnUnits(ctx context.Context, product int64, ids []int64, reason string) (int, error) {
	status := model.StatusCancelled
	if reason == returnExpiry {
		status = model.StatusExpired
	}
	var (
		p        model.Product
		returned []model.Order
		units    int64
		outbox   []model.ReserveReturn
	)
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		returned, units, outbox = nil, 0, nil
		if p, err = lockProduct(tx, product); err != nil {
			return err
		}
		// By primary key: a locking read of a range would lock the gaps
		// that other products' new orders go into.
		var orders []model.Order
		err = forUpdate(tx).Where("id IN ? AND product_id = ?", ids, product).Find(&orders).Error
		if err != nil {
			return fmt.Errorf("lock the orders: %w", err)
		}
		now := s.db.NowFunc()
		byUser := map[string]int64{}
		var back []int64
		for _, o := range orders {
			if o.Status != model.StatusUnpaid || reason == returnExpiry && !due(o, now) {
				continue
			}
			returned = append(returned, o)
			back = append(back, o.ID)
			units += o.Quantity
			byUser[string(o.UserID)] += o.Quantity
		}
		if len(back) == 0 {
			return nil
		}
		res := tx.Model(&model.Order{}).Where("id IN ? AND status = ?", back, model.StatusUnpaid).
			Updates(map[string]any{"status": status, "expires_at": nil})
		if res.Error != nil {
			return fmt.Errorf("mark %d orders %s: %w", len(back), status, res.Error)
		}
		if res.RowsAffected != int64(len(back)) {
			return fmt.Errorf("mark %d orders %s: %d changed under their row locks", len(back), status, res.RowsAffected)
		}
		err = tx.Model(&p).Updates(map[string]any{"stock": gorm.Expr("stock + ?", units), "returns": gorm.Expr("returns + 1")}).Error
		if err != nil {
			return fmt.Errorf("put %d units back: %w", units, err)
		}
		for user, q := range byUser {
			err := tx.Model(&model.UserUnits{}).Where("product_id = ? AND user_id = ?", product, user).
				Update("units", gorm.Expr("CASE WHEN units > ? THEN units - ? ELSE 0 END", q, q)).Error
			if err != nil {
				return fmt.Errorf("take %d units off a buyer's: %w", q, err)
			}
		}
		if p.Reserve {
			// The counter in Redis takes the units back after the COMMIT
			// (refund); until it has, the outbox says they are coming.
			outbox = make([]model.ReserveReturn, len(returned))
			for i, o := range returned {
				outbox[i] = model.ReserveReturn{OrderID: o.ID, ProductID: product, Generation: p.Generation,
					UserID: o.UserID, Quantity: o.Quantity}
			}
			if err := tx.Create(&outbox).Error; err != nil {
				return fmt.Errorf("write %d returns on their way to Redis: %w", len(outbox), err)
			}
		}
		p.Stock, p.Returns = p.Stock+units, p.Returns+1
		return nil
	})
	if err != nil {
		return 0, storeErr(fmt.Sprintf("return the units of %d orders of product %d", len(ids), product), err)
	}
	if len(returned) == 0 {
		return 0, nil
	}
	if h := s.cfg.hooks.returned; h != nil && h(product) {
		return len(returned), nil // a test's crash between the two stores
	}
	if len(outbox) > 0 {
		if err := s.refund(ctx, outbox); err != nil {
			// The units are back in the database; the counter gets them
			// from the outbox, at the next sweep (finishReturns).
			s.log.WarnContext(ctx, "reserve: give returned units back to the counter", "product", product, "err", err)
		}
	}
	s.metrics.returned(reason, len(returned))
	s.cache.Saw(product, p.Stock, stockcache.Of(p))
	if reason == returnCancel {
		// The buyer is answered once every instance sells the units again.
		s.cache.AnnounceHeard(ctx, product, p.Stock, stockcache.Of(p), announceWait)
	} else {
		s.cache.Announce(ctx, product, p.Stock, stockcache.Of(p))
	}
	s.log.DebugContext(ctx, "units returned", "product", product, "reason", reason, "orders", len(returned), "units", units, "stock", p.Stock)
	return len(returned), nil
}

// refund gives the units of returns rs back to their counter in Redis and
// takes each that has them off the outbox. One whose counter is not
// loaded stays, and is asked again at the next sweep.
func (s *Seckill) refund(ctx context.Context, rs []model.ReserveReturn) error {
	if s.reserve == nil {
		return errors.New("reserve has no Redis")
	}
	var done []int64
	var errs []error
	for _, r := range rs {
		ok, err := s.reserve.Refund(ctx, r.ProductID, r.Generation, r.OrderID, r.Quantity, string(r.UserID))
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			done = append(done, r.OrderID)
		}
	}
	if len(done) > 0 {
		dctx, cancel := s.dbCtx(ctx, 0)
		err := s.db.WithContext(dctx).Where("order_id IN ?", done).Delete(&model.ReserveReturn{}).Error
		cancel()
		if err != nil {
			// Asked again, they change nothing more (refund.lua).
			errs = append(errs, fmt.Errorf("take %d returns off the outbox: %w", len(done), err))
		}
	}
	return errors.Join(errs...)
}

// outboxGrace is how old a return on its way to Redis is before the sweep
// finishes it: its own instance does it at once, unless it died between
// the two stores.
const outboxGrace = 2 * time.Second

// finishReturns gives the units of the returns left on the outbox longer
// than outboxGrace back to their counters: those whose instance died, or
// whose Redis did not answer, between the database's COMMIT and the
// counter.
func (s *Seckill) finishReturns(ctx context.Context) error {
	if s.reserve == nil {
		return nil
	}
	var rs []model.ReserveReturn
	rctx, cancel := s.dbCtx(ctx, 0)
	err := s.db.WithContext(rctx).Where("created_at <= ?", s.db.NowFunc().Add(-outboxGrace)).
		Order("order_id").Limit(sweepBatch).Find(&rs).Error
	cancel()
	if err != nil || len(rs) == 0 {
		return storeErr("read the returns on their way to Redis", err)
	}
	return s.refund(ctx, rs)
}

// returnsOf reads the returns of product id on their way to its counter,
// in transaction tx.
func returnsOf(tx *gorm.DB, id int64) ([]model.ReserveReturn, error) {
	var rs []model.ReserveReturn
	if err := tx.Where("product_id = ?", id).Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("read the returns of product %d on their way to Redis: %w", id, err)
	}
	return rs, nil
}

// returnIDs are the orders of returns rs.
func returnIDs(rs []model.ReserveReturn) []int64 {
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.OrderID
	}
	return ids
}

// sweep expires, every SweepEvery until ctx ends, the unpaid orders whose
// time has come. Every instance sweeps: they find the same due orders,
// and the returns' row locks let each order's units come back once.
func (s *Seckill) sweep(ctx context.Context) {
	t := time.NewTicker(SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.SweepOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "expire unpaid orders", "err", err)
		}
		if err := s.finishReturns(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "reserve: finish the returns on their way to Redis", "err", err)
		}
	}
}

// SweepOnce expires the unpaid orders whose time has come, up to
// sweepBatch of them, oldest first, and returns how many this call
// expired.
func (s *Seckill) SweepOnce(ctx context.Context) (int, error) {
	var dueOrders []model.Order
	rctx, cancel := s.dbCtx(ctx, 0)
	err := s.db.WithContext(rctx).Select("id", "product_id").
		Where("status = ? AND expires_at <= ?", model.StatusUnpaid, s.db.NowFunc()).
		Order("expires_at").Limit(sweepBatch).Find(&dueOrders).Error
	cancel()
	if err != nil {
		return 0, storeErr("find the unpaid orders due", err)
	}
	byProduct := map[int64][]int64{}
	var products []int64
	for _, o := range dueOrders {
		if _, ok := byProduct[o.ProductID]; !ok {
			products = append(products, o.ProductID)
		}
		byProduct[o.ProductID] = append(byProduct[o.ProductID], o.ID)
	}
	expired := 0
	var errs []error
	for _, id := range products {
		n, err := s.returnUnits(ctx, id, byProduct[id], returnExpiry)
		expired += n
		if err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return expired, errors.Join(errs...)
}
