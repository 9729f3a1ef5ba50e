package mysqlrow

import (
	"database/sql/driver"
	"reflect"
	"testing"
	"time"

	"github.com/seckill/seckill/model"
)

// TestOrderStatements: the statements made from the table of an order's
// columns are those the MySQL form sends, each column once and in one
// order, the one-trip INSERT taking its remaining stock from
// LAST_INSERT_ID().
func TestOrderStatements(t *testing.T) {
	got := NewStatements()
	want := Statements{
		Insert: "INSERT INTO orders (product_id, user_id, quantity, request_id, strategy, remaining_stock, created_at, status, expires_at) VALUES ",
		Width:  9,
		OneTrip: "INSERT INTO orders (product_id, user_id, quantity, request_id, strategy, remaining_stock, created_at, status, expires_at) VALUES " +
			"(?, ?, ?, ?, ?, LAST_INSERT_ID(), ?, ?, ?)",
		Used: "SELECT id, product_id, user_id, quantity, request_id, strategy, remaining_stock, created_at, status, expires_at FROM orders WHERE request_id IN ",
	}
	if got != want {
		t.Errorf("NewStatements() =\n%+v\nwant\n%+v", got, want)
	}
}

// TestOrderRow: an order written as its arguments reads back, with its ID,
// as the same order, unpaid with its expiry or paid without; the one-trip
// arguments are the same less the remaining stock.
func TestOrderRow(t *testing.T) {
	created := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	expires := created.Add(15 * time.Minute)
	rid := model.BinaryString("r-1")
	for _, o := range []model.Order{
		{ID: 7, ProductID: 1, UserID: "u-42", Quantity: 2, RequestID: &rid, Strategy: "redlock", RemainingStock: 96,
			CreatedAt: created, Status: model.StatusUnpaid, ExpiresAt: &expires},
		{ID: 8, ProductID: 1, UserID: "u-43", Quantity: 1, RequestID: &rid, Strategy: "reserve", RemainingStock: 0,
			CreatedAt: created, Status: model.StatusPaid},
	} {
		args := Args(nil, &o, false)
		row := []driver.Value{o.ID}
		for _, a := range args {
			switch a := a.(type) {
			case string:
				row = append(row, []byte(a)) // the driver reads text as bytes
			case *time.Time:
				if a == nil {
					row = append(row, nil)
				} else {
					row = append(row, *a)
				}
			default:
				row = append(row, a)
			}
		}
		got, err := ScanOrder(row)
		if err != nil || !reflect.DeepEqual(got, o) {
			t.Errorf("ScanOrder(Args(%+v)) = %+v, %v; want it back", o, got, err)
		}
		oneTrip := Args(nil, &o, true)
		if len(oneTrip) != len(args)-1 || oneTrip[5] != args[6] {
			t.Errorf("one-trip arguments %v; want %v less the remaining stock", oneTrip, args)
		}
	}
	if _, err := ScanOrder(make([]driver.Value, 3)); err == nil {
		t.Error("ScanOrder of a row of 3 columns = nil error; want one")
	}
}
