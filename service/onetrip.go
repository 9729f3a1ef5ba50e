package service

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/model"
)

// One purchase in two round trips. On MySQL, buyOne first sends its whole
// transaction as one multi-statement: START TRANSACTION, the conditional
// decrement (which leaves the stock it left in LAST_INSERT_ID), the user's
// units within the limit, the order (its remaining stock taken from
// LAST_INSERT_ID(), which the units' upsert leaves alone: user_units has no
// AUTO_INCREMENT column). When every statement did what a purchase needs, one
// COMMIT ends it; otherwise one ROLLBACK does, and buyOne's step-by-step
// transaction finds the purchase's exact answer (sold out, over the limit,
// the fence moved, a request ID already used, a deadlock). A purchase that
// goes through pays two round trips instead of five; one that does not
// pays two more.

// erParse is MySQL's ER_PARSE_ERROR: a pool opened without multiStatements
// reads the multi-statement as one bad statement.
const erParse = 1064

// buyOneTrip tries p's transaction in two round trips (see above). ok says
// it committed o; !ok with a nil error says it rolled back, nothing
// written, and the step-by-step transaction is to decide. An error is one
// whose outcome is not known to be a rollback (a *commitError: the COMMIT
// failed, it may have taken), or the context's.
func (s *Seckill) buyOneTrip(ctx context.Context, p Purchase, fw fenceWrite) (o model.Order, ok bool, err error) {
	limit := s.cfg.PerUserLimit
	if !s.oneTrip.Load() || (limit > 0 && p.Quantity > limit) {
		return o, false, nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return o, false, fmt.Errorf("the mysql pool: %w", err)
	}
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return o, false, storeErr("take a connection", err)
	}
	defer func() {
		// A connection that went (driver.ErrBadConn) is closed already.
		if cerr := conn.Close(); cerr != nil && !errors.Is(cerr, sql.ErrConnDone) {
			err = errors.Join(err, fmt.Errorf("return the connection: %w", cerr))
		}
	}()

	o, trip, err := s.oneTripStatements(p, fw, limit)
	if err != nil {
		return o, false, err
	}
	var out tripOutcome
	err = conn.Raw(func(dc any) error {
		var err error
		out, err = s.sendOneTrip(ctx, dc, trip, limit)
		return err
	})
	if out.committed {
		o.RemainingStock, o.ID, ok = out.left, out.id, true
	}
	switch {
	case out.commitErr != nil:
		// The caller settles it (buyOne): it may have taken.
		return model.Order{}, false, &commitError{err: fmt.Errorf("commit the purchase of product %d: %w", p.ProductID, out.commitErr)}
	case ok:
		return o, true, nil
	case ctx.Err() != nil:
		return model.Order{}, false, storeErr(fmt.Sprintf("buy product %d", p.ProductID), ctx.Err())
	case err != nil:
		// The connection dropped before COMMIT, or its ROLLBACK failed: it
		// is closed, and the server rolls back what it began.
		s.log.WarnContext(ctx, "a purchase's one-trip transaction lost its connection", "product", p.ProductID, "err", err)
	}
	return model.Order{}, false, nil
}

// tripOutcome is what sending a one-trip purchase came to: committed, with
// the stock left and the order's ID; or a COMMIT that failed (commitErr:
// whether it took is not known, so the step-by-step path must not try
// again); or neither, nothing written.
type tripOutcome struct {
	committed bool
	left, id  int64
	commitErr error
}

// sendOneTrip sends trip on the driver connection dc, then COMMIT when
// every statement did what a purchase needs (limit says the units' upsert
// is among them), else ROLLBACK. A connection that cannot take the
// multi-statement turns the one trip off. Its error says the connection
// is to go (driver.ErrBadConn).
func (s *Seckill) sendOneTrip(ctx context.Context, dc any, trip oneTrip, limit int64) (out tripOutcome, err error) {
	ex, isExecer := dc.(driver.ExecerContext)
	if !isExecer {
		s.oneTrip.Store(false)
		return out, nil
	}
	res, err := ex.ExecContext(ctx, trip.query, trip.args)
	if err != nil {
		var my *mysql.MySQLError
		if errors.As(err, &my) && my.Number == erParse {
			s.oneTrip.Store(false)
			s.log.WarnContext(ctx, "the MySQL pool takes no multi-statements: a purchase takes five round trips", "err", err)
		}
		// A statement failed (a request ID used, a deadlock): the
		// transaction is open still, unless the connection is gone.
		return out, rollback(ctx, ex)
	}
	r, isResult := res.(mysql.Result)
	if !isResult {
		s.oneTrip.Store(false)
		return out, rollback(ctx, ex)
	}
	want := trip.n
	rows, ids := r.AllRowsAffected(), r.AllLastInsertIds()
	if len(rows) != want || len(ids) != want || rows[1] != 1 || (limit > 0 && rows[2] < 1) || rows[want-1] != 1 {
		return out, rollback(ctx, ex)
	}
	if _, err := ex.ExecContext(ctx, stmtCommit, nil); err != nil {
		out.commitErr = err
		return out, driver.ErrBadConn // the connection goes
	}
	return tripOutcome{committed: true, left: ids[1], id: ids[want-1]}, nil
}

// oneTrip is a one-trip purchase's multi-statement: its text, its
// arguments and how many statements it holds.
type oneTrip struct {
	query string
	args  []driver.NamedValue
	n     int
}

// oneTripStatements is buyOneTrip's multi-statement for p (the units'
// upsert only under a limit), with the order it writes, whose ID and
// remaining stock the results will tell.
func (s *Seckill) oneTripStatements(p Purchase, fw fenceWrite, limit int64) (model.Order, oneTrip, error) {
	o := newOrder(p, p.Strategy, 0)
	o.CreatedAt = s.db.NowFunc()
	decrement, args := s.decrementSQL(p.ProductID, p.Quantity, fw)
	query := stmtBegin + "; " + decrement
	if limit > 0 {
		query += "; " + stmtRaiseUnits.mysql
		args = append(args, p.ProductID, p.UserID, p.Quantity, limit)
	}
	query += "; " + stmtOrderOneTrip
	var rid any // NULL when the purchase has no request ID
	if o.RequestID != nil {
		rid = string(*o.RequestID)
	}
	args = append(args, p.ProductID, p.UserID, p.Quantity, rid, o.Strategy, o.CreatedAt)
	named, err := namedValues(args)
	if err != nil {
		return o, oneTrip{}, fmt.Errorf("buy product %d: %w", p.ProductID, err)
	}
	want := 3 // START TRANSACTION, the decrement, the order
	if limit > 0 {
		want++ // the units between them
	}
	return o, oneTrip{query: query, args: named, n: want}, nil
}

// rollback ends the open transaction of a one-trip purchase that is not to
// commit. A failed ROLLBACK leaves the connection's state unknown: it goes
// (driver.ErrBadConn), and the server rolls back when it closes.
func rollback(ctx context.Context, ex driver.ExecerContext) error {
	if _, err := ex.ExecContext(ctx, stmtRollback, nil); err != nil {
		return fmt.Errorf("rollback: %w: %w", err, driver.ErrBadConn)
	}
	return nil
}

// namedValues makes args the driver's values, as database/sql would.
func namedValues(args []any) ([]driver.NamedValue, error) {
	out := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out, nil
}
