package orders

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
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

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
func (s *Service) returnUnits(ctx context.Context, product int64, ids []int64, reason string) (int, error) {
	caller := ctx // the wait for the refreshers below is not the database's
	ctx, cancel := s.dbCtx(ctx)
	defer cancel()
	hold, heard := "", true
	if reason == metrics.ReturnCancel {
		// As long as the return may take, and a refresh after it.
		deadline, _ := ctx.Deadline()
		hold, heard = s.cfg.Cache.HoldHeard(ctx, product, time.Until(deadline)+2*stockcache.Refresh, announceWait)
	}
	var r returned
	err := s.cfg.Retry(ctx, func() error {
		var err error
		r, err = s.returnTx(ctx, product, ids, reason)
		return err
	})
	switch {
	case err != nil:
		// Its COMMIT may have taken (its reply lost): the hold runs out by
		// itself, by when every refresher has read the product again.
		return 0, failure.Store(fmt.Sprintf("return the units of %d orders of product %d", len(ids), product), err)
	case len(r.orders) == 0:
		if hold != "" {
			s.cfg.Cache.Unhold(ctx, product, hold)
		}
		return 0, nil
	}
	if h := s.cfg.Returned; h != nil && h(product) {
		return len(r.orders), nil // a test's crash between the two stores
	}
	if len(r.outbox) > 0 {
		if err := s.refund(ctx, r.outbox); err != nil {
			// The units are back in the database; the counter gets them
			// from the outbox, at the next sweep (finishReturns).
			s.cfg.Log.WarnContext(ctx, "reserve: give returned units back to the counter", "product", product, "err", err)
		}
	}
	s.cfg.Metrics.Returned(reason, len(r.orders))
	// What is left, so that the instances answer sold_out again once it is
	// gone (under reserve, the database's stock: at least the counter's).
	if hold != "" {
		s.cfg.Cache.Returned(ctx, product, r.product.Stock, stockcache.Of(r.product), hold)
	} else {
		s.cfg.Cache.Saw(product, r.product.Stock, stockcache.Of(r.product))
		s.cfg.Cache.Announce(ctx, product, r.product.Stock, stockcache.Of(r.product))
	}
	if !heard {
		// Some instance did not say it heard: its refresher reads the
		// new version by then.
		sleep(caller, 2*stockcache.Refresh)
	}
	s.cfg.Log.DebugContext(ctx, "units returned", "product", product, "reason", reason, "orders", len(r.orders), "units", r.units, "stock", r.product.Stock)
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
func (s *Service) returnTx(ctx context.Context, product int64, ids []int64, reason string) (r returned, err error) {
	status := model.StatusCancelled
	if reason == metrics.ReturnExpiry {
		status = model.StatusExpired
	}
	err = s.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if r.product, err = salestore.LockProduct(tx, product); err != nil {
			return err
		}
		var orders []model.Order
		if err := salestore.ForUpdate(tx).Where("id IN ? AND product_id = ?", ids, product).Find(&orders).Error; err != nil {
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
		err = tx.Model(&r.product).Updates(map[string]any{"stock": gorm.Expr("stock + ?", r.units), "returns": gorm.Expr("returns + 1")}).Error
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
func (s *Service) refund(ctx context.Context, rs []model.ReserveReturn) error {
	if s.cfg.Reserve == nil {
		return errors.New("reserve has no Redis")
	}
	var done []int64
	var errs []error
	for _, r := range rs {
		ok, err := s.cfg.Reserve.Refund(ctx, r.ProductID, r.Generation, r.Returns, r.OrderID, r.Quantity, string(r.UserID))
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			done = append(done, r.OrderID)
		}
	}
	if len(done) > 0 {
		dctx, cancel := s.dbCtx(ctx)
		err := s.cfg.DB.WithContext(dctx).Where("order_id IN ?", done).Delete(&model.ReserveReturn{}).Error
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
func (s *Service) finishReturns(ctx context.Context) error {
	if s.cfg.Reserve == nil {
		return nil
	}
	// From where the last look stopped, round the outbox: returns whose
	// counter is not loaded (none of its product's buyers has come since
	// Redis lost it) stay, and must not keep the others waiting.
	var rs []model.ReserveReturn
	rctx, cancel := s.dbCtx(ctx)
	err := s.cfg.DB.WithContext(rctx).Where("created_at <= ? AND order_id > ?", s.now().Add(-outboxGrace), s.outboxAfter.Load()).
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
