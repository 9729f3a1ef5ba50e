package salestore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
)

// Answers that do not lie. Every purchase carries a request ID (one made by
// the server when the buyer sent none) and every order row holds it. When a
// COMMIT was sent and its outcome is not known (its reply lost, the
// connection gone after it, the deadline running out while it ran), the
// service does not answer "unavailable", which would say nothing was
// written: it settles the outcome by looking the purchase's orders up by
// request ID on another connection, and answers the truth. The look-up is a
// locking read (SELECT ... FOR UPDATE): an order row that the unsettled
// transaction inserted and has not yet committed or rolled back is locked
// by it, so the read waits for its end instead of missing it. (The
// transaction's inserts all returned before its COMMIT was sent, so its
// rows exist by then.) When the look-up cannot be made within its bound
// either, the answer is 503 outcome_unknown, and a replay of the request ID
// answers the truth once the database does.

// commitError is a COMMIT whose outcome is not known: it may have taken.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit, outcome unknown: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// uncommitted says err is a COMMIT whose outcome is not known.
func uncommitted(err error) bool {
	var ce *commitError
	return errors.As(err, &ce)
}

// transaction runs fn in a transaction on ctx, as gorm's Transaction does,
// and tells a COMMIT that failed (a *commitError: it may have taken) from
// everything before it (rolled back, nothing written).
func (b *sqlBase) transaction(ctx context.Context, fn func(tx *gorm.DB) error) error {
	committing := false
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := fn(tx); err != nil {
			return err
		}
		committing = true
		return nil
	})
	if err != nil && committing && !IsDeadlock(err) {
		return &commitError{err: err}
	}
	// A deadlock at COMMIT is the server's word that it rolled back: on a
	// Galera Cluster, certification found another node's write to a row
	// first. The sale decides again (retryable).
	return err
}

// serverRequestIDPrefix starts the request IDs the server makes.
const serverRequestIDPrefix = "srv-"

// NewRequestID makes a request ID for a purchase that came without one: 128
// random bits, which no other purchase can have.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return serverRequestIDPrefix + hex.EncodeToString(b[:])
}

// settle finds out what became of a transaction whose COMMIT's outcome is
// unknown (cause): the orders it was to write, by request ID. committed
// says they are in the database; !committed with a nil error that the
// transaction rolled back and wrote nothing. An error means the look-up
// itself could not be made within its bound: the outcome stays unknown.
func (b *sqlBase) settle(ctx context.Context, requestIDs []string, cause error) (found map[string]model.Order, committed bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.DBTimeout)
	defer cancel()
	orders, err := b.lookUp(ctx, requestIDs)
	if err != nil {
		b.cfg.Log.ErrorContext(ctx, "a purchase's outcome is unknown: its COMMIT failed and the look-up too",
			"request_ids", len(requestIDs), "commit_err", cause, "err", err)
		return nil, false, fmt.Errorf("look up %d orders after a failed COMMIT: %w", len(requestIDs), err)
	}
	found = make(map[string]model.Order, len(orders))
	for _, o := range orders {
		found[string(*o.RequestID)] = o
	}
	b.cfg.Log.WarnContext(ctx, "a COMMIT failed; its outcome was looked up", "request_ids", len(requestIDs),
		"committed", len(found) > 0, "err", cause)
	if len(found) > 0 && len(found) != len(requestIDs) {
		return found, true, fmt.Errorf("%d of %d orders of one transaction found", len(found), len(requestIDs))
	}
	return found, len(found) > 0, nil
}

// lookUp reads the orders with the request IDs, waiting for any
// transaction that holds one of them uncommitted to end. It runs in a
// transaction of its own (a locking read waits for the locks it meets; in
// autocommit mode MySQL does not promise to), which it rolls back: it
// wrote nothing, and so its answer never waits on a COMMIT's reply, which
// is what may be failing.
func (b *sqlBase) lookUp(ctx context.Context, requestIDs []string) (orders []model.Order, err error) {
	tx := b.db.WithContext(ctx).Begin()
	if tx.Error != nil {
		return nil, fmt.Errorf("begin: %w", tx.Error)
	}
	defer func() {
		// What was read stands: a rollback that fails means the connection
		// went, and its locks with it.
		if rerr := tx.Rollback().Error; rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			b.cfg.Log.WarnContext(ctx, "roll back an order look-up", "err", rerr)
		}
	}()
	err = ForUpdate(tx).
		Where("request_id IN ?", requestIDs).Find(&orders).Error
	return orders, err
}

// OutcomeUnknown is the answer to a purchase whose COMMIT was sent and
// whose outcome could not be looked up.
func OutcomeUnknown(p Purchase, cause error) error {
	return &failure.Error{Code: failure.CodeOutcomeUnknown, Err: cause, Message: fmt.Sprintf(
		"the purchase may or may not have been made: replay request_id %q to learn which", p.RequestID)}
}

// settleOne is the answer to one purchase whose COMMIT failed with cause:
// its order when it committed (ok); unavailable (nothing written) when it
// rolled back; outcome_unknown when nobody can tell yet.
func (b *sqlBase) settleOne(ctx context.Context, p Purchase, cause error) (o model.Order, ok bool, err error) {
	found, committed, err := b.settle(ctx, []string{p.RequestID}, cause)
	switch {
	case err != nil:
		return model.Order{}, false, OutcomeUnknown(p, errors.Join(cause, err))
	case !committed:
		return model.Order{}, false, failure.Store(fmt.Sprintf("commit the purchase of product %d (rolled back)", p.ProductID), cause)
	}
	return found[p.RequestID], true, nil
}

// settleBatch answers the purchases of a sale d decided whose COMMIT
// failed with cause (see settle). Committed: every answer stands as
// decided. Rolled back: nothing was written, and the whole sale fails
// (unavailable), its sold-out answers too, which may have counted on its
// own sales. Not known: the purchases it was to sell, and those replaying
// them, answer outcome_unknown; those that replayed an earlier order keep
// that answer; the rest were decided on a stock nobody can vouch for and
// wrote nothing: unavailable.
func (b *sqlBase) settleBatch(ctx context.Context, ps []Purchase, d Sale, cause error) (Sale, error) {
	d.Final = false // the stock cache is not told a stock nobody vouches for
	var ids []string
	for _, i := range d.Sold {
		ids = append(ids, ps[i].RequestID)
	}
	if len(ids) == 0 {
		// No order to write: every answer was decided on the stock read
		// under the row lock, whatever became of the COMMIT.
		return d, nil
	}
	found, committed, err := b.settle(ctx, ids, cause)
	switch {
	case err == nil && committed:
		// The orders' IDs are the database's (the COMMIT's trip may have
		// read them back, or not).
		for k := range d.Orders {
			d.Orders[k].ID = found[string(*d.Orders[k].RequestID)].ID
		}
		d.finish()
		return d, nil
	case err == nil:
		return Sale{}, failure.Store(fmt.Sprintf("commit %d orders of product %d (rolled back)", len(ids), ps[0].ProductID), cause)
	}
	writes := d.writes()
	for i, a := range d.Answers {
		switch {
		case writes[i]:
			d.Answers[i] = Answer{Err: OutcomeUnknown(ps[i], errors.Join(cause, err))}
		case a.R.Replayed:
		default:
			d.Answers[i] = Answer{Err: failure.ErrUnavailable.Because(cause)}
		}
	}
	return d, nil
}
