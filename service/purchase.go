package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/sale"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/salestore"
)

// A purchase and what it is answered, in the words the service and its
// sale store share.
type (
	Purchase    = salestore.Purchase
	Receipt     = salestore.Receipt
	Reservation = salestore.Reservation
)

// Limits of a purchase request.
const (
	MaxQuantity = api.MaxQuantity
	MaxHold     = api.MaxHold  // the most Work (hold_ms) and Pause (pause_ms)
	MaxBatch    = api.MaxBatch // the contract's
	maxIDLength = api.MaxIDLength
)

// validate checks p and returns its strategy: Config.Strategy when p names
// none.
func (s *Seckill) validate(p Purchase) (Strategy, error) {
	name := p.Strategy
	if name == "" {
		name = s.cfg.Strategy
	}
	st, known := LookupStrategy(name)
	userBlank, userErr := api.ScanID(p.UserID)
	switch {
	case p.ProductID <= 0:
		return st, failure.Errorf(failure.CodeInvalid, "product id must be a positive integer")
	case userErr != nil || userBlank:
		return st, failure.Errorf(failure.CodeInvalid, "user_id must be 1 to %d characters of valid UTF-8, not blank, without control characters", maxIDLength)
	case p.Quantity < 1 || p.Quantity > MaxQuantity:
		return st, failure.Errorf(failure.CodeInvalid, "quantity must be an integer from 1 to %d", MaxQuantity)
	case p.RequestID != "" && api.CheckID(p.RequestID) != nil:
		return st, failure.Errorf(failure.CodeInvalid, "request_id must be at most %d characters of valid UTF-8, without control characters", maxIDLength)
	case !known:
		return st, failure.Errorf(failure.CodeInvalid, "unknown strategy %q (one of %s)", name, strings.Join(StrategyNames(), ", "))
	case p.Work < 0 || p.Work > MaxHold:
		return st, failure.Errorf(failure.CodeInvalid, "hold_ms must be from 0 to %d", MaxHold.Milliseconds())
	case p.Pause < 0 || p.Pause > MaxHold:
		return st, failure.Errorf(failure.CodeInvalid, "pause_ms must be from 0 to %d", MaxHold.Milliseconds())
	case p.Batch < 0 || p.Batch > MaxBatch:
		return st, failure.Errorf(failure.CodeInvalid, "batch must be from 1 to %d", MaxBatch)
	}
	return st, nil
}

// Purchase sells p.Quantity units of a product to a user under the
// purchase's strategy: it checks the stock and the per-user limit,
// decrements the stock and writes the order. A product this instance has
// seen sold out answers failure.ErrSoldOut at once, from its stock cache.
func (s *Seckill) Purchase(ctx context.Context, p Purchase) (r Receipt, err error) {
	st, err := s.validate(p)
	if err != nil {
		return Receipt{}, err
	}
	p.Strategy = st.Name
	start := time.Now()
	defer func() {
		s.metrics.Purchase(st.Name, outcome(r, err), time.Since(start))
	}()
	if out := s.cache.SoldOutAnswer(p.ProductID, p.Quantity); out != nil {
		if !st.way.deferred || p.RequestID == "" {
			return s.answerOut(ctx, p, out)
		}
		// Under reserve the script answers a replay of a reservation not
		// written yet: the database does not know it.
	}
	if p.RequestID == "" {
		// Every order can be looked up by its request ID (see settle).
		p.RequestID, p.ServerRequestID = salestore.NewRequestID(), true
	}
	// A deadline for the whole purchase; each store call has its own too.
	ctx, cancel := context.WithTimeout(ctx, s.leaderBudget())
	defer cancel()

	return st.way.sell(s, ctx, st, p)
}

// purchaseOp names purchase p in its errors; it is made only for an error,
// not on every purchase.
func purchaseOp(p Purchase) string {
	return fmt.Sprintf("purchase product %d (%s)", p.ProductID, p.Strategy)
}

// soldOut is the answer to a purchase of a product with left units:
// "product <id> has <left> left", put together in a buffer on the stack,
// so that the only allocations are the message's and the error's.
func soldOut(productID, left int64) error {
	var buf [64]byte // the longest message is 58 bytes
	msg := strconv.AppendInt(append(buf[:0], "product "...), productID, 10)
	msg = strconv.AppendInt(append(msg, " has "...), max(left, 0), 10)
	msg = append(msg, " left"...)
	return &failure.Error{Code: failure.CodeSoldOut, Message: string(msg)}
}

// replayRaced answers with the order of another purchase with p's request
// ID when err may be the trace of racing it: that purchase's insert won (a
// duplicate request ID), or it took the last units or the user's limit
// after p's own replay check. Otherwise it returns err.
func (s *Seckill) replayRaced(ctx context.Context, p Purchase, err error) (Receipt, error) {
	if p.RequestID == "" || p.ServerRequestID ||
		!(errors.Is(err, gorm.ErrDuplicatedKey) || errors.Is(err, failure.ErrSoldOut) || errors.Is(err, failure.ErrLimitExceeded)) {
		return Receipt{}, err
	}
	if r, ok, rerr := s.replay(ctx, s.db, p); ok || rerr != nil {
		return r, rerr
	}
	return Receipt{}, err
}

// replay finds the order an earlier purchase with p's request ID made.
func (s *Seckill) replay(ctx context.Context, db *gorm.DB, p Purchase) (Receipt, bool, error) {
	var o model.Order
	err := db.WithContext(ctx).Where("request_id = ?", p.RequestID).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Receipt{}, false, nil
	}
	if err != nil {
		return Receipt{}, false, failure.Store("look up request_id", err)
	}
	r, err := replayOf(p, o)
	return r, true, err
}

// replayOf answers p with o, the order its request ID already made: o
// itself when p asks for the same thing, failure.ErrRequestIDReused otherwise.
func replayOf(p Purchase, o model.Order) (Receipt, error) {
	prior := sale.Prior{Product: o.ProductID, User: string(o.UserID), Quantity: o.Quantity}
	if !sale.Replays(prior, p.ProductID, sale.Purchase{RequestID: p.RequestID, User: p.UserID, Quantity: p.Quantity}) {
		return Receipt{}, requestIDReused(p)
	}
	return Receipt{Order: o, Replayed: true}, nil
}

// requestIDReused is the answer to p, whose request ID made an order for
// another purchase.
func requestIDReused(p Purchase) error {
	return failure.Errorf(failure.CodeRequestIDReused, "request_id %q was used by another purchase", p.RequestID)
}

// doWork does the simulated business work: it waits d or until ctx ends.
func doWork(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("held work: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// outcome is how the metrics label a purchase's answer (one of
// metrics.PurchaseOutcomes).
func outcome(r Receipt, err error) string {
	switch {
	case err != nil:
		return string(failure.CodeOf(err))
	case r.Replayed:
		return "replayed"
	case r.Reservation != nil:
		return "reserved"
	}
	return "ok"
}
