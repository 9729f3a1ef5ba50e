package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/metrics"
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

// now is the time orders' expiries are written and compared in: the
// instance's clock, in UTC (the embedded SQLite compares times as text).
func (s *Seckill) now() time.Time { return s.db.NowFunc().UTC() }

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
		Where("id = ? AND user_id = ? AND status = ? AND (expires_at IS NULL OR expires_at > ?)", id, user, model.StatusUnpaid, s.now()).
		Updates(map[string]any{"status": model.StatusPaid, "expires_at": nil})
	cancel()
	if res.Error == nil && res.RowsAffected == 1 {
		s.metrics.Paid()
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
func (s *Seckill) Cancel(ctx context.Context, id int64, user string) (model.Order, error) {
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
	case checkID(user) != nil:
		return failure.Errorf(failure.CodeInvalid, "user_id must be 1 to %d characters of valid UTF-8, without control characters", maxIDLength)
	}
	return nil
}

// returnOrder returns the units of order o, for reason, if it is still
// unpaid, and reads it back as it is then; returned says this call gave
// them back. When the return's outcome is unknown (its COMMIT's reply
// lost, say), the order read back says what became of it; when it cannot
// be read either, the answer is outcome_unknown.
func (s *Seckill) returnOrder(ctx context.Context, o model.Order, reason string) (model.Order, bool, error) {
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
// waits for it to end rather than miss what it did (as outcome.go's
// look-up of a sale's orders).
func (s *Seckill) orderSettled(ctx context.Context, id int64, user string) (model.Order, error) {
	var o model.Order
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return forUpdate(tx).Take(&o, id).Error
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
func (s *Seckill) reannounce(ctx context.Context, product int64) {
	rctx, cancel := s.dbCtx(ctx, 0)
	p, err := s.product(rctx, s.db, product)
	cancel()
	if err != nil {
		sleep(ctx, 2*stockcache.Refresh) // the refreshers have read it by then
		return
	}
	if !s.cache.ReopenHeard(ctx, product, stockcache.Of(p), announceWait) {
		sleep(ctx, 2*stockcache.Refresh)
	}
}

// returnUnits returns, for reason, the units of those of the product's
// orders ids that are still unpaid (and, for an expiry, due), in one
// transaction under the product's row lock (returnTx), and tells the stock
// cache and the other instances the stock it left. It returns how many
// orders gave their units back.
//
// A cancel first holds the product's sold-out answers on every instance
// (HoldHeard), before its units can be bought (the COMMIT; under reserve
// the refund after it): no instance answers a purchase sold out from what
// it saw before them, so a buyer answered 200 finds the units on sale
// anywhere, and so does any who buys after one that bought them. It waits
// for the instances outside the transaction: the row lock, which every
// sale of the product takes, is held only for the transaction's own
// statements.
func (s *Seckill) returnUnits(ctx context.Context, product int64, ids []int64, reason string) (int, error) {
	caller := ctx // the wait for the refreshers below is not the database's
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	hold, heard := "", true
	if reason == metrics.ReturnCancel {
		// As long as the return may take, and a refresh after it.
		deadline, _ := ctx.Deadline()
		hold, heard = s.cache.HoldHeard(ctx, product, time.Until(deadline)+2*stockcache.Refresh, announceWait)
	}
	var r returned
	err := retryDeadlocks(ctx, s.saleCfg, func() error {
		var err error
		r, err = s.returnTx(ctx, product, ids, reason)
		return err
	})
	if err != nil || len(r.orders) == 0 {
		if hold != "" {
			s.cache.Unhold(ctx, product, hold)
		}
		if err != nil {
			return 0, failure.Store(fmt.Sprintf("return the units of %d orders of product %d", len(ids), product), err)
		}
		return 0, nil
	}
	if h := s.cfg.hooks.returned; h != nil && h(product) {
		return len(r.orders), nil // a test's crash between the two stores
	}
	if len(r.outbox) > 0 {
		if err := s.refund(ctx, r.outbox); err != nil {
			// The units are back in the database; the counter gets them
			// from the outbox, at the next sweep (finishReturns).
			s.log.WarnContext(ctx, "reserve: give returned units back to the counter", "product", product, "err", err)
		}
	}
	s.metrics.Returned(reason, len(r.orders))
	// What is left, so that the instances answer sold_out again once it is
	// gone (under reserve, the database's stock: at least the counter's).
	if hold != "" {
		s.cache.Returned(ctx, product, r.product.Stock, stockcache.Of(r.product), hold)
	} else {
		s.cache.Saw(product, r.product.Stock, stockcache.Of(r.product))
		s.cache.Announce(ctx, product, r.product.Stock, stockcache.Of(r.product))
	}
	if !heard {
		// Some instance did not say it heard: its refresher reads the
		// new version by then.
		sleep(caller, 2*stockcache.Refresh)
	}
	s.log.DebugContext(ctx, "units returned", "product", product, "reason", reason, "orders", len(r.orders), "units", r.units, "stock", r.product.Stock)
	return len(r.orders), nil
}

// returned is what a return's transaction did: the product as it left it,
// the orders that gave their units back, how many units, and, under
// reserve, the returns on their way to the counter.
type returned struct {
	product model.Product
	orders  []model.Order
	units   int64
	outbox  []model.ReserveReturn
}

// returnTx is returnUnits' transaction: it locks the product's row, then
// its orders ids by primary key (a locking read of a range would lock the
// gaps that other products' new orders go into), keeps those still unpaid
// (and, for an expiry, due), marks them, puts their units back, takes them
// off their buyers' and counts one more return on the product.
func (s *Seckill) returnTx(ctx context.Context, product int64, ids []int64, reason string) (r returned, err error) {
	status := model.StatusCancelled
	if reason == metrics.ReturnExpiry {
		status = model.StatusExpired
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if r.product, err = lockProduct(tx, product); err != nil {
			return err
		}
		var orders []model.Order
		if err := forUpdate(tx).Where("id IN ? AND product_id = ?", ids, product).Find(&orders).Error; err != nil {
			return fmt.Errorf("lock the orders: %w", err)
		}
		now := s.now()
		byUser := map[string]int64{}
		var back []int64
		for _, o := range orders {
			if o.Status != model.StatusUnpaid || reason == metrics.ReturnExpiry && !due(o, now) {
				continue
			}
			r.orders = append(r.orders, o)
			back = append(back, o.ID)
			r.units += o.Quantity
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
		err := tx.Model(&r.product).Updates(map[string]any{"stock": gorm.Expr("stock + ?", r.units), "returns": gorm.Expr("returns + 1")}).Error
		if err != nil {
			return fmt.Errorf("put %d units back: %w", r.units, err)
		}
		if err := takeUnits(tx, product, byUser); err != nil {
			return err
		}
		if r.outbox, err = writeOutbox(tx, r.product, r.orders); err != nil {
			return err
		}
		r.product.Stock, r.product.Returns = r.product.Stock+r.units, r.product.Returns+1
		return nil
	})
	if err != nil {
		return returned{}, err
	}
	return r, nil
}

// writeOutbox writes, for a product under reserve, the returns of orders
// on their way to its counter in Redis, in the return's transaction tx:
// the counter takes the units back after the COMMIT (refund), and until it
// has, the outbox says they are coming. p is the product as locked, before
// the return.
func writeOutbox(tx *gorm.DB, p model.Product, orders []model.Order) ([]model.ReserveReturn, error) {
	if !p.Reserve {
		return nil, nil
	}
	outbox := make([]model.ReserveReturn, len(orders))
	for i, o := range orders {
		outbox[i] = model.ReserveReturn{OrderID: o.ID, ProductID: p.ID, Generation: p.Generation,
			Returns: p.Returns + 1, UserID: o.UserID, Quantity: o.Quantity}
	}
	if err := tx.Create(&outbox).Error; err != nil {
		return nil, fmt.Errorf("write %d returns on their way to Redis: %w", len(outbox), err)
	}
	return outbox, nil
}

// takeUnits takes the units byUser gives back off their buyers' units of
// product, in one statement (a sweep returns hundreds of buyers' orders at
// once; a statement each was what the sweep cost the hot product), never
// below 0.
func takeUnits(tx *gorm.DB, product int64, byUser map[string]int64) error {
	users := slices.Sorted(maps.Keys(byUser))
	var expr strings.Builder
	args := make([]any, 0, 3*len(users))
	expr.WriteString("CASE user_id")
	for _, u := range users {
		expr.WriteString(" WHEN ? THEN CASE WHEN units > ? THEN units - ? ELSE 0 END")
		args = append(args, u, byUser[u], byUser[u])
	}
	expr.WriteString(" ELSE units END")
	err := tx.Model(&model.UserUnits{}).Where("product_id = ? AND user_id IN ?", product, users).
		Update("units", gorm.Expr(expr.String(), args...)).Error
	if err != nil {
		return fmt.Errorf("take the units of %d buyers off theirs: %w", len(users), err)
	}
	return nil
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
		ok, err := s.reserve.Refund(ctx, r.ProductID, r.Generation, r.Returns, r.OrderID, r.Quantity, string(r.UserID))
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
// the two stores (two instances that both do it give the units back once).
const outboxGrace = 200 * time.Millisecond

// finishReturns gives the units of the returns left on the outbox longer
// than outboxGrace back to their counters: those whose instance died, or
// whose Redis did not answer, between the database's COMMIT and the
// counter.
func (s *Seckill) finishReturns(ctx context.Context) error {
	if s.reserve == nil {
		return nil
	}
	// From where the last look stopped, round the outbox: returns whose
	// counter is not loaded (none of its product's buyers has come since
	// Redis lost it) stay, and must not keep the others waiting.
	var rs []model.ReserveReturn
	rctx, cancel := s.dbCtx(ctx, 0)
	err := s.db.WithContext(rctx).Where("created_at <= ? AND order_id > ?", s.now().Add(-outboxGrace), s.outboxAfter.Load()).
		Order("order_id").Limit(sweepBatch).Find(&rs).Error
	cancel()
	switch {
	case err != nil:
		return failure.Store("read the returns on their way to Redis", err)
	case len(rs) < sweepBatch:
		s.outboxAfter.Store(0) // round again from the start next time
	default:
		s.outboxAfter.Store(rs[len(rs)-1].OrderID)
	}
	if len(rs) == 0 {
		return nil
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
		Where("status = ? AND expires_at <= ?", model.StatusUnpaid, s.now()).
		Order("expires_at").Limit(sweepBatch).Find(&dueOrders).Error
	cancel()
	if err != nil {
		return 0, failure.Store("find the unpaid orders due", err)
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
		n, err := s.returnUnits(ctx, id, byProduct[id], metrics.ReturnExpiry)
		expired += n
		if err != nil && !errors.Is(err, failure.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return expired, errors.Join(errs...)
}
