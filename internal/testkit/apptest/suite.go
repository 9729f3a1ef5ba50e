package apptest

import (
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/history"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// The checks every database the service supports passes, run by the tests
// of each (TiDB, a Galera Cluster) over instances of one sale.

// SellEverySafe sells one product from both instances under each of the
// safe strategies given (SafeStrategies: every one) in turn, with the batch given (an override), and checks the audits, the
// database and the history.
func SellEverySafe(t *testing.T, a, b *Instance, batch int, safeStrategies []string) {
	const stock, requests = 30, 90
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{a.URL, b.URL}, AdminToken: a.AdminToken, Stock: stock,
		Strategies: safeStrategies, Requests: requests, Concurrency: 12, Batch: batch, History: path,
	})
	if err != nil {
		t.Fatalf("driver.Run = %v", err)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("Failures() = %q; want none", f)
	}
	if len(rep.Results) != len(safeStrategies) {
		t.Fatalf("%d results; want one per strategy of %v", len(rep.Results), safeStrategies)
	}
	for i, res := range rep.Results {
		if res.Strategy != safeStrategies[i] || !res.Safe {
			t.Errorf("result %d is %q (safe %t); want %q, safe", i, res.Strategy, res.Safe, safeStrategies[i])
		}
		if res.Requests != requests || res.Successes != stock || res.Outcomes[report.OutcomeSoldOut] != requests-stock {
			t.Errorf("%s: %d requests, %d sold, outcomes %v, codes %v; want %d requests, %d sold, the rest sold_out",
				res.Strategy, res.Requests, res.Successes, res.Outcomes, res.Codes, requests, stock)
		}
		au := res.Audit
		if !au.Held() || au.Stock != 0 || au.UnitsSold != stock || au.Orders != stock || au.OversoldUnits != 0 || !res.CountsAgree {
			t.Errorf("%s: audit %+v, counts agree %t; want every one of %d units sold once, stock 0", res.Strategy, au, res.CountsAgree, stock)
		}
		if h := res.History; h == nil || !h.Checked || !h.Linearizable || h.UndersoldAnswers != 0 {
			t.Errorf("%s: history verdict %+v; want checked, linearizable, no undersold answer", res.Strategy, h)
		}
		if len(res.Instances) != 2 || res.Instances[0].Requests == 0 || res.Instances[1].Requests == 0 {
			t.Errorf("%s: instances %+v; want both to serve requests", res.Strategy, res.Instances)
		}
	}
	// The last run's figures, read from the database itself.
	last := rep.Results[len(rep.Results)-1]
	orders, units, left := dbFigures(t, a, rep.Config.ProductID)
	if orders != stock || units != stock || left != 0 || orders != last.Audit.Orders {
		t.Errorf("the database holds %d orders of %d units, stock %d; want %d, %d, 0 (audit %+v)", orders, units, left, stock, stock, last.Audit)
	}
	// The whole history, every run of this batch, checked again from the file.
	lines, err := history.ReadFile(path)
	if err != nil {
		t.Fatalf("history.ReadFile = %v", err)
	}
	verdict, err := history.Check(lines)
	if err != nil {
		t.Fatalf("history.Check = %v", err)
	}
	if !verdict.Linearizable || verdict.Purchases != requests*len(safeStrategies) || verdict.Segments != len(safeStrategies) {
		t.Errorf("history.Check = %s; want linearizable, %d purchases in %d segments", verdict, requests*len(safeStrategies), len(safeStrategies))
	}
}

// dbFigures reads what the database holds for a product: its orders, the units
// they sold and its stock.
func dbFigures(t *testing.T, in *Instance, id int64) (orders, units, stock int64) {
	t.Helper()
	db := in.Stores.DB.WithContext(t.Context())
	row := struct{ Orders, Units int64 }{}
	if err := db.Raw("SELECT COUNT(*) AS orders, COALESCE(SUM(quantity), 0) AS units FROM orders WHERE product_id = ?", id).Scan(&row).Error; err != nil {
		t.Fatalf("count orders: %v", err)
	}
	if err := db.Raw("SELECT stock FROM products WHERE id = ?", id).Scan(&stock).Error; err != nil {
		t.Fatalf("read product: %v", err)
	}
	return row.Orders, row.Units, stock
}

// ReplayAndLimit buys under each safe strategy on one instance, replays
// the request on the other, asks the other what became of it (GET
// /purchases) and buys again as the same user.
func ReplayAndLimit(t *testing.T, a, b *Instance) {
	const stock = 10
	id := a.Create(t, "replay and limit", stock)
	safeStrategies := SafeStrategies()
	for i, st := range safeStrategies {
		user, rid := "u-"+st, testenv.RandomName("r-"+st+"-")
		o := client.Override{Strategy: st}
		first := a.Buy(t.Context(), id, client.Purchase{UserID: user, Quantity: 1, RequestID: rid}, o)
		if first.Status != http.StatusCreated || first.Err != nil || first.Order.RemainingStock != int64(stock-i-1) || first.Order.Strategy != st {
			t.Fatalf("%s: first purchase = %d %v %+v; want 201 leaving %d", st, first.Status, first.Err, first.Order, stock-i-1)
		}
		replay := b.Buy(t.Context(), id, client.Purchase{UserID: user, Quantity: 1, RequestID: rid}, o)
		if replay.Status != http.StatusOK || replay.Err != nil || !reflect.DeepEqual(replay.Order, first.Order) {
			t.Errorf("%s: replay on the other instance = %d %v %+v; want 200 with the first order %+v", st, replay.Status, replay.Err, replay.Order, first.Order)
		}
		state, err := b.Client().PurchaseState(t.Context(), rid)
		if err != nil || state.State != "ordered" || state.Order == nil || !reflect.DeepEqual(*state.Order, first.Order) {
			t.Errorf("%s: GET /purchases/%s on the other instance = %+v, %v; want ordered, the first order %+v", st, rid, state, err, first.Order)
		}
		for _, in := range []*Instance{a, b} {
			again := in.Buy(t.Context(), id, client.Purchase{UserID: user, Quantity: 1, RequestID: testenv.RandomName("r-")}, o)
			if again.Status != http.StatusConflict || again.Code != "limit_exceeded" {
				t.Errorf("%s: second purchase of %s = %d %q %+v; want 409 limit_exceeded", st, user, again.Status, again.Code, again.Order)
			}
		}
	}
	au := a.Audit(t, id)
	n := int64(len(safeStrategies))
	if !au.Held() || au.Orders != n || au.UnitsSold != n || au.Stock != stock-n {
		t.Errorf("audit %+v; want %d orders of one unit, %d left", au, n, stock-n)
	}
}

// OrderLife runs an order's life across instances of one sale: orders of
// c, whose payment timeout is short (1s), are paid on a, cancelled on b or
// left to expire, each unit back once, swept by all three; then a sale on a
// and b under each of strategies, whose driver cancels a third of the
// orders as it goes, is linearizable, every cancelled unit back in the
// audit.
func OrderLife(t *testing.T, a, b, c *Instance, strategies []string) {
	const stock = 6
	id := c.Create(t, "order life", stock)
	var orders []client.Order
	for i := range stock {
		got := c.Buy(t.Context(), id, client.Purchase{UserID: fmt.Sprintf("u-%d", i), Quantity: 1}, client.Override{})
		if got.Status != http.StatusCreated || got.Order.Status != "unpaid" {
			t.Fatalf("purchase %d = %d %v %+v; want 201, unpaid", i, got.Status, got.Err, got.Order)
		}
		orders = append(orders, got.Order)
	}
	for i, o := range orders[:2] {
		if paid, err := a.Client().Pay(t.Context(), o.OrderID, o.UserID); err != nil || paid.Status != "paid" {
			t.Errorf("pay order %d on another instance = %+v, %v; want paid", i, paid, err)
		}
	}
	if got, err := b.Client().Cancel(t.Context(), orders[2].OrderID, orders[2].UserID); err != nil || got.Status != "cancelled" {
		t.Errorf("cancel on a third instance = %+v, %v; want cancelled", got, err)
	}
	var au client.Audit
	testenv.Until(15*time.Second, func() bool {
		au = a.Audit(t, id)
		return au.UnitsReturned == stock-2
	})
	if !au.Held() || au.UnitsReturned != stock-2 || au.UnitsSold != 2 || au.Stock != stock-2 {
		t.Errorf("audit after the expiries = %+v; want 2 sold (paid), %d returned and back in stock", au, stock-2)
	}

	path := filepath.Join(t.TempDir(), "history.jsonl")
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{a.URL, b.URL}, AdminToken: a.AdminToken, Stock: 20, Cancel: 1.0 / 3,
		Strategies: strategies, Requests: 90, Concurrency: 12, History: path,
	})
	if err != nil {
		t.Fatalf("driver.Run = %v", err)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("Failures() = %q; want none", f)
	}
	for _, res := range rep.Results {
		if h := res.History; h == nil || !h.Linearizable || res.Cancels == nil || int64(res.Cancels.Returned) != res.Audit.UnitsReturned {
			t.Errorf("%s: history %+v, cancels %+v, audit %+v; want linearizable, every cancel's units returned", res.Strategy, h, res.Cancels, res.Audit)
		}
	}
}
