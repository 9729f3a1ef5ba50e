package faulttest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service/reserve"
)

// TestReservePromisesOutliveTheirInstance: two instances sell one product
// under reserve on a database of the test's own. The database is frozen
// (SIGSTOP) while one instance answers 202s, and that instance is then
// SIGKILLed, its writer holding some of them: once the database goes on,
// the other instance's writer writes every promise, each once, and every
// one is found ordered. A 202 survives its instance dying and the
// database hanging.
func TestReservePromisesOutliveTheirInstance(t *testing.T) {
	t.Parallel()
	db := testenv.StartMariaDB(t)
	dsn := testenv.DatabaseDSN(t, db.DSN, "seckill")
	env := map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_LOCK": "reserve"}
	seller := start(t, env)
	writer := seller.Another(t)
	const stock, before, during = 1000, 5, 60
	id := seller.Create(t, "phone", stock)
	var promised []string
	purchase := func(i int) {
		t.Helper()
		rid := fmt.Sprint("r-", i)
		a := seller.Buy(t.Context(), id, client.Purchase{UserID: fmt.Sprint("u-", i), Quantity: 1, RequestID: rid}, client.Override{})
		if a.Status != http.StatusAccepted || a.Reservation == nil {
			t.Fatalf("purchase %s = %d %s, %v; want 202\n%s", rid, a.Status, a.Code, a.Err, seller.Out)
		}
		promised = append(promised, rid)
	}
	// The product moves into Redis while the database answers.
	for i := range before {
		purchase(i)
	}
	db.Freeze(t)
	frozen := true
	defer func() {
		if frozen {
			db.Thaw(t)
		}
	}()
	for i := before; i < before+during; i++ {
		purchase(i)
	}
	// The writers have read them and hold them, stuck on the frozen
	// database (or given up for now); then the seller dies.
	store := reserve.New(testenv.Clients(t, []string{seller.Nodes[0].Addr})[0], seller.KeyPrefix())
	held := 0
	testenv.Until(10*time.Second, func() bool {
		held = 0
		for b := range reserve.Buckets {
			n, err := store.PendingOf(t.Context(), b)
			if err != nil {
				t.Fatal(err)
			}
			held += int(n)
		}
		return held >= during
	})
	if held < during {
		t.Fatalf("%d reservations held by the writers while the database is frozen; want the %d made", held, during)
	}
	seller.Kill()
	time.Sleep(time.Second)
	db.Thaw(t)
	frozen = false

	waitOrdered(t, writer, promised)
	orders := orderRequestIDs(t, dsn, id)
	if len(orders) != len(promised) {
		t.Errorf("the database has %d orders; want one per promise, %d", len(orders), len(promised))
	}
	for _, rid := range promised {
		if !orders[rid] {
			t.Errorf("no order carries %s", rid)
		}
	}
	writer.WantConsistent(t, id)
}

// TestReserveSellsOnEveryInstanceThroughAnOutage: two instances under
// reserve on a database of the test's own; the product moves into Redis
// through one of them (its order written), then the database is frozen
// (SIGSTOP) and only the other instance, which never sold the product and
// cannot ask the database its generation, is sent purchases: each must be
// a promise (202), taken from the counter Redis holds, and every one is
// written once the database goes on, the audit consistent.
func TestReserveSellsOnEveryInstanceThroughAnOutage(t *testing.T) {
	t.Parallel()
	db := testenv.StartMariaDB(t)
	dsn := testenv.DatabaseDSN(t, db.DSN, "seckill")
	a := start(t, map[string]string{"SECKILL_MYSQL_DSN": dsn, "SECKILL_LOCK": "reserve"})
	b := a.Another(t)
	const stock, during = 500, 100
	id := a.Create(t, "phone", stock)
	buy := func(in *apptest.Program, i int) string {
		t.Helper()
		rid := fmt.Sprint("r-", i)
		got := in.Buy(t.Context(), id, client.Purchase{UserID: fmt.Sprint("u-", i), Quantity: 1, RequestID: rid}, client.Override{})
		if got.Status != http.StatusAccepted || got.Reservation == nil {
			t.Fatalf("purchase %s = %d %s, %v; want 202\n%s", rid, got.Status, got.Code, got.Err, in.Out)
		}
		return rid
	}
	promised := []string{buy(a, 0)}
	waitOrdered(t, a, promised)

	db.Freeze(t)
	frozen := true
	defer func() {
		if frozen {
			db.Thaw(t)
		}
	}()
	for i := 1; i <= during; i++ {
		promised = append(promised, buy(b, i))
	}
	db.Thaw(t)
	frozen = false
	waitOrdered(t, b, promised)
	if orders := orderRequestIDs(t, dsn, id); len(orders) != len(promised) {
		t.Errorf("the database has %d orders; want one per promise, %d", len(orders), len(promised))
	}
	b.WantConsistent(t, id)
}

// waitOrdered waits, up to 60 s, until every request ID's purchase is
// ordered (GET /api/v1/purchases/{request_id}) on in.
func waitOrdered(t *testing.T, in *apptest.Program, rids []string) {
	t.Helper()
	c := in.Client()
	for _, rid := range rids {
		var st client.PurchaseState
		if !testenv.Until(60*time.Second, func() bool {
			var err error
			st, err = c.PurchaseState(t.Context(), rid)
			return err == nil && st.State == "ordered"
		}) {
			t.Fatalf("%s after 60 s: %+v; want ordered\n%s", rid, st, in.Out)
		}
	}
}
