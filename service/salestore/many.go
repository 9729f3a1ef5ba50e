package salestore

import (
	"cmp"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/metrics"
	"github.com/seckill/seckill/service/salestore/mysqlrow"
	"github.com/seckill/seckill/service/stockcache"
)

// A sale of many products in one transaction (SellMany): what the
// reserve writers write, a catalogue's reservations spread over many
// products, most of them cold. A transaction per product costs each its
// three round trips and its COMMIT, whose flush of the log the database
// does only so many times a second; one for many products costs three in
// all. In the MySQL form:
//
//  1. START TRANSACTION; every product's row under its lock, in ascending
//     id order (one SELECT ... WHERE id IN (...) ORDER BY id FOR UPDATE,
//     so that two sales of many never wait on each other in a cycle); the
//     orders of every request ID; the units the buyers hold of each
//     product;
//  2. once the rule has decided each product's purchases: one UPDATE of
//     every product's stock, one upsert of the buyers' units, one INSERT
//     of every order;
//  3. COMMIT.

// Part is one product's share of a sale of many: its purchases in line
// order, which carry request IDs (parts that share one, or a product, are
// sold each in a transaction of its own), the generation of reserve's
// reservations they are (Read.ReserveGen: the only read a sale of many
// takes; the stock is the one read under the row lock), and the rule.
type Part struct {
	Purchases []Purchase
	Gen       int64
	Decide    DecideFunc
}

// sellManyParts is the most products one sale of many takes.
const sellManyParts = 256

// sellManyAlone sells each part in a transaction of its own: the form of
// a store without a sale of many.
func sellManyAlone(ctx context.Context, s Store, parts []Part) ([]Sale, []error, error) {
	sales, errs := make([]Sale, len(parts)), make([]error, len(parts))
	for i, p := range parts {
		sales[i], errs[i] = s.Sell(ctx, p.Purchases, Read{ReserveGen: &p.Gen}, p.Decide)
	}
	return sales, errs, nil
}

// SellMany on the portable form sells each part alone.
func (q *sqlSales) SellMany(ctx context.Context, parts []Part) ([]Sale, []error, error) {
	return sellManyAlone(ctx, q, parts)
}

// SellMany sells the parts, each of a product of its own, in one
// transaction (see above), trying again as Sell does what deciding again
// fixes. A COMMIT whose outcome is unknown is an outcome_unknown error:
// every part's request IDs say, when sold again, what it wrote.
func (m *mysqlSales) SellMany(ctx context.Context, parts []Part) ([]Sale, []error, error) {
	switch {
	case len(parts) == 0:
		return nil, nil, nil
	case len(parts) == 1 || len(parts) > sellManyParts:
		return sellManyAlone(ctx, m, parts)
	}
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Compare(parts[a].Purchases[0].ProductID, parts[b].Purchases[0].ProductID)
	})
	if !apart(parts, order) {
		return sellManyAlone(ctx, m, parts)
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.DBTimeout)
	defer cancel()
	deadlocks, others := 0, 0
	for {
		sales, errs, err := m.sellManyOnce(ctx, parts, order)
		switch {
		case err == nil:
			return sales, errs, nil
		case uncommitted(err):
			return nil, nil, failure.ErrOutcomeUnknown.Because(fmt.Errorf("sell %d products at once: %w", len(parts), err))
		case !retryable(err) || ctx.Err() != nil:
			return nil, nil, err
		case IsDeadlock(err):
			deadlocks++
			if werr := deadlockPause(ctx, deadlocks); werr != nil {
				return nil, nil, errors.Join(err, werr)
			}
			m.cfg.retry(metrics.RetryDeadlock)
			continue
		}
		if others++; others >= MaxAttempts {
			return nil, nil, err
		}
		if errors.Is(err, errConnLost) {
			m.cfg.retry(metrics.RetryConnLost)
		} else {
			m.cfg.retry(metrics.RetryRequestID)
		}
	}
}

// apart says no two parts (listed in order, by product ID) are of one
// product or share a request ID: one transaction takes a product's row
// once and writes a request ID once, and the rule of each part sees only
// the orders written before it began.
func apart(parts []Part, order []int) bool {
	ids := map[string]bool{}
	for k, i := range order {
		if k > 0 && parts[i].Purchases[0].ProductID == parts[order[k-1]].Purchases[0].ProductID {
			return false
		}
		for _, p := range parts[i].Purchases {
			if p.RequestID == "" {
				return false
			}
			if ids[p.RequestID] {
				return false // another part's
			}
		}
		for _, p := range parts[i].Purchases {
			ids[p.RequestID] = true
		}
	}
	return true
}

// sellManyOnce is one transaction of a sale of many, on a connection of
// its own; order lists the parts by product ID.
func (m *mysqlSales) sellManyOnce(ctx context.Context, parts []Part, order []int) (sales []Sale, errs []error, err error) {
	err = m.onConn(ctx, func(c conn) error {
		sales, errs, err = m.sellManyOn(ctx, c, parts, order)
		return err
	})
	var my *mysql.MySQLError
	var answer *failure.Error
	if err == nil || uncommitted(err) || ctx.Err() != nil || errors.As(err, &my) || errors.As(err, &answer) || !connLost(err) {
		return sales, errs, err
	}
	return nil, nil, fmt.Errorf("%w: %w", errConnLost, err)
}

// manyRead is what a sale of many read under its rows' locks.
type manyRead struct {
	rows  map[int64]saleRead
	used  map[string]model.Order
	units map[int64]map[string]int64
	step  int64
}

// sellManyOn is sellManyOnce on the driver connection c.
func (m *mysqlSales) sellManyOn(ctx context.Context, c conn, parts []Part, order []int) ([]Sale, []error, error) {
	read, err := m.readMany(ctx, c, parts, order)
	if err != nil {
		return nil, nil, errors.Join(err, rollback(ctx, c))
	}
	sales, errs := make([]Sale, len(parts)), make([]error, len(parts))
	var selling []int // the parts that write, by product ID
	for _, i := range order {
		p := parts[i]
		id := p.Purchases[0].ProductID
		row, found := read.rows[id]
		if !found {
			errs[i] = failure.NotFound(id)
			continue
		}
		if errs[i] = (Read{ReserveGen: &p.Gen}).owner(id, row.generation, row.reserve != 0); errs[i] != nil {
			continue
		}
		d := p.Decide(row.stock, nil, usedBy(p.Purchases, read.used), read.units[id])
		d.afterWrite(row.stock, false)
		d.Read = stockcache.Version{Gen: row.generation, Returns: row.returns}
		sales[i] = d
		if len(d.Orders) > 0 {
			selling = append(selling, i)
		}
	}
	if len(selling) == 0 {
		return sales, errs, rollback(ctx, c)
	}
	query, args, orders := m.manyStatements(parts, sales, selling)
	named, err := namedValues(args)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("sell %d products: %w", len(selling), err), rollback(ctx, c))
	}
	res, err := c.ExecContext(ctx, query, named)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("write the orders of %d products: %w", len(selling), err), rollback(ctx, c))
	}
	rows, isResult := res.(mysql.Result)
	if !isResult || !wroteMany(rows, len(selling), len(orders)) {
		return nil, nil, errors.Join(fmt.Errorf("write the orders of %d products: not the results a sale of many makes", len(selling)), rollback(ctx, c))
	}
	commit := m.commitCounting
	if m.cfg.ReadBackIDs {
		commit = m.commitReadingIDs
	}
	if err := commit(ctx, c, orders, rows.AllLastInsertIds(), read.step); err != nil {
		return nil, nil, err
	}
	k := 0
	for _, i := range selling {
		d := &sales[i]
		k += copy(d.Orders, orders[k:k+len(d.Orders)])
		d.finish()
	}
	return sales, errs, nil
}

// usedBy are the orders of used made with the request IDs of ps: what a
// part's rule needs of them.
func usedBy(ps []Purchase, used map[string]model.Order) map[string]model.Order {
	out := map[string]model.Order{}
	for _, p := range ps {
		if o, ok := used[p.RequestID]; ok {
			out[p.RequestID] = o
		}
	}
	return out
}

// readMany sends a sale of many's first trip: START TRANSACTION and its
// reads. A product that is not there is left out of read.rows.
func (m *mysqlSales) readMany(ctx context.Context, c conn, parts []Part, order []int) (read manyRead, err error) {
	read = manyRead{rows: map[int64]saleRead{}, used: map[string]model.Order{}, units: map[int64]map[string]int64{}}
	var b strings.Builder
	var args, ids, pairs []any
	for _, i := range order {
		p := parts[i]
		args = append(args, p.Purchases[0].ProductID)
		read.units[p.Purchases[0].ProductID] = map[string]int64{}
		for _, q := range p.Purchases {
			ids = append(ids, q.RequestID)
			pairs = append(pairs, q.ProductID, q.UserID)
		}
	}
	b.WriteString(stmtBegin + "; " + stmtProductsForUpdate + sqlList(len(order)) + stmtProductsForUpdateOrder)
	b.WriteString("; " + m.orders.Used + sqlList(len(ids)))
	args = append(args, ids...)
	if m.cfg.Limit > 0 {
		b.WriteString("; " + stmtUnitsHeldOf + sqlRows(len(pairs)/2, 2) + ")")
		if m.cfg.LockingReads {
			b.WriteString(" FOR UPDATE")
		}
		args = append(args, pairs...)
	}
	b.WriteString("; " + stmtIncrement)
	named, err := namedValues(args)
	if err != nil {
		return read, fmt.Errorf("read a sale of %d products: %w", len(parts), err)
	}
	rows, err := c.QueryContext(ctx, b.String(), named)
	if err != nil {
		return read, fmt.Errorf("read a sale of %d products: %w", len(parts), err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("read a sale of %d products: %w", len(parts), cerr))
		}
	}()
	next, isMulti := rows.(driver.RowsNextResultSet)
	if !isMulti {
		return read, fmt.Errorf("read a sale of %d products: rows of type %T have one result set", len(parts), rows)
	}
	err = mysqlrow.EachRow(rows, 6, func(v []driver.Value) error {
		var id int64
		r := saleRead{found: true}
		err := mysqlrow.ScanInts(v, &id, &r.stock, &r.fence, &r.generation, &r.returns, &r.reserve)
		read.rows[id] = r
		return err
	})
	if err != nil {
		return read, fmt.Errorf("the stock of %d products: %w", len(parts), err)
	}
	if err := nextUsed(next, read.used); err != nil {
		return read, err
	}
	if m.cfg.Limit > 0 {
		err := mysqlrow.NextRows(next, 3, func(v []driver.Value) error {
			var product, units int64
			err := mysqlrow.ScanInts([]driver.Value{v[0], v[2]}, &product, &units)
			if held := read.units[product]; held != nil {
				held[mysqlrow.AsString(v[1])] = units
			}
			return err
		})
		if err != nil {
			return read, fmt.Errorf("the units users hold: %w", err)
		}
	}
	err = mysqlrow.NextRows(next, 1, func(v []driver.Value) error { return mysqlrow.ScanInts(v, &read.step) })
	switch {
	case err != nil:
		return read, fmt.Errorf("the auto_increment_increment of the session: %w", err)
	case read.step < 1:
		return read, fmt.Errorf("the session's auto_increment_increment is %d", read.step)
	}
	return read, nil
}

// manyStatements is a sale of many's second trip and its arguments: one
// UPDATE of the selling products' stock, one upsert of their buyers' units
// (under a limit), one INSERT of their orders; and the orders, in the
// INSERT's order.
func (m *mysqlSales) manyStatements(parts []Part, sales []Sale, selling []int) (string, []any, []model.Order) {
	var b strings.Builder
	var args, in []any
	b.WriteString(stmtManyDecrement)
	for _, i := range selling {
		id := parts[i].Purchases[0].ProductID
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, id, sales[i].Total)
		in = append(in, id)
	}
	b.WriteString(stmtManyDecrementWhere + sqlList(len(in)))
	args = append(args, time.Now())
	args = append(args, in...)
	if m.cfg.Limit > 0 {
		n := 0
		for _, i := range selling {
			id := parts[i].Purchases[0].ProductID
			for _, user := range sales[i].soldUsers(parts[i].Purchases) {
				args = append(args, id, user, sales[i].Units[user])
				n++
			}
		}
		b.WriteString("; " + stmtSetUnits + sqlRows(n, 3) + stmtSetUnitsUpdate)
	}
	var orders []model.Order
	now := m.db.NowFunc()
	for _, i := range selling {
		for k := range sales[i].Orders {
			o := &sales[i].Orders[k]
			m.cfg.openOrder(o, now)
			args = mysqlrow.Args(args, o, false)
			orders = append(orders, *o)
		}
	}
	b.WriteString("; " + m.orders.Insert + sqlRows(len(orders), m.orders.Width))
	return b.String(), args, orders
}

// wroteMany says a sale of many's second trip did what it needs: the
// UPDATE changed every selling product's row, and every order was
// written.
func wroteMany(r mysql.Result, products, orders int) bool {
	rows, ids := r.AllRowsAffected(), r.AllLastInsertIds()
	return len(rows) >= 2 && len(ids) == len(rows) && rows[0] == int64(products) && rows[len(rows)-1] == int64(orders)
}
