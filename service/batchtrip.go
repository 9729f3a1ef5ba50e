package service

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// A batch in three round trips. On MySQL, the default hold (fenced, with
// nothing to do between its grant and its write) sells its batch in three
// multi-statements instead of nine statements one at a time:
//
//  1. START TRANSACTION; the product's stock under its row lock (SELECT
//     ... FOR UPDATE); the orders already made with the batch's request IDs;
//     the units the batch's users hold (a plain read: see unitsHeld);
//  2. once decide has answered every purchase, as writeBatch's would: the
//     decrement, which moves the fence on as well (the claim folded into
//     the write, under the row lock held since the first trip), the users'
//     new units and the orders, one statement each;
//  3. COMMIT.
//
// Every trip waits on the database and, on a busy machine, on the
// scheduler: a hot product's hold spends most of its time waiting for
// replies. Anything outside the common case (a request ID already used, a
// statement that fails, such as a deadlock or a duplicate key, a result
// other than expected) rolls back, and the batch is sold step by step by
// writeBatch, which knows every answer. A hold that sells nothing rolls
// back too: its answers were decided under the row lock. A COMMIT that
// fails is settled as writeBatch's is.

// sellInTrips sells ps, a fenced hold with nothing between its grant and
// its write, in three round trips (see above), and answers each. done is
// false when it wrote nothing and the batch is to be sold step by step.
func (s *Seckill) sellInTrips(ctx context.Context, st Strategy, ps []Purchase) (as []answer, done bool, err error) {
	if !s.mysql || !s.multiStatements.Load() {
		return nil, false, nil
	}
	id := ps[0].ProductID
	gen := s.memory.generation(id)
	tctx, cancel := s.dbCtx(ctx, 0)
	d, done, err := s.batchTrips(tctx, st, ps)
	cancel()
	var my *mysql.MySQLError
	switch {
	case uncommitted(err):
		as, err := s.settleBatch(ctx, ps, d, err)
		return as, true, err
	case errors.Is(err, driver.ErrSkip) || errors.As(err, &my) && my.Number == erParse:
		// A pool opened without interpolateParams or multiStatements.
		s.multiStatements.Store(false)
		s.log.WarnContext(ctx, "the MySQL pool takes no multi-statements: a batch takes nine round trips", "err", err)
		return nil, false, nil
	case errors.As(err, &my):
		// A statement failed (a deadlock, a duplicate key) and the
		// transaction rolled back: writeBatch finds every answer.
		return nil, false, nil
	case err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
		// The connection failed before any COMMIT (one the pool kept from
		// before the server restarted, say): nothing was written, and
		// writeBatch goes on another, as database/sql would have retried.
		s.log.WarnContext(ctx, "a batch's three-trip transaction did not go through: it is sold step by step", "product", id, "err", err)
		return nil, false, nil
	case err != nil:
		return nil, true, storeErr(fmt.Sprintf("sell a batch of product %d", id), err)
	case !done:
		return nil, false, nil
	}
	if h := s.cfg.hooks.batchTrips; h != nil {
		h(id)
	}
	s.wrote(id, d.left, gen)
	return d.answers, true, nil
}

// batchTrips runs the batch's three trips on a connection of its own. done
// says every purchase has its answer in d: committed, or nothing to write.
// Its error is a *commitError when the COMMIT failed.
func (s *Seckill) batchTrips(ctx context.Context, st Strategy, ps []Purchase) (d decided, done bool, err error) {
	sqlDB, err := s.db.DB()
	if err != nil {
		return d, false, fmt.Errorf("the mysql pool: %w", err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return d, false, storeErr("take a connection", err)
	}
	defer func() {
		// A connection that went (driver.ErrBadConn) is closed already.
		if cerr := conn.Close(); cerr != nil && !errors.Is(cerr, sql.ErrConnDone) {
			err = errors.Join(err, fmt.Errorf("return the connection: %w", cerr))
		}
	}()
	err = conn.Raw(func(dc any) error {
		var err error
		d, done, err = s.batchOnConn(ctx, dc, st, ps)
		return err
	})
	return d, done, err
}

// batchOnConn is batchTrips on the driver connection dc. An error that
// leaves the connection's state unknown wraps driver.ErrBadConn, so that
// the pool closes it.
func (s *Seckill) batchOnConn(ctx context.Context, dc any, st Strategy, ps []Purchase) (d decided, done bool, err error) {
	ex, isExecer := dc.(driver.ExecerContext)
	q, isQueryer := dc.(driver.QueryerContext)
	if !isExecer || !isQueryer {
		return d, false, nil
	}
	read, err := s.readBatch(ctx, q, ps)
	if err != nil || !read.complete {
		return d, false, errors.Join(err, rollback(ctx, ex))
	}
	d = s.decide(st, ps, nil, read.stock, nil, read.units)
	if len(d.orders) == 0 {
		return d, true, rollback(ctx, ex)
	}
	query, args := s.saleStatements(ps, d)
	named, err := namedValues(args)
	if err != nil {
		return d, false, errors.Join(fmt.Errorf("sell %d orders: %w", len(d.orders), err), rollback(ctx, ex))
	}
	res, err := ex.ExecContext(ctx, query, named)
	if err != nil {
		return d, false, errors.Join(fmt.Errorf("write %d orders: %w", len(d.orders), err), rollback(ctx, ex))
	}
	r, isResult := res.(mysql.Result)
	if !isResult || !wroteSale(r, len(d.orders)) {
		return d, false, rollback(ctx, ex)
	}
	ids := r.AllLastInsertIds()
	first := ids[len(ids)-1]
	for i := range d.orders {
		// A multi-row INSERT's rows take consecutive IDs from the first
		// (auto_increment_increment 1), as GORM assumes too.
		d.orders[i].ID = first + int64(i)
	}
	d.left = ids[0] // the decrement's LAST_INSERT_ID: the stock it left
	d.finish()
	if _, err := ex.ExecContext(ctx, stmtCommit, nil); err != nil {
		cerr := &commitError{err: fmt.Errorf("commit %d orders of product %d: %w", len(d.orders), ps[0].ProductID, err)}
		return d, false, fmt.Errorf("%w (%w)", cerr, driver.ErrBadConn)
	}
	return d, true, nil
}

// batchRead is what the first trip read: the stock under the row lock and
// the units each user holds. complete is false when the batch is to be sold
// step by step: the product is not there, or one of its request IDs was
// used already.
type batchRead struct {
	stock    int64
	units    map[string]int64
	complete bool
}

// readBatch sends the first trip: START TRANSACTION and the batch's reads.
func (s *Seckill) readBatch(ctx context.Context, q driver.QueryerContext, ps []Purchase) (read batchRead, err error) {
	read.units = map[string]int64{}
	query, args, requestIDs := s.readStatements(ps)
	named, err := namedValues(args)
	if err != nil {
		return read, fmt.Errorf("read a batch of product %d: %w", ps[0].ProductID, err)
	}
	rows, err := q.QueryContext(ctx, query, named)
	if err != nil {
		return read, fmt.Errorf("read a batch of product %d: %w", ps[0].ProductID, err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("read a batch of product %d: %w", ps[0].ProductID, cerr))
		}
	}()
	next, isMulti := rows.(driver.RowsNextResultSet)
	if !isMulti {
		return read, nil
	}
	stocks, err := readCells(rows, 1)
	if err != nil || len(stocks) != 1 {
		return read, err // no such product: writeBatch says so
	}
	if read.stock, err = stocks[0][0].num(); err != nil {
		return read, fmt.Errorf("the stock of product %d: %w", ps[0].ProductID, err)
	}
	if requestIDs {
		used, err := nextCells(next, 1)
		if err != nil || len(used) > 0 {
			return read, err // a replay: writeBatch answers it
		}
	}
	if s.cfg.PerUserLimit > 0 {
		held, err := nextCells(next, 2)
		if err != nil {
			return read, err
		}
		for _, h := range held {
			if read.units[h[0].s], err = h[1].num(); err != nil {
				return read, fmt.Errorf("the units user %s holds: %w", h[0].s, err)
			}
		}
	}
	read.complete = true
	return read, nil
}

// readStatements is the first trip's multi-statement and its arguments;
// requestIDs says it reads the orders of the batch's request IDs (those
// the buyers chose: the server's own cannot have been used).
func (s *Seckill) readStatements(ps []Purchase) (query string, args []any, requestIDs bool) {
	id := ps[0].ProductID
	var b strings.Builder
	b.WriteString(stmtBegin + "; " + stmtStockForUpdate)
	args = append(args, id)
	var ids []any
	for _, p := range ps {
		if p.RequestID != "" && !p.serverRequestID {
			ids = append(ids, p.RequestID)
		}
	}
	if len(ids) > 0 {
		b.WriteString("; " + stmtUsedRequestIDs + sqlList(len(ids)))
		args = append(args, ids...)
	}
	if s.cfg.PerUserLimit > 0 {
		b.WriteString("; " + stmtUnitsHeld + sqlList(len(ps)))
		if s.lockingReads { // as unitsHeld's
			b.WriteString(" FOR UPDATE")
		}
		args = append(args, id)
		for _, p := range ps {
			args = append(args, p.UserID)
		}
	}
	return b.String(), args, len(ids) > 0
}

// saleStatements is the second trip's multi-statement and its arguments:
// the decrement, which claims the fence, the users' new units (under a
// limit) and the orders.
func (s *Seckill) saleStatements(ps []Purchase, d decided) (string, []any) {
	id := ps[0].ProductID
	decrement, args := s.decrementSQL(id, d.total, fenceWrite{claim: true})
	var b strings.Builder
	b.WriteString(decrement)
	if s.cfg.PerUserLimit > 0 {
		users := d.soldUsers(ps)
		for _, user := range users {
			args = append(args, id, user, d.units[user])
		}
		b.WriteString("; " + stmtSetUnits + sqlRows(len(users), 3) + stmtSetUnitsUpdate)
	}
	now := s.db.NowFunc()
	for i := range d.orders {
		o := &d.orders[i]
		o.CreatedAt = now
		var rid any // NULL when the purchase has no request ID
		if o.RequestID != nil {
			rid = string(*o.RequestID)
		}
		args = append(args, o.ProductID, string(o.UserID), o.Quantity, rid, o.Strategy, o.RemainingStock, o.CreatedAt)
	}
	b.WriteString("; " + stmtOrders + sqlRows(len(d.orders), 7))
	return b.String(), args
}

// wroteSale says the second trip did what the sale needs: the decrement
// took the stock, and every order was written.
func wroteSale(r mysql.Result, orders int) bool {
	rows, ids := r.AllRowsAffected(), r.AllLastInsertIds()
	return len(rows) >= 2 && len(ids) == len(rows) && rows[0] == 1 && rows[len(rows)-1] == int64(orders)
}

// sqlList is n placeholders as an SQL list: "(?, ?, ?)" for n = 3.
func sqlList(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// sqlRows is n rows of width placeholders each, as VALUES lists them:
// "(?, ?), (?, ?)" for n = 2, width = 2.
func sqlRows(n, width int) string {
	return strings.TrimSuffix(strings.Repeat(sqlList(width)+", ", n), ", ")
}

// cell is one value of a row read, as text.
type cell struct{ s string }

// num is c as a whole number.
func (c cell) num() (int64, error) { return strconv.ParseInt(c.s, 10, 64) }

// readCells reads the current result set of rows, of width columns.
func readCells(rows driver.Rows, width int) ([][]cell, error) {
	if got := len(rows.Columns()); got != width {
		return nil, fmt.Errorf("a result of %d columns; want %d", got, width)
	}
	var out [][]cell
	dest := make([]driver.Value, width)
	for {
		err := rows.Next(dest)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		row := make([]cell, width)
		for i, v := range dest {
			switch v := v.(type) {
			case int64:
				row[i].s = strconv.FormatInt(v, 10)
			case []byte:
				row[i].s = string(v) // copied: the driver reuses its buffer
			default:
				return nil, fmt.Errorf("a value of type %T", v)
			}
		}
		out = append(out, row)
	}
}

// nextCells moves rows to its next result set and reads it (readCells).
func nextCells(rows driver.RowsNextResultSet, width int) ([][]cell, error) {
	if err := rows.NextResultSet(); err != nil {
		return nil, err
	}
	return readCells(rows, width)
}
