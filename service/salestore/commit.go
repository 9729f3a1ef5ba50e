package salestore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	"github.com/go-sql-driver/mysql"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/salestore/mysqlrow"
)

// A sale's last trip in the MySQL form: its COMMIT, once its orders have
// their IDs, counted from what the INSERT reported or read back.

// commitCounting sends a sale's last trip, COMMIT, once it has given its
// orders their IDs from those the INSERT reported (ids: the last
// statement's is the first of its rows) and the session's step. A COMMIT
// refused with a deadlock rolled back; any other error leaves its outcome
// unknown (a *commitError).
func (m *mysqlSales) commitCounting(ctx context.Context, c conn, orders []model.Order, ids []int64, step int64) error {
	// InnoDB reserves the IDs of one multi-row INSERT (a simple insert:
	// its rows are known before it runs) in one block, stepped by the
	// session's auto_increment_increment, which the first trip read: the
	// IDs are the first the INSERT reports, then one step apart (checked
	// on MariaDB in the interleaved lock mode, TestBatchOrderIDs; MySQL's
	// manual promises it only while no bulk insert runs at once, and no
	// statement of this service is one). A Galera node, whose step changes
	// with the cluster's size, takes the portable form, which reads them
	// back.
	first := ids[len(ids)-1]
	for i := range orders {
		orders[i].ID = first + int64(i)*step
	}
	if _, err := c.ExecContext(ctx, stmtCommit, nil); err != nil {
		err = fmt.Errorf("commit %d orders of product %d: %w", len(orders), orders[0].ProductID, err)
		if IsDeadlock(err) {
			// The server's word that it rolled back (a write conflict found
			// at COMMIT): the sale decides again.
			return err
		}
		return fmt.Errorf("%w (%w)", &commitError{err: err}, driver.ErrBadConn)
	}
	return nil
}

// commitReadingIDs sends a sale's last trip where the server may leave
// gaps between the IDs of one multi-row INSERT (TiDB allocates them from
// caches of its own): the IDs of its orders, read back by request ID, then
// COMMIT. An error after the trip was sent is a *commitError, unless the
// server refused the read (it then ran no COMMIT).
func (m *mysqlSales) commitReadingIDs(ctx context.Context, c conn, orders []model.Order, _ []int64, _ int64) (err error) {
	query, args := stmtOrderIDs+sqlList(len(orders))+"; "+stmtCommit, make([]any, len(orders))
	for i := range orders {
		if orders[i].RequestID == nil {
			return errors.Join(fmt.Errorf("order %d of %d has no request ID to read its ID by", i+1, len(orders)), rollback(ctx, c))
		}
		args[i] = string(*orders[i].RequestID)
	}
	named, err := namedValues(args)
	if err != nil {
		return errors.Join(fmt.Errorf("read %d order IDs: %w", len(orders), err), rollback(ctx, c))
	}
	unknown := func(err error) error {
		cerr := &commitError{err: fmt.Errorf("commit %d orders of product %d: %w", len(orders), orders[0].ProductID, err)}
		return fmt.Errorf("%w (%w)", cerr, driver.ErrBadConn)
	}
	rows, err := c.QueryContext(ctx, query, named)
	var refused *mysql.MySQLError
	switch {
	case errors.As(err, &refused):
		return errors.Join(fmt.Errorf("read %d order IDs: %w", len(orders), err), rollback(ctx, c))
	case err != nil:
		return unknown(err)
	}
	ids := make(map[string]int64, len(orders))
	err = mysqlrow.EachRow(rows, 2, func(v []driver.Value) error {
		var id int64
		err := mysqlrow.ScanInts(v, &id)
		ids[mysqlrow.AsString(v[1])] = id
		return err
	})
	if err == nil {
		err = committed(rows)
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	switch {
	case IsDeadlock(err):
		// The server's word that the COMMIT rolled back.
		return fmt.Errorf("commit %d orders of product %d: %w", len(orders), orders[0].ProductID, err)
	case err != nil:
		return unknown(err)
	}
	for i := range orders {
		id, found := ids[string(*orders[i].RequestID)]
		if !found {
			// Committed, but an order's ID is not known: the sale is
			// settled as a COMMIT whose outcome is unknown is.
			return unknown(fmt.Errorf("order %q not read back", *orders[i].RequestID))
		}
		orders[i].ID = id
	}
	return nil
}

// committed reads the COMMIT's answer after the read-back's rows: nil
// when it took.
func committed(rows driver.Rows) error {
	next, isMulti := rows.(driver.RowsNextResultSet)
	if !isMulti {
		return fmt.Errorf("rows of type %T have one result set", rows)
	}
	if err := next.NextResultSet(); !errors.Is(err, io.EOF) {
		if err == nil {
			return errors.New("a result set after COMMIT")
		}
		return err
	}
	return nil
}
