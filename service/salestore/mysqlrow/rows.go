// Package mysqlrow is the rows of the sale store's MySQL form below
// database/sql: an order's row in one table of its columns, from which its
// statements and the reading of a row are made, and the reading of a
// multi-statement's result sets, value by value.
package mysqlrow

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Reading the MySQL form's multi-statement results on the driver
// connection, below database/sql (which reads one result set a query's
// rows at a time, but cannot hand over mysql.Result's per-statement
// counts): each value as the driver gives it, text or a number, a time
// with parseTime.

// EachRow calls f with every row of rows' current result set, which must
// have width columns. The values are the driver's, valid until f returns.
func EachRow(rows driver.Rows, width int, f func([]driver.Value) error) error {
	if got := len(rows.Columns()); got != width {
		return fmt.Errorf("a result of %d columns; want %d", got, width)
	}
	dest := make([]driver.Value, width)
	for {
		err := rows.Next(dest)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(dest); err != nil {
			return err
		}
	}
}

// NextRows moves rows to its next result set and reads it (EachRow).
func NextRows(rows driver.RowsNextResultSet, width int, f func([]driver.Value) error) error {
	if err := rows.NextResultSet(); err != nil {
		return err
	}
	return EachRow(rows, width, f)
}

// ScanInts reads vs as whole numbers into dest, in order.
func ScanInts(vs []driver.Value, dest ...*int64) error {
	for i, d := range dest {
		switch v := vs[i].(type) {
		case int64:
			*d = v
		case uint64: // an unsigned value, as the driver reads one (a system variable's)
			if v > math.MaxInt64 {
				return fmt.Errorf("column %d: %d is out of range", i+1, v)
			}
			*d = int64(v)
		case []byte:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return fmt.Errorf("column %d: %w", i+1, err)
			}
			*d = n
		default:
			return fmt.Errorf("column %d: a value of type %T, not a number", i+1, v)
		}
	}
	return nil
}

// AsString is a text value, copied: the driver reuses its buffer.
func AsString(v driver.Value) string {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case string:
		return v
	}
	return fmt.Sprint(v)
}
