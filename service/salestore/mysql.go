package salestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/salestore/mysqlrow"
	"github.com/seckill/seckill/service/stockcache"
)

// The MySQL form of the sale store. A sale takes three round trips,
// each a multi-statement:
//
//  1. START TRANSACTION; the product's stock, fence and generation under
//     its row lock (SELECT ... FOR UPDATE); the orders already made with
//     the purchases' request IDs; the units their users hold;
//  2. once the rule has answered every purchase: the decrement (moving the
//     fence on, when the sale claims it), the users' new units and the
//     orders, one statement each;
//  3. COMMIT.
//
// A sale that writes nothing (every purchase refused or replayed, the
// fence moved on) rolls back after the first. Every trip waits on the
// database and, on a busy machine, on the scheduler: a hot product's hold
// spends most of its time waiting for replies, so trips are what a sale
// counts. A single purchase first tries two (Buy).

// mysqlSales is the MySQL form of the sale store.
type mysqlSales struct {
	sqlBase
	pool *sql.DB
	// orders are the statements that write and read orders.
	orders mysqlrow.Statements
	// trips hands one-trip purchases to their senders (sendTrips), which
	// have stopped once stop is called.
	trips        chan *tripRequest
	tripsStopped <-chan struct{}
	stop         context.CancelFunc
	senders      sync.WaitGroup
	// tripsWaiting counts the purchases waiting for a sender to take them.
	tripsWaiting atomic.Int64
}

// Form is "mysql".
func (m *mysqlSales) Form() string { return "mysql" }

// TripsWaiting is how many one-trip purchases wait for a sender to take
// them.
func (m *mysqlSales) TripsWaiting() int { return int(m.tripsWaiting.Load()) }

// conn is what the MySQL form needs of a driver connection.
type conn interface {
	driver.ExecerContext
	driver.QueryerContext
}

// Claim moves the product's fence on and reads it back from the write
// itself: LAST_INSERT_ID(expr).
func (m *mysqlSales) Claim(ctx context.Context, id int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.DBTimeout)
	defer cancel()
	res, err := m.pool.ExecContext(ctx, stmtClaimFence, id)
	if err != nil {
		return 0, failure.Store(fmt.Sprintf("claim the fence of product %d", id), err)
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return 0, failure.Store(fmt.Sprintf("claim the fence of product %d", id), err)
	case n == 0:
		return 0, failure.NotFound(id)
	}
	token, err := res.LastInsertId()
	if err != nil {
		return 0, failure.Store(fmt.Sprintf("read the fence of product %d", id), err)
	}
	return token, nil
}

func (m *mysqlSales) Sell(ctx context.Context, ps []Purchase, r Read, decide DecideFunc) (Sale, error) {
	return m.retrying(ctx, ps, r.Extra, func(ctx context.Context) (Sale, error) {
		d, err := m.sellOnce(ctx, ps, r, decide)
		if err == nil {
			if h := m.cfg.BatchTrips; h != nil {
				h(ps[0].ProductID)
			}
		}
		return d, err
	})
}

// sellOnce is one transaction of a sale, on a connection of its own.
func (m *mysqlSales) sellOnce(ctx context.Context, ps []Purchase, r Read, decide DecideFunc) (d Sale, err error) {
	err = m.onConn(ctx, func(c conn) error {
		d, err = m.sellOn(ctx, c, ps, r, decide)
		return err
	})
	var my *mysql.MySQLError
	var moved *FenceMoved
	var timeout *RowLockTimeout
	var gone *GenerationGone
	var answer *failure.Error
	switch {
	case err == nil, uncommitted(err), ctx.Err() != nil,
		errors.As(err, &my), errors.As(err, &moved), errors.As(err, &timeout), errors.As(err, &gone), errors.As(err, &answer),
		!connLost(err):
		return d, err
	}
	// The connection failed before any COMMIT (one the pool kept from
	// before the server restarted, say): nothing was written.
	return d, fmt.Errorf("%w: %w", errConnLost, err)
}

// onConn runs f on a driver connection of the pool's own, returned to the
// pool after it.
func (m *mysqlSales) onConn(ctx context.Context, f func(c conn) error) (err error) {
	c, err := m.pool.Conn(ctx)
	if err != nil {
		return failure.Store("take a connection", err)
	}
	defer func() {
		// A connection that went (driver.ErrBadConn) is closed already.
		if cerr := c.Close(); cerr != nil && !errors.Is(cerr, sql.ErrConnDone) {
			err = errors.Join(err, fmt.Errorf("return the connection: %w", cerr))
		}
	}()
	return c.Raw(func(dc any) error {
		cn, ok := dc.(conn)
		if !ok {
			return fmt.Errorf("a MySQL connection of type %T takes no multi-statements", dc)
		}
		return f(cn)
	})
}

// connLost says err is the connection's, not a statement's: it went, or
// the pool handed over one that had (a server restarted since).
func connLost(err error) bool {
	var op *net.OpError
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &op)
}

// sellOn is sellOnce on the driver connection c. An error that leaves the
// connection's state unknown wraps driver.ErrBadConn, so that the pool
// closes it.
func (m *mysqlSales) sellOn(ctx context.Context, c conn, ps []Purchase, r Read, decide DecideFunc) (Sale, error) {
	id := ps[0].ProductID
	start := time.Now()
	lockCtx, cancel := r.lockContext(ctx)
	defer cancel()
	read, err := m.readSale(lockCtx, c, ps)
	switch {
	case err != nil && lockCtx.Err() != nil && ctx.Err() == nil:
		// The connection goes (the driver has closed it, unless the server
		// answered first), and the server rolls back.
		timeout := &RowLockTimeout{Waited: time.Since(start), err: fmt.Errorf("row lock of product %d: %w", id, err)}
		return Sale{}, fmt.Errorf("%w (%w)", timeout, driver.ErrBadConn)
	case err != nil:
		return Sale{}, errors.Join(err, rollback(ctx, c))
	case !read.found:
		return Sale{}, errors.Join(failure.NotFound(id), rollback(ctx, c))
	}
	if err := r.owner(id, read.generation, read.reserve != 0); err != nil {
		return Sale{}, errors.Join(err, rollback(ctx, c))
	}
	if r.Token != nil && read.fence != *r.Token {
		return Sale{}, errors.Join(&FenceMoved{Generation: read.generation}, rollback(ctx, c))
	}
	var expired []bool
	if r.UnderLock != nil {
		if expired, err = r.UnderLock(time.Since(start)); err != nil {
			return Sale{}, errors.Join(err, rollback(ctx, c))
		}
	}
	stock := read.stock
	if r.Trusted != nil {
		stock = *r.Trusted
	}
	d := decide(stock, expired, read.used, read.units)
	d.afterWrite(read.stock, r.Trusted != nil)
	d.Read = stockcache.Version{Gen: read.generation, Returns: read.returns}
	if len(d.Orders) == 0 {
		return d, rollback(ctx, c)
	}
	query, args := m.saleStatements(ps, d, r)
	named, err := namedValues(args)
	if err != nil {
		return d, errors.Join(fmt.Errorf("sell %d orders: %w", len(d.Orders), err), rollback(ctx, c))
	}
	res, err := c.ExecContext(ctx, query, named)
	if err != nil {
		return d, errors.Join(fmt.Errorf("write %d orders: %w", len(d.Orders), err), rollback(ctx, c))
	}
	rows, isResult := res.(mysql.Result)
	if !isResult || !wroteSale(rows, len(d.Orders)) {
		return d, errors.Join(fmt.Errorf("write %d orders of product %d: not the results a sale makes", len(d.Orders), id), rollback(ctx, c))
	}
	commit := m.commitCounting
	if m.cfg.ReadBackIDs {
		commit = m.commitReadingIDs
	}
	if err := commit(ctx, c, d.Orders, rows.AllLastInsertIds(), read.step); err != nil {
		return d, err
	}
	d.finish()
	return d, nil
}

// saleRead is what a sale's first trip read under the row lock.
type saleRead struct {
	found                             bool
	stock, fence, generation, returns int64
	// step is the session's auto_increment_increment.
	step    int64
	reserve int64 // 1: the product sells under reserve
	used    map[string]model.Order
	units   map[string]int64
}

// readSale sends a sale's first trip: START TRANSACTION and its reads.
func (m *mysqlSales) readSale(ctx context.Context, c conn, ps []Purchase) (read saleRead, err error) {
	id := ps[0].ProductID
	read.units, read.used = map[string]int64{}, map[string]model.Order{}
	query, args, requestIDs := m.readStatements(ps)
	named, err := namedValues(args)
	if err != nil {
		return read, fmt.Errorf("read a sale of product %d: %w", id, err)
	}
	rows, err := c.QueryContext(ctx, query, named)
	if err != nil {
		return read, fmt.Errorf("read a sale of product %d: %w", id, err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("read a sale of product %d: %w", id, cerr))
		}
	}()
	next, isMulti := rows.(driver.RowsNextResultSet)
	if !isMulti {
		return read, fmt.Errorf("read a sale of product %d: rows of type %T have one result set", id, rows)
	}
	err = mysqlrow.EachRow(rows, 5, func(v []driver.Value) (err error) {
		read.found = true
		return mysqlrow.ScanInts(v, &read.stock, &read.fence, &read.generation, &read.returns, &read.reserve)
	})
	if err != nil {
		return read, fmt.Errorf("the stock of product %d: %w", id, err)
	}
	if requestIDs {
		if err := nextUsed(next, read.used); err != nil {
			return read, err
		}
	}
	if m.cfg.Limit > 0 {
		err := mysqlrow.NextRows(next, 2, func(v []driver.Value) error {
			var units int64
			err := mysqlrow.ScanInts(v[1:], &units)
			read.units[mysqlrow.AsString(v[0])] = units
			return err
		})
		if err != nil {
			return read, fmt.Errorf("the units users hold: %w", err)
		}
	}
	err = mysqlrow.NextRows(next, 1, func(v []driver.Value) error { return mysqlrow.ScanInts(v, &read.step) })
	if err != nil {
		return read, fmt.Errorf("the auto_increment_increment of the session: %w", err)
	}
	if read.step < 1 {
		return read, fmt.Errorf("the session's auto_increment_increment is %d", read.step)
	}
	return read, nil
}

// nextUsed reads the next result set of rows, the orders of request IDs,
// into used.
func nextUsed(rows driver.RowsNextResultSet, used map[string]model.Order) error {
	err := mysqlrow.NextRows(rows, mysqlrow.Width, func(v []driver.Value) error {
		o, err := mysqlrow.ScanOrder(v)
		if err == nil {
			used[string(*o.RequestID)] = o
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("the orders of the request IDs: %w", err)
	}
	return nil
}

// readStatements is the first trip's multi-statement and its arguments;
// requestIDs says it reads the orders of the sale's request IDs (those the
// buyers chose: the server's own cannot have been used).
func (m *mysqlSales) readStatements(ps []Purchase) (query string, args []any, requestIDs bool) {
	id := ps[0].ProductID
	var b strings.Builder
	b.WriteString(stmtBegin + "; " + stmtProductForUpdate)
	args = append(args, id)
	var ids []any
	for _, p := range ps {
		if p.RequestID != "" && !p.ServerRequestID {
			ids = append(ids, p.RequestID)
		}
	}
	if len(ids) > 0 {
		b.WriteString("; " + m.orders.Used + sqlList(len(ids)))
		args = append(args, ids...)
	}
	if m.cfg.Limit > 0 {
		b.WriteString("; " + unitsSQL(len(ps), m.cfg.LockingReads))
		args = append(args, id)
		for _, p := range ps {
			args = append(args, p.UserID)
		}
	}
	b.WriteString("; " + stmtIncrement)
	return b.String(), args, len(ids) > 0
}

// saleStatements is the second trip's multi-statement and its arguments:
// the decrement (claiming the fence when r says so; conditional on the
// stock unless the sale trusts a stock read before), the users' new units
// (under a limit) and the orders.
func (m *mysqlSales) saleStatements(ps []Purchase, d Sale, r Read) (string, []any) {
	id := ps[0].ProductID
	var b strings.Builder
	b.WriteString(stmtSaleDecrement)
	if r.Claim {
		b.WriteString(decrementClaims)
	}
	b.WriteString(stmtSaleDecrementWhere)
	args := []any{d.Total, time.Now(), id}
	if r.Trusted == nil {
		b.WriteString(decrementExact)
		args = append(args, d.Total)
	}
	if m.cfg.Limit > 0 {
		users := d.soldUsers(ps)
		for _, user := range users {
			args = append(args, id, user, d.Units[user])
		}
		b.WriteString("; " + stmtSetUnits + sqlRows(len(users), 3) + stmtSetUnitsUpdate)
	}
	now := m.db.NowFunc()
	for i := range d.Orders {
		o := &d.Orders[i]
		m.cfg.openOrder(o, now)
		args = mysqlrow.Args(args, o, false)
	}
	b.WriteString("; " + m.orders.Insert + sqlRows(len(d.Orders), m.orders.Width))
	return b.String(), args
}

// wroteSale says the second trip did what the sale needs: the decrement
// changed the product's row, and every order was written.
func wroteSale(r mysql.Result, orders int) bool {
	rows, ids := r.AllRowsAffected(), r.AllLastInsertIds()
	return len(rows) >= 2 && len(ids) == len(rows) && rows[0] == 1 && rows[len(rows)-1] == int64(orders)
}

// rollback ends an open transaction that is not to commit. A failed
// ROLLBACK leaves the connection's state unknown: it goes
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
