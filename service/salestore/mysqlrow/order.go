package mysqlrow

import (
	"database/sql/driver"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/model"
)

// An order's row as the MySQL form writes and reads it, in one table of
// its columns (orderColumns), from which its statements and the reading
// of a row are made: the INSERT of a sale's orders, that of a one-trip
// purchase, and the SELECT of the orders of request IDs.

// orderColumn is one column of the orders table: its name, the order's
// value for it as a statement's argument (nil: the database's own, the
// ID), and how a row's value reads back into the order.
type orderColumn struct {
	name  string
	value func(o *model.Order) any
	read  func(o *model.Order, v driver.Value) error
}

// Width is how many columns an order's row has.
const Width = 10

// orderColumns are the columns of an order's row, the ID first (an
// array: made on the stack, with no allocation, for every order).
func orderColumns() [Width]orderColumn {
	return [...]orderColumn{
		{"id", nil, func(o *model.Order, v driver.Value) error { return scanInt(v, &o.ID) }},
		{"product_id", func(o *model.Order) any { return o.ProductID }, func(o *model.Order, v driver.Value) error { return scanInt(v, &o.ProductID) }},
		{"user_id", func(o *model.Order) any { return string(o.UserID) }, func(o *model.Order, v driver.Value) error {
			o.UserID = model.BinaryString(AsString(v))
			return nil
		}},
		{"quantity", func(o *model.Order) any { return o.Quantity }, func(o *model.Order, v driver.Value) error { return scanInt(v, &o.Quantity) }},
		{"request_id", requestIDArg, func(o *model.Order, v driver.Value) error {
			rid := model.BinaryString(AsString(v))
			o.RequestID = &rid
			return nil
		}},
		{"strategy", func(o *model.Order) any { return o.Strategy }, func(o *model.Order, v driver.Value) error {
			o.Strategy = AsString(v)
			return nil
		}},
		{"remaining_stock", func(o *model.Order) any { return o.RemainingStock }, func(o *model.Order, v driver.Value) error {
			return scanInt(v, &o.RemainingStock)
		}},
		{"created_at", func(o *model.Order) any { return o.CreatedAt }, func(o *model.Order, v driver.Value) error {
			return scanTime(v, &o.CreatedAt)
		}},
		{"status", func(o *model.Order) any { return o.Status }, func(o *model.Order, v driver.Value) error {
			o.Status = AsString(v)
			return nil
		}},
		{"expires_at", func(o *model.Order) any { return o.ExpiresAt }, func(o *model.Order, v driver.Value) error {
			if v == nil {
				o.ExpiresAt = nil
				return nil
			}
			var t time.Time
			o.ExpiresAt = &t
			return scanTime(v, &t)
		}},
	}
}

// Statements are the statements made from orderColumns, made once
// per store.
type Statements struct {
	// insert writes orders: "INSERT INTO orders (...) VALUES ", and a row
	// of Width placeholders for each (the sale store's sqlRows). Args per row: Args.
	Insert string
	Width  int
	// oneTrip writes one order whose remaining stock is the one the
	// decrement before it left in LAST_INSERT_ID(). Args: Args
	// without the remaining stock (Args with oneTrip).
	OneTrip string
	// used reads the orders made with a list of request IDs, every column:
	// "SELECT ... FROM orders WHERE request_id IN ", then the list. Args:
	// the request IDs.
	Used string
}

// NewStatements makes the statements of orderColumns.
func NewStatements() Statements {
	var all, written, oneTrip []string
	for _, c := range orderColumns() {
		all = append(all, c.name)
		switch {
		case c.value == nil:
		case c.name == "remaining_stock":
			written, oneTrip = append(written, c.name), append(oneTrip, "LAST_INSERT_ID()")
		default:
			written, oneTrip = append(written, c.name), append(oneTrip, "?")
		}
	}
	insert := "INSERT INTO orders (" + strings.Join(written, ", ") + ") VALUES "
	return Statements{
		Insert:  insert,
		Width:   len(written),
		OneTrip: insert + "(" + strings.Join(oneTrip, ", ") + ")",
		Used:    "SELECT " + strings.Join(all, ", ") + " FROM orders WHERE request_id IN ",
	}
}

// Args appends o's values of the written columns to args, in
// orderColumns' order; without the remaining stock when oneTrip.
func Args(args []any, o *model.Order, oneTrip bool) []any {
	for _, c := range orderColumns() {
		if c.value != nil && !(oneTrip && c.name == "remaining_stock") {
			args = append(args, c.value(o))
		}
	}
	return args
}

// ScanOrder reads an order's row, its columns orderColumns.
func ScanOrder(vs []driver.Value) (model.Order, error) {
	var o model.Order
	cols := orderColumns()
	if len(vs) != len(cols) {
		return o, fmt.Errorf("an order's row of %d columns; want %d", len(vs), len(cols))
	}
	for i, c := range cols {
		if err := c.read(&o, vs[i]); err != nil {
			return o, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return o, nil
}

// requestIDArg is o's request ID as a statement's argument: NULL when it
// has none.
func requestIDArg(o *model.Order) any {
	if o.RequestID == nil {
		return nil
	}
	return string(*o.RequestID)
}

// scanInt reads v as a whole number into dest.
func scanInt(v driver.Value, dest *int64) error {
	return ScanInts([]driver.Value{v}, dest)
}

// scanTime reads v as a time into dest (the pool reads times as times:
// parseTime).
func scanTime(v driver.Value, dest *time.Time) error {
	t, ok := v.(time.Time)
	if !ok {
		return fmt.Errorf("a value of type %T, not a time (parseTime)", v)
	}
	*dest = t
	return nil
}
