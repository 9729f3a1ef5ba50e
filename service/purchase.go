package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/model"
)

// Limits of a purchase request.
const (
	MaxQuantity  = 100
	MaxHold      = 10 * time.Second
	maxIDLength  = 64
	unlockBudget = 2 * time.Second
)

// Purchase is one buyer's attempt to buy a product.
type Purchase struct {
	ProductID int64
	UserID    string
	Quantity  int64
	// RequestID makes the purchase idempotent: a second purchase with the
	// same RequestID answers with the first order.
	RequestID string
	// Strategy overrides Config.Strategy when not empty.
	Strategy string
	// Hold is simulated business work inside the critical section, after
	// the stock is read and before it is written.
	Hold time.Duration
	// Fencing overrides Config.Fencing when not nil.
	Fencing *bool
}

// Receipt is the answer to a successful purchase.
type Receipt struct {
	Order model.Order
	// Replayed says the order was made by an earlier purchase with the same
	// request ID.
	Replayed bool
}

func (p Purchase) validate() error {
	switch {
	case p.ProductID <= 0:
		return fmt.Errorf("%w: product id must be a positive integer", ErrInvalid)
	case utf8.RuneCountInString(p.UserID) < 1 || utf8.RuneCountInString(p.UserID) > maxIDLength ||
		!utf8.ValidString(p.UserID) || strings.TrimSpace(p.UserID) == "":
		return fmt.Errorf("%w: user_id must be 1 to %d characters", ErrInvalid, maxIDLength)
	case p.Quantity < 1 || p.Quantity > MaxQuantity:
		return fmt.Errorf("%w: quantity must be an integer from 1 to %d", ErrInvalid, MaxQuantity)
	case utf8.RuneCountInString(p.RequestID) > maxIDLength || !utf8.ValidString(p.RequestID):
		return fmt.Errorf("%w: request_id must be at most %d characters", ErrInvalid, maxIDLength)
	case p.Strategy != "" && !config.Known(p.Strategy):
		return fmt.Errorf("%w: unknown strategy %q (one of %s)", ErrInvalid, p.Strategy, strings.Join(config.Strategies(), ", "))
	case p.Hold < 0 || p.Hold > MaxHold:
		return fmt.Errorf("%w: hold_ms must be from 0 to %d", ErrInvalid, MaxHold.Milliseconds())
	}
	return nil
}

// Purchase sells p.Quantity units of a product to a user under the
// purchase's strategy: it checks the stock and the per-user limit,
// decrements the stock and writes the order. A sold-out product answers
// ErrSoldOut at once, without waiting for a lock.
func (s *Seckill) Purchase(ctx context.Context, p Purchase) (r Receipt, err error) {
	if err := p.validate(); err != nil {
		return Receipt{}, err
	}
	if p.Strategy == "" {
		p.Strategy = s.cfg.Strategy
	}
	start := time.Now()
	defer func() {
		s.metrics.duration.WithLabelValues(p.Strategy).Observe(time.Since(start).Seconds())
		s.metrics.purchases.WithLabelValues(p.Strategy, outcome(r, err)).Inc()
	}()
	// Every store call needs a deadline: on the embedded store one
	// connection serves all, and a stuck call would stall every buyer.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LockWait+p.Hold+15*time.Second)
	defer cancel()

	if p.RequestID != "" {
		if r, ok, err := s.replay(ctx, p); ok || err != nil {
			return r, err
		}
	}
	prod, err := s.product(ctx, s.db, p.ProductID)
	if err != nil {
		return Receipt{}, err
	}
	if prod.Stock < p.Quantity {
		return s.replayRaced(ctx, p, fmt.Errorf("product %d has %d left: %w", p.ProductID, max(prod.Stock, 0), ErrSoldOut))
	}

	switch p.Strategy {
	case "pessimistic":
		r, err = s.sellPessimistic(ctx, p)
	case "optimistic":
		r, err = s.sellOptimistic(ctx, p)
	case "none":
		r, err = s.sell(ctx, p, false)
	default:
		r, err = s.sellLocked(ctx, p)
	}
	if err != nil {
		return s.replayRaced(ctx, p, storeErr(fmt.Sprintf("purchase product %d (%s)", p.ProductID, p.Strategy), err))
	}
	return r, nil
}

// replayRaced answers with the order of another purchase with p's request
// ID when err may be the trace of racing it: that purchase's insert won (a
// duplicate request ID), or it took the last units or the user's limit
// after p's own replay check. Otherwise it returns err.
func (s *Seckill) replayRaced(ctx context.Context, p Purchase, err error) (Receipt, error) {
	if p.RequestID == "" || !(errors.Is(err, gorm.ErrDuplicatedKey) || errors.Is(err, ErrSoldOut) || errors.Is(err, ErrLimitExceeded)) {
		return Receipt{}, err
	}
	if r, ok, rerr := s.replay(ctx, p); ok || rerr != nil {
		return r, rerr
	}
	return Receipt{}, err
}

// replay finds the order an earlier purchase with p's request ID made.
func (s *Seckill) replay(ctx context.Context, p Purchase) (Receipt, bool, error) {
	var o model.Order
	err := s.db.WithContext(ctx).Where("request_id = ?", p.RequestID).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Receipt{}, false, nil
	}
	if err != nil {
		return Receipt{}, false, storeErr("look up request_id", err)
	}
	if o.ProductID != p.ProductID || o.UserID != p.UserID || o.Quantity != p.Quantity {
		return Receipt{}, false, fmt.Errorf("request_id %q: %w", p.RequestID, ErrRequestIDReused)
	}
	return Receipt{Order: o, Replayed: true}, true, nil
}

// sellLocked takes the strategy's lock for the product, sells inside it and
// gives the lock back, even when the buyer has hung up.
func (s *Seckill) sellLocked(ctx context.Context, p Purchase) (r Receipt, err error) {
	lk, ok := s.lockers[p.Strategy]
	if !ok {
		return Receipt{}, fmt.Errorf("%w: strategy %s has no lock configured", ErrUnavailable, p.Strategy)
	}
	key := s.cfg.KeyPrefix + "lock:product:" + strconv.FormatInt(p.ProductID, 10)
	waitStart := time.Now()
	lease, err := lk.Lock(ctx, key)
	s.metrics.lockWait.WithLabelValues(p.Strategy).Observe(time.Since(waitStart).Seconds())
	if err != nil {
		s.metrics.lockFailures.WithLabelValues(p.Strategy, "timeout").Inc()
		return Receipt{}, fmt.Errorf("%w: %w", ErrLockTimeout, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockBudget)
		defer cancel()
		uerr := lease.Unlock(uctx)
		switch {
		case uerr == nil:
		case errors.Is(uerr, locker.ErrNotHeld):
			// The lease ran out while we worked: someone else may have held
			// the lock too. Fencing decided above whether our write counted.
			s.metrics.lockFailures.WithLabelValues(p.Strategy, "expired").Inc()
			s.log.WarnContext(ctx, "lease expired before unlock", "strategy", p.Strategy, "product", p.ProductID, "err", uerr)
		case err != nil:
			err = errors.Join(err, uerr)
		default:
			// The order is committed and the buyer has it; the lock still
			// expires at its TTL. Reported, not turned into a failure.
			s.metrics.lockFailures.WithLabelValues(p.Strategy, "unlock_error").Inc()
			s.log.ErrorContext(ctx, "unlock failed", "strategy", p.Strategy, "product", p.ProductID, "err", uerr)
		}
	}()
	fencing := s.cfg.Fencing
	if p.Fencing != nil {
		fencing = *p.Fencing
	}
	return s.sell(ctx, p, fencing && fenced(p.Strategy))
}

// sell is the critical section of none and of every lock: read the stock
// and the user's units, check them, do the held work, then decrement and
// write the order in one transaction. The reads are not part of the write
// transaction, so without a lock (or with one that failed) two buyers read
// the same stock and both write: that is the oversell this project shows.
//
// With fence, the purchase first claims the product with a new fencing
// token (products.fence = fence + 1) and the stock write applies only while
// the fence is still its own: a holder whose lease was overtaken by a later
// holder writes nothing and gets ErrLockLost.
func (s *Seckill) sell(ctx context.Context, p Purchase, fence bool) (Receipt, error) {
	db := s.db.WithContext(ctx)
	var token int64
	if fence {
		var err error
		if token, err = s.claim(ctx, p.ProductID); err != nil {
			return Receipt{}, err
		}
	}
	prod, err := s.product(ctx, s.db, p.ProductID)
	if err != nil {
		return Receipt{}, err
	}
	if prod.Stock < p.Quantity {
		return Receipt{}, fmt.Errorf("product %d has %d left: %w", p.ProductID, max(prod.Stock, 0), ErrSoldOut)
	}
	if err := s.checkLimit(ctx, db, p); err != nil {
		return Receipt{}, err
	}
	if err := hold(ctx, p.Hold); err != nil {
		return Receipt{}, err
	}
	var o model.Order
	err = db.Transaction(func(tx *gorm.DB) error {
		q := tx.Model(&model.Product{}).Where("id = ?", p.ProductID)
		if fence {
			q = q.Where("fence = ?", token)
		}
		res := q.Update("stock", gorm.Expr("stock - ?", p.Quantity))
		if res.Error != nil {
			return fmt.Errorf("decrement stock: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("fencing token %d overtaken: %w", token, ErrLockLost)
		}
		var err error
		o, err = s.writeOrder(tx, p)
		return err
	})
	if errors.Is(err, ErrLockLost) {
		s.metrics.lockFailures.WithLabelValues(p.Strategy, "lost").Inc()
	}
	return Receipt{Order: o}, err
}

// claim issues the product's next fencing token and makes it the product's
// fence, in one short transaction of its own: the token comes from the
// database that holds the stock, so it grows per product whatever happens
// to the Redis nodes, and every later claim makes earlier tokens stale.
func (s *Seckill) claim(ctx context.Context, productID int64) (int64, error) {
	var token int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&model.Product{}).Where("id = ?", productID).Update("fence", gorm.Expr("fence + 1"))
		if res.Error != nil {
			return fmt.Errorf("claim fence: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("product %d: %w", productID, ErrNotFound)
		}
		return tx.Model(&model.Product{}).Where("id = ?", productID).Select("fence").Scan(&token).Error
	})
	return token, err
}

// sellPessimistic does everything in one transaction that holds the
// product's row lock (SELECT ... FOR UPDATE) from the read to the commit.
func (s *Seckill) sellPessimistic(ctx context.Context, p Purchase) (Receipt, error) {
	var o model.Order
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		lockCtx, cancel := context.WithTimeout(ctx, s.cfg.LockWait)
		defer cancel()
		waitStart := time.Now()
		var prod model.Product
		err := tx.WithContext(lockCtx).Clauses(clause.Locking{Strength: "UPDATE"}).Take(&prod, p.ProductID).Error
		s.metrics.lockWait.WithLabelValues(p.Strategy).Observe(time.Since(waitStart).Seconds())
		if lockCtx.Err() != nil && ctx.Err() == nil {
			s.metrics.lockFailures.WithLabelValues(p.Strategy, "timeout").Inc()
			return fmt.Errorf("%w: row lock of product %d: %w", ErrLockTimeout, p.ProductID, lockCtx.Err())
		}
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("product %d: %w", p.ProductID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("lock product row: %w", err)
		}
		if prod.Stock < p.Quantity {
			return fmt.Errorf("product %d has %d left: %w", p.ProductID, max(prod.Stock, 0), ErrSoldOut)
		}
		if err := s.checkLimit(ctx, tx, p); err != nil {
			return err
		}
		if err := hold(ctx, p.Hold); err != nil {
			return err
		}
		err = tx.Model(&prod).Update("stock", gorm.Expr("stock - ?", p.Quantity)).Error
		if err != nil {
			return fmt.Errorf("decrement stock: %w", err)
		}
		o, err = s.writeOrder(tx, p)
		return err
	})
	return Receipt{Order: o}, err
}

// sellOptimistic reads the stock, does the held work, then lets one
// conditional UPDATE decide: stock = stock - q WHERE stock >= q. The
// per-user limit is checked after that UPDATE, when the row lock it took
// orders this buyer after every earlier one.
func (s *Seckill) sellOptimistic(ctx context.Context, p Purchase) (Receipt, error) {
	if err := hold(ctx, p.Hold); err != nil {
		return Receipt{}, err
	}
	var o model.Order
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&model.Product{}).Where("id = ? AND stock >= ?", p.ProductID, p.Quantity).
			Update("stock", gorm.Expr("stock - ?", p.Quantity))
		if res.Error != nil {
			return fmt.Errorf("decrement stock: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("product %d: %w", p.ProductID, ErrSoldOut)
		}
		if err := s.checkLimit(ctx, tx, p); err != nil {
			return err
		}
		var err error
		o, err = s.writeOrder(tx, p)
		return err
	})
	return Receipt{Order: o}, err
}

// checkLimit fails with ErrLimitExceeded when the user would own more than
// the per-user limit of the product.
func (s *Seckill) checkLimit(ctx context.Context, db *gorm.DB, p Purchase) error {
	if s.cfg.PerUserLimit <= 0 {
		return nil
	}
	if p.Quantity > s.cfg.PerUserLimit {
		return fmt.Errorf("user %s asks %d, the limit is %d: %w", p.UserID, p.Quantity, s.cfg.PerUserLimit, ErrLimitExceeded)
	}
	var bought int64
	err := db.WithContext(ctx).Model(&model.Order{}).
		Where("product_id = ? AND user_id = ?", p.ProductID, p.UserID).
		Select("COALESCE(SUM(quantity), 0)").Scan(&bought).Error
	if err != nil {
		return fmt.Errorf("count units bought: %w", err)
	}
	if bought+p.Quantity > s.cfg.PerUserLimit {
		return fmt.Errorf("user %s has %d, the limit is %d: %w", p.UserID, bought, s.cfg.PerUserLimit, ErrLimitExceeded)
	}
	return nil
}

// writeOrder inserts the order inside tx, after the stock was decremented,
// and records the stock it left.
func (s *Seckill) writeOrder(tx *gorm.DB, p Purchase) (model.Order, error) {
	var remaining int64
	err := tx.Model(&model.Product{}).Where("id = ?", p.ProductID).Select("stock").Scan(&remaining).Error
	if err != nil {
		return model.Order{}, fmt.Errorf("read remaining stock: %w", err)
	}
	o := model.Order{
		ProductID:      p.ProductID,
		UserID:         p.UserID,
		Quantity:       p.Quantity,
		Strategy:       p.Strategy,
		RemainingStock: remaining,
	}
	if p.RequestID != "" {
		o.RequestID = &p.RequestID
	}
	if err := tx.Create(&o).Error; err != nil {
		return model.Order{}, fmt.Errorf("write order: %w", err)
	}
	return o, nil
}

// hold does the simulated business work: it waits d or until ctx ends.
func hold(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("hold: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// outcome is the metrics label of a purchase's result.
func outcome(r Receipt, err error) string {
	switch {
	case err == nil && r.Replayed:
		return "replayed"
	case err == nil:
		return "ok"
	case errors.Is(err, ErrSoldOut):
		return "sold_out"
	case errors.Is(err, ErrLimitExceeded):
		return "limit_exceeded"
	case errors.Is(err, ErrLockTimeout):
		return "lock_timeout"
	case errors.Is(err, ErrLockLost):
		return "lock_lost"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrRequestIDReused):
		return "request_id_reused"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	}
	return "error"
}
