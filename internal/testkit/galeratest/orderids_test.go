package galeratest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service"
)

// TestOrderIDsStepped runs every strategy on a MariaDB of the test's own
// that steps its IDs by 3 from 2, as a three-node Galera Cluster's second
// node does (auto_increment_increment, auto_increment_offset), in the
// interleaved lock mode Galera runs: 60 buyers of 40 units, each with a
// request ID of its own, over two instances, and every order_id answered
// (201, the replay's 200 on the other instance, GET /purchases) must be the
// row of that very purchase.
func TestOrderIDsStepped(t *testing.T) {
	server := testenv.StartMariaDB(t, "--auto-increment-increment=3", "--auto-increment-offset=2", "--innodb-autoinc-lock-mode=2")
	dsn := testenv.DatabaseDSN(t, server.DSN, testenv.RandomName("seckill_test_"))
	a := apptest.Start(t, map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_LOCK_WAIT": "30s"})
	b := a.Another(t)
	for _, st := range service.StrategyNames() {
		t.Run(st, func(t *testing.T) { checkOrderIDs(t, st, a, b) })
	}
}

// checkOrderIDs sells a product under st from both instances and checks
// every order_id answered against the database.
func checkOrderIDs(t *testing.T, st string, a, b *apptest.Instance) {
	const stock, buyers, concurrency = 40, 60, 12
	id := a.Create(t, "stepped IDs "+st, stock)
	ins := []*apptest.Instance{a, b}
	answers := make([]apptest.Answer, buyers)
	var wg sync.WaitGroup
	work := make(chan int)
	for range concurrency {
		wg.Go(func() {
			for i := range work {
				p := client.Purchase{UserID: fmt.Sprintf("u-%d", i), Quantity: 1, RequestID: testenv.RandomName("r-" + st + "-")}
				answers[i] = ins[i%2].Buy(t.Context(), id, p, client.Override{Strategy: st})
			}
		})
	}
	for i := range buyers {
		work <- i
	}
	close(work)
	wg.Wait()

	// Every answer's order first (under reserve, once its reservation is
	// written), then the rows: a reservation's row is there only then.
	orders := make([]client.Order, len(answers))
	made := make([]bool, len(answers))
	for i, got := range answers {
		orders[i], made[i] = answered(t, ins[i%2], got)
	}
	rows := ordersByID(t, a, id)
	sold := 0
	for i, got := range answers {
		order, ok := orders[i], made[i]
		if !ok {
			continue
		}
		sold++
		wantRow(t, "answer", rows, got.Purchase.RequestID, order)
		if order.RemainingStock < 0 {
			// An unsafe strategy's oversold order: a replay may meet the
			// stock cache's list of the product's orders, read when it
			// reached zero, before this one came.
			continue
		}
		replay := ins[(i+1)%2].Buy(t.Context(), id, got.Purchase, client.Override{Strategy: st})
		if replay.Status != http.StatusOK || replay.Err != nil || !reflect.DeepEqual(replay.Order, order) {
			t.Errorf("replay of %s on the other instance = %d %v %+v; want 200 with %+v", got.Purchase.RequestID, replay.Status, replay.Err, replay.Order, order)
		}
		state, err := ins[(i+1)%2].Client().PurchaseState(t.Context(), got.Purchase.RequestID)
		if err != nil || state.State != "ordered" || state.Order == nil || !reflect.DeepEqual(*state.Order, order) {
			t.Errorf("GET /purchases/%s = %+v, %v; want ordered, %+v", got.Purchase.RequestID, state, err, order)
		}
	}
	if strategy, _ := service.LookupStrategy(st); sold == 0 || (strategy.Safe && sold != stock) {
		t.Errorf("%d of %d buyers sold to; want %d (and any, unsafe)", sold, buyers, stock)
	}
	if len(rows) < sold {
		t.Errorf("%d orders in the database; want at least the %d answered", len(rows), sold)
	}
}

// answered is the order a purchase's answer names: a 201's, or under
// reserve the order its reservation became, read from GET /purchases.
// Refusals and sold-out answers name none.
func answered(t *testing.T, in *apptest.Instance, got apptest.Answer) (client.Order, bool) {
	t.Helper()
	switch {
	case got.Status == http.StatusCreated && got.Err == nil:
		return got.Order, true
	case got.Status == http.StatusAccepted && got.Err == nil:
		var state client.PurchaseState
		written := testenv.Until(30*time.Second, func() bool {
			var err error
			state, err = in.Client().PurchaseState(t.Context(), got.Purchase.RequestID)
			return err == nil && state.State == "ordered" && state.Order != nil
		})
		if !written {
			t.Errorf("reservation %s was not written within 30s: %+v", got.Purchase.RequestID, state)
			return client.Order{}, false
		}
		return *state.Order, true
	case got.Code == "sold_out":
		return client.Order{}, false
	}
	t.Errorf("purchase %s = %d %q %v; want 201, 202 or 409 sold_out", got.Purchase.RequestID, got.Status, got.Code, got.Err)
	return client.Order{}, false
}

// orderRow is what the database holds of an order.
type orderRow struct {
	ID                int64
	RequestID, UserID string
	ProductID         int64
	Quantity          int64
}

// ordersByID reads every order of product id, by order ID.
func ordersByID(t *testing.T, in *apptest.Instance, id int64) map[int64]orderRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var rows []orderRow
	err := in.Stores.DB.WithContext(ctx).Raw("SELECT id, request_id, user_id, product_id, quantity FROM orders WHERE product_id = ?", id).Scan(&rows).Error
	if err != nil {
		t.Fatalf("read the orders of product %d: %v", id, errors.Join(err, ctx.Err()))
	}
	byID := make(map[int64]orderRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	return byID
}

// wantRow checks that order, answered to the purchase with requestID, is
// that purchase's row.
func wantRow(t *testing.T, what string, rows map[int64]orderRow, requestID string, order client.Order) {
	t.Helper()
	row, found := rows[order.OrderID]
	want := orderRow{ID: order.OrderID, RequestID: requestID, UserID: order.UserID, ProductID: order.ProductID, Quantity: order.Quantity}
	switch {
	case order.RequestID == nil || *order.RequestID != requestID:
		t.Errorf("%s to %s names request ID %v", what, requestID, order.RequestID)
	case !found:
		t.Errorf("%s to %s names order %d, which is no row", what, requestID, order.OrderID)
	case row != want:
		t.Errorf("%s to %s names order %d, whose row is %+v; want %+v", what, requestID, order.OrderID, row, want)
	}
}
