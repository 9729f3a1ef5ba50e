package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

func TestHealthzAndReadyz(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)

	r := in.Get(t, "/healthz")
	if r.Status != http.StatusOK {
		t.Errorf("GET /healthz = %v; want 200", r)
	}
	var health map[string]any
	if err := json.Unmarshal(r.Body, &health); err != nil || len(health) != 1 || health["status"] != "ok" {
		t.Errorf("GET /healthz body = %s; want {\"status\":\"ok\"}", r.Body)
	}

	if r := in.Get(t, "/readyz"); r.Status != http.StatusOK {
		t.Errorf("GET /readyz = %v; want 200", r)
	}
}

// TestReadyzNeedsARedisMajority runs an instance on three Redis nodes of its
// own and stops them one by one.
func TestReadyzNeedsARedisMajority(t *testing.T) {
	t.Parallel()
	nodes, addrs := testenv.StartRedisNodes(t, 3)
	in := apptest.Start(t, map[string]string{
		"SECKILL_REDIS_ADDRS":    strings.Join(addrs, ","),
		"SECKILL_LOCK_WAIT":      "300ms",
		"SECKILL_PER_USER_LIMIT": "0",
	})
	id := in.Create(t, "phone", 100)

	if r := in.Get(t, "/readyz"); r.Status != http.StatusOK {
		t.Fatalf("GET /readyz with 3 of 3 nodes = %v; want 200", r)
	}
	nodes[0].Stop()
	if r := in.Get(t, "/readyz"); r.Status != http.StatusOK {
		t.Errorf("GET /readyz with 2 of 3 nodes = %v; want 200", r)
	}
	nodes[1].Stop()
	wantReadyzRedisDown(t, in.Get(t, "/readyz"), nodes)
	// The HTTP layer and the database are unaffected.
	if r := in.Get(t, "/healthz"); r.Status != http.StatusOK {
		t.Errorf("GET /healthz with Redis down = %v; want 200", r)
	}
	wantOnlyRedisLocksUnavailable(t, in, id)
}

// wantReadyzRedisDown checks r, the answer of GET /readyz with 1 of the 3
// Redis nodes up: a 503 that names redis as down, with the error body, and
// no node's address.
func wantReadyzRedisDown(t *testing.T, r apptest.Response, nodes []*testenv.Redis) {
	t.Helper()
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("GET /readyz with 1 of 3 nodes = %v; want 503", r)
	}
	var body struct {
		Down  string `json:"down"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("GET /readyz body %s: %v", r.Body, err)
	}
	if body.Down != "redis" || body.Error.Code != "unavailable" || !strings.Contains(body.Error.Message, "redis") {
		t.Errorf("GET /readyz body = %s; want it to name redis as down, with the error body", r.Body)
	}
	for _, n := range nodes {
		if strings.Contains(string(r.Body), n.Addr) {
			t.Errorf("GET /readyz body = %s; want no node address in it", r.Body)
		}
	}
}

// wantOnlyRedisLocksUnavailable buys product id under every strategy with
// 1 of 3 Redis nodes up: the Redis locks answer 503 (never 500); the others
// still sell, one unit each.
func wantOnlyRedisLocksUnavailable(t *testing.T, in *apptest.Instance, id int64) {
	t.Helper()
	for _, s := range []string{"setnx", "token", "redlock"} {
		r := in.PostPurchase(t, id, "strategy="+s, `{"user_id":"u-1","quantity":1}`)
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(r.Body, &body) // an empty code fails below
		if code := body.Error.Code; r.Status != http.StatusServiceUnavailable || code != "unavailable" {
			t.Errorf("purchase by %s with 1 of 3 Redis nodes = %v; want 503 unavailable", s, r)
		}
	}
	for _, s := range []string{"none", "local", "pessimistic", "optimistic"} {
		if r := in.PostPurchase(t, id, "strategy="+s, `{"user_id":"u-1","quantity":1}`); r.Status != http.StatusCreated {
			t.Errorf("purchase by %s with Redis down = %v; want 201", s, r)
		}
	}
	if a := in.Audit(t, id); !a.Consistent || a.UnitsSold != 4 {
		t.Errorf("audit = %+v; want 4 units sold, consistent", a)
	}
}

func TestStrategies(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	r := in.Get(t, "/api/v1/strategies")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /api/v1/strategies = %v; want 200", r)
	}
	var got []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Safe        bool   `json:"safe"`
	}
	apptest.Decode(t, r, &got)
	want := []struct {
		name string
		safe bool
	}{
		{"none", false}, {"local", false}, {"setnx", false},
		{"token", true}, {"redlock", true}, {"pessimistic", true}, {"optimistic", true}, {"reserve", true},
	}
	if len(got) != len(want) {
		t.Fatalf("GET /api/v1/strategies = %s; want %d strategies", r.Body, len(want))
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Safe != w.safe || got[i].Description == "" {
			t.Errorf("strategy %d = %+v; want name %q, safe %v and a description", i, got[i], w.name, w.safe)
		}
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "strategy", raw[0], []string{"description", "name", "safe"})
}

func TestProducts(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)

	if r := in.Get(t, "/api/v1/products"); r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != "[]" {
		t.Errorf("GET /api/v1/products with none = %v; want 200 []", r)
	}

	r := in.Admin(t, http.MethodPost, "/api/v1/admin/products", `{"name":"phone","stock":100}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /api/v1/admin/products = %v; want 201", r)
	}
	wantKeys(t, "created product", r.Body, productKeys)
	var phone product
	apptest.Decode(t, r, &phone)
	if phone.ID <= 0 || phone.Name != "phone" || phone.Stock != 100 || phone.InitialStock != 100 {
		t.Errorf("created product = %+v; want a new ID, phone, 100, 100", phone)
	}
	laptop := in.Create(t, "laptop", 0)

	r = in.Get(t, "/api/v1/products")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /api/v1/products = %v; want 200", r)
	}
	var list []product
	apptest.Decode(t, r, &list)
	want := []product{phone, {ID: laptop, Name: "laptop"}}
	if fmt.Sprint(list) != fmt.Sprint(want) {
		t.Errorf("GET /api/v1/products = %+v; want %+v", list, want)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(r.Body, &raw); err != nil || len(raw) == 0 {
		t.Fatalf("GET /api/v1/products body %s: %v", r.Body, err)
	}
	wantKeys(t, "listed product", raw[0], productKeys)

	r = in.Get(t, fmt.Sprintf("/api/v1/products/%d", phone.ID))
	if r.Status != http.StatusOK {
		t.Fatalf("GET /api/v1/products/%d = %v; want 200", phone.ID, r)
	}
	wantKeys(t, "product", r.Body, productKeys)
	if got := in.Product(t, phone.ID); got != phone {
		t.Errorf("GET /api/v1/products/%d = %+v; want %+v", phone.ID, got, phone)
	}

	apptest.WantError(t, "GET unknown product", in.Get(t, "/api/v1/products/987654"), http.StatusNotFound, "product_not_found")
}

func TestAdminNeedsTheToken(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "phone", 10)

	for _, auth := range []string{
		"",
		"Bearer",
		"Bearer ",
		"Bearer wrong-token",
		in.AdminToken,
		"Basic " + in.AdminToken,
		"Bearer " + in.AdminToken + "x",
		"Bearer " + in.AdminToken[:len(in.AdminToken)-1],
	} {
		header := map[string]string{}
		if auth != "" {
			header["Authorization"] = auth
		}
		for _, req := range []struct{ method, path, body string }{
			{http.MethodPost, "/api/v1/admin/products", `{"name":"x","stock":1}`},
			{http.MethodPut, fmt.Sprintf("/api/v1/admin/products/%d/stock", id), `{"stock":1}`},
		} {
			what := fmt.Sprintf("%s %s with Authorization %q", req.method, req.path, auth)
			r := in.Do(t, req.method, req.path, req.body, header)
			apptest.WantError(t, what, r, http.StatusUnauthorized, "unauthorized")
			if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s WWW-Authenticate = %q; want a Bearer challenge", what, r.Header.Get("WWW-Authenticate"))
			}
		}
	}
	// Nothing was created or changed.
	if r := in.Get(t, "/api/v1/products"); strings.Count(string(r.Body), `"id"`) != 1 {
		t.Errorf("GET /api/v1/products after refused admin calls = %v; want the one product", r)
	}
	if p := in.Product(t, id); p.Stock != 10 {
		t.Errorf("stock after refused reset = %d; want 10", p.Stock)
	}
}

// TestPurchase sells the 3 units of one product: a purchase, its replay,
// a request ID reused, the per-user limit, a request ID the server makes,
// then sold out.
func TestPurchase(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "phone", 3)

	first := wantFirstPurchaseReplayed(t, in, id)

	// The same request ID for another purchase is refused.
	for _, body := range []string{
		`{"user_id":"u-2","quantity":1,"request_id":"req-1"}`,
		`{"user_id":"u-1","quantity":2,"request_id":"req-1"}`,
	} {
		apptest.WantError(t, "purchase "+body, in.PostPurchase(t, id, "", body), http.StatusConflict, "request_id_reused")
	}
	other := in.Create(t, "tablet", 5)
	apptest.WantError(t, "purchase of another product with req-1",
		in.PostPurchase(t, other, "", `{"user_id":"u-1","quantity":1,"request_id":"req-1"}`), http.StatusConflict, "request_id_reused")

	// The per-user limit is 1 by default.
	apptest.WantError(t, "second purchase by u-1", in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1,"request_id":"req-2"}`),
		http.StatusConflict, "limit_exceeded")
	apptest.WantError(t, "2 units at once", in.PostPurchase(t, id, "", `{"user_id":"u-9","quantity":2}`), http.StatusConflict, "limit_exceeded")

	wantServerRequestID(t, in, id, first)

	r := in.PostPurchase(t, id, "", `{"user_id":"u-3","quantity":1}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("purchase of the last unit = %v; want 201", r)
	}
	apptest.WantError(t, "purchase when sold out", in.PostPurchase(t, id, "", `{"user_id":"u-4","quantity":1}`), http.StatusConflict, "sold_out")
	apptest.WantError(t, "purchase of an unknown product", in.PostPurchase(t, 987654, "", `{"user_id":"u-4","quantity":1}`),
		http.StatusNotFound, "product_not_found")

	// The replay still works when sold out.
	if r := in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1,"request_id":"req-1"}`); r.Status != http.StatusOK {
		t.Errorf("replay when sold out = %v; want 200", r)
	}

	if p := in.Product(t, id); p.Stock != 0 || p.InitialStock != 3 {
		t.Errorf("product after the sale = %+v; want stock 0 of 3", p)
	}
	want := audit{ProductID: id, InitialStock: 3, Stock: 0, Orders: 3, UnitsSold: 3, OversoldUnits: 0, Consistent: true}
	if a := in.Audit(t, id); a != want {
		t.Errorf("audit = %+v; want %+v", a, want)
	}
}

// wantFirstPurchaseReplayed buys 1 of the 3 units of product id for u-1
// under request req-1, then replays it: the replay answers 200 with the
// first order, and sells nothing. It returns the first order.
func wantFirstPurchaseReplayed(t *testing.T, in *apptest.Instance, id int64) order {
	t.Helper()
	r := in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1,"request_id":"req-1"}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("purchase = %v; want 201", r)
	}
	wantKeys(t, "order", r.Body, orderKeys)
	var first order
	apptest.Decode(t, r, &first)
	if first.OrderID <= 0 || first.ProductID != id || first.UserID != "u-1" || first.Quantity != 1 ||
		first.RequestID == nil || *first.RequestID != "req-1" || first.Strategy != "redlock" || first.RemainingStock != 2 {
		t.Errorf("order = %s; want a new order of 1 unit for u-1, request req-1, redlock, 2 left", r.Body)
	}

	// A replay answers 200 with the first order, and sells nothing.
	r = in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1,"request_id":"req-1"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("replayed purchase = %v; want 200", r)
	}
	var replay order
	apptest.Decode(t, r, &replay)
	if replay.RequestID == nil || *replay.RequestID != "req-1" {
		t.Errorf("replayed order = %s; want request_id req-1", r.Body)
	}
	replay.RequestID, first.RequestID = nil, nil
	if !reflect.DeepEqual(replay, first) {
		t.Errorf("replayed order = %s; want the first order %+v", r.Body, first)
	}
	return first
}

// wantServerRequestID buys the second unit of product id without
// request_id: the order carries one the server made, under which it can be
// looked up (and replayed), and is not first.
func wantServerRequestID(t *testing.T, in *apptest.Instance, id int64, first order) {
	t.Helper()
	r := in.PostPurchase(t, id, "", `{"user_id":"u-2","quantity":1}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("purchase without request_id = %v; want 201", r)
	}
	wantKeys(t, "order without request_id", r.Body, orderKeys)
	var second order
	apptest.Decode(t, r, &second)
	if second.RequestID == nil || !strings.HasPrefix(*second.RequestID, "srv-") || second.RemainingStock != 1 || second.OrderID == first.OrderID {
		t.Errorf("order without request_id = %s; want a request_id made by the server, 1 left, a new order_id", r.Body)
	} else if again := in.PostPurchase(t, id, "", `{"user_id":"u-2","quantity":1,"request_id":"`+*second.RequestID+`"}`); again.Status != http.StatusOK {
		t.Errorf("replay of the server's request_id = %v; want 200", again)
	}
}

// TestPurchaseEveryStrategy buys under each strategy through the override
// and checks the order names it.
func TestPurchaseEveryStrategy(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"})
	id := in.Create(t, "phone", 100)
	remaining := int64(100)
	for _, s := range []string{"none", "local", "setnx", "token", "redlock", "pessimistic", "optimistic"} {
		for _, fencing := range []string{"", "&fencing=false", "&fencing=true"} {
			r := in.PostPurchase(t, id, "strategy="+s+"&hold_ms=0"+fencing, `{"user_id":"u-1","quantity":2}`)
			if r.Status != http.StatusCreated {
				t.Errorf("purchase with strategy=%s%s = %v; want 201", s, fencing, r)
				continue
			}
			remaining -= 2
			var o order
			apptest.Decode(t, r, &o)
			if o.Strategy != s || o.RemainingStock != remaining || o.Quantity != 2 {
				t.Errorf("order with strategy=%s%s = %s; want strategy %s, 2 units, %d left", s, fencing, r.Body, s, remaining)
			}
		}
	}
	if a := in.Audit(t, id); !a.Consistent || a.Stock != remaining || a.UnitsSold != 100-remaining {
		t.Errorf("audit = %+v; want consistent with %d left", a, remaining)
	}
}

// TestPurchaseConcurrentBuyers: more buyers than units, at once; the safe
// strategies sell exactly the stock and answer the rest sold_out, never a 5xx.
func TestPurchaseConcurrentBuyers(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	const stock, buyers = 5, 20
	for _, s := range []string{"redlock", "optimistic"} {
		id := in.Create(t, "phone-"+s, stock)
		results := make([]apptest.Response, buyers)
		var g errgroup.Group
		for i := range buyers {
			g.Go(func() error {
				r, err := in.Send(context.Background(), http.MethodPost, apptest.PurchasePath(id, "strategy="+s),
					fmt.Sprintf(`{"user_id":"u-%d","quantity":1}`, i), in.AdminHeader())
				results[i] = r
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("%s: purchase: %v", s, err)
		}
		sold := 0
		for _, r := range results {
			switch r.Status {
			case http.StatusCreated:
				sold++
			default:
				apptest.WantError(t, s+" purchase", r, http.StatusConflict, "sold_out")
			}
		}
		if sold != stock {
			t.Errorf("%s: %d of %d buyers got a unit of %d; want %d", s, sold, buyers, stock, stock)
		}
		want := audit{ProductID: id, InitialStock: stock, Stock: 0, Orders: stock, UnitsSold: stock, Consistent: true}
		if a := in.Audit(t, id); a != want {
			t.Errorf("%s: audit = %+v; want %+v", s, a, want)
		}
	}
}

func TestStockReset(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "phone", 2)
	for _, u := range []string{"u-1", "u-2"} {
		if r := in.PostPurchase(t, id, "", fmt.Sprintf(`{"user_id":%q,"quantity":1,"request_id":"r-%s"}`, u, u)); r.Status != http.StatusCreated {
			t.Fatalf("purchase by %s = %v; want 201", u, r)
		}
	}

	r := in.Admin(t, http.MethodPut, fmt.Sprintf("/api/v1/admin/products/%d/stock", id), `{"stock":5}`)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT stock = %v; want 200", r)
	}
	wantKeys(t, "reset product", r.Body, productKeys)
	var p product
	apptest.Decode(t, r, &p)
	if want := (product{ID: id, Name: "phone", Stock: 5, InitialStock: 5}); p != want {
		t.Errorf("PUT stock = %+v; want %+v", p, want)
	}
	if want := (audit{ProductID: id, InitialStock: 5, Stock: 5, Consistent: true}); in.Audit(t, id) != want {
		t.Errorf("audit after reset = %+v; want %+v (orders deleted)", in.Audit(t, id), want)
	}
	// The orders are gone: the limit counts from zero and request IDs are free.
	r = in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1,"request_id":"r-u-1"}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("purchase by u-1 after reset = %v; want 201", r)
	}
	var o order
	apptest.Decode(t, r, &o)
	if o.RemainingStock != 4 {
		t.Errorf("order after reset = %+v; want 4 left", o)
	}

	r = in.Admin(t, http.MethodPut, fmt.Sprintf("/api/v1/admin/products/%d/stock", id), `{"stock":0}`)
	if r.Status != http.StatusOK {
		t.Fatalf("PUT stock 0 = %v; want 200", r)
	}
	apptest.WantError(t, "purchase after reset to 0", in.PostPurchase(t, id, "", `{"user_id":"u-5","quantity":1}`), http.StatusConflict, "sold_out")
	apptest.WantError(t, "PUT stock of unknown product", in.Admin(t, http.MethodPut, "/api/v1/admin/products/987654/stock", `{"stock":1}`),
		http.StatusNotFound, "product_not_found")
}

func TestAudit(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"})
	id := in.Create(t, "phone", 10)
	for i, q := range []int{1, 3, 2} {
		if r := in.PostPurchase(t, id, "", fmt.Sprintf(`{"user_id":"u-%d","quantity":%d}`, i, q)); r.Status != http.StatusCreated {
			t.Fatalf("purchase of %d = %v; want 201", q, r)
		}
	}
	// The audit is an admin's: without the token, 401, whose message a
	// person reads as it is written (not HTML-escaped JSON).
	noToken := in.Get(t, fmt.Sprintf("/api/v1/products/%d/audit", id))
	apptest.WantError(t, "GET audit without the token", noToken, http.StatusUnauthorized, "unauthorized")
	if !strings.Contains(string(noToken.Body), "Bearer <SECKILL_ADMIN_TOKEN>") {
		t.Errorf("GET audit without the token = %s; want its message to say Bearer <SECKILL_ADMIN_TOKEN> as it is", noToken.Body)
	}
	r := in.Admin(t, http.MethodGet, fmt.Sprintf("/api/v1/products/%d/audit", id), "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET audit = %v; want 200", r)
	}
	wantKeys(t, "audit", r.Body, auditKeys)
	want := audit{ProductID: id, InitialStock: 10, Stock: 4, Orders: 3, UnitsSold: 6, OversoldUnits: 0, Consistent: true}
	var a audit
	apptest.Decode(t, r, &a)
	if a != want {
		t.Errorf("audit = %+v; want %+v", a, want)
	}
	apptest.WantError(t, "audit of unknown product", in.Admin(t, http.MethodGet, "/api/v1/products/987654/audit", ""), http.StatusNotFound, "product_not_found")
	apptest.WantError(t, "audit of product abc", in.Admin(t, http.MethodGet, "/api/v1/products/abc/audit", ""), http.StatusBadRequest, "invalid_argument")
}

// TestAuditShowsOversell lets the unsafe strategy none oversell under
// concurrent buyers with a hold and checks that audit reports it: the
// audit's arithmetic, not whether this run happened to race.
func TestAuditShowsOversell(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"})
	const stock, buyers = 2, 6
	id := in.Create(t, "phone", stock)
	var g errgroup.Group
	for i := range buyers {
		g.Go(func() error {
			r, err := in.Send(context.Background(), http.MethodPost, apptest.PurchasePath(id, "strategy=none&hold_ms=300"),
				fmt.Sprintf(`{"user_id":"u-%d","quantity":1}`, i), in.AdminHeader())
			if err == nil && r.Status != http.StatusCreated && r.Status != http.StatusConflict {
				err = fmt.Errorf("purchase = %v; want 201 or 409", r)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	a := in.Audit(t, id)
	if a.InitialStock != stock || a.InitialStock-a.Stock != a.UnitsSold || a.Orders != a.UnitsSold {
		t.Errorf("audit = %+v; want initial %d, units sold = initial - stock = orders", a, stock)
	}
	if wantOversold := max(0, a.UnitsSold-stock); a.OversoldUnits != wantOversold || a.Consistent != (a.Stock >= 0) {
		t.Errorf("audit = %+v; want oversold_units %d and consistent = stock >= 0", a, wantOversold)
	}
	t.Logf("strategy none with %d buyers for %d units: %+v", buyers, stock, a)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "phone", 5)
	if r := in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1}`); r.Status != http.StatusCreated {
		t.Fatalf("purchase = %v; want 201", r)
	}
	in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1}`) // limit_exceeded

	r := in.Get(t, "/metrics")
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %s; want 200 text/plain", r.Status, r.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`seckill_purchases_total{outcome="ok",strategy="redlock"} 1`,
		`seckill_purchases_total{outcome="limit_exceeded",strategy="redlock"} 1`,
		`seckill_lock_wait_seconds_bucket{result="acquired",strategy="redlock",le="+Inf"} 2`,
		`seckill_lock_wait_seconds_count{result="acquired",strategy="redlock"} 2`,
		`seckill_lock_wait_seconds_count{result="timeout",strategy="redlock"} 0`,
		`seckill_purchases_total{outcome="sold_out",strategy="token"} 0`,
		`seckill_lock_failures_total{reason="lost",strategy="redlock"} 0`,
		`seckill_http_requests_total{code="201",route="/api/v1/products/:id/purchase"} 1`,
		`seckill_http_requests_total{code="409",route="/api/v1/products/:id/purchase"} 1`,
	} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("GET /metrics has no line %q", want)
		}
	}
}

// TestLockTimeout holds a product's lock with one purchase (hold_ms) while a
// second one asks for it: the second answers 503 lock_timeout with
// Retry-After, the first completes.
func TestLockTimeout(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_LOCK_WAIT": "200ms", "SECKILL_PER_USER_LIMIT": "0"})
	t.Run("strategy", func(t *testing.T) {
		for _, s := range []string{"token", "setnx", "redlock"} {
			t.Run(s, func(t *testing.T) {
				t.Parallel()
				lockTimeout(t, in, s)
			})
		}
		t.Run("pessimistic", func(t *testing.T) {
			t.Parallel()
			lockTimeout(t, in, "pessimistic")
		})
	})
	r := in.Get(t, "/metrics")
	if !strings.Contains(string(r.Body), `seckill_purchases_total{outcome="lock_timeout",strategy="token"} 1`) ||
		!strings.Contains(string(r.Body), `seckill_lock_failures_total{reason="timeout",strategy="token"} 1`) {
		t.Errorf("GET /metrics does not count the token lock_timeout")
	}
}

// lockTimeout runs TestLockTimeout for strategy s on a product of its own.
func lockTimeout(t *testing.T, in *apptest.Instance, s string) {
	id := in.Create(t, "phone-"+s, 10)
	var (
		first chan apptest.Response
		errc  chan error
	)
	for attempt := 1; ; attempt++ {
		first, errc = make(chan apptest.Response, 1), make(chan error, 1)
		go func() {
			// batch=1: a hold of the holder alone, so that the waiter who comes
			// while it takes the lock is not sold in the same hold.
			r, err := in.Send(context.Background(), http.MethodPost, apptest.PurchasePath(id, "strategy="+s+"&hold_ms=2000&batch=1"), `{"user_id":"holder","quantity":1}`, in.AdminHeader())
			first <- r
			errc <- err
		}()
		var held bool
		if s == "pessimistic" {
			held = waitForRowLock(t, in, id, errc)
		} else {
			held = waitForLockHolder(t, in, s, id, errc)
		}
		if held {
			break
		}
		// The holder ended before it held the lock. On a loaded machine it
		// may not reach the lock within the instance's 200 ms wait: then it
		// answers lock_timeout, and it tries again.
		r := <-first
		if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), `"lock_timeout"`) || attempt == 5 {
			t.Fatalf("holding purchase ended before it held the lock (attempt %d): %v", attempt, r)
		}
	}

	r := in.PostPurchase(t, id, "strategy="+s, `{"user_id":"waiter","quantity":1}`)
	apptest.WantError(t, "purchase while the lock is held", r, http.StatusServiceUnavailable, "lock_timeout")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("lock_timeout answer has no Retry-After header: %v", r.Header)
	}

	if err := <-errc; err != nil {
		t.Fatalf("holding purchase: %v", err)
	}
	if r := <-first; r.Status != http.StatusCreated {
		t.Errorf("holding purchase = %v; want 201", r)
	}
	want := audit{ProductID: id, InitialStock: 10, Stock: 9, Orders: 1, UnitsSold: 1, Consistent: true}
	if a := in.Audit(t, id); a != want {
		t.Errorf("audit = %+v; want %+v", a, want)
	}
	// The lock was released: the next buyer gets it at once.
	if r := in.PostPurchase(t, id, "strategy="+s, `{"user_id":"waiter","quantity":1}`); r.Status != http.StatusCreated {
		t.Errorf("purchase after the holder finished = %v; want 201", r)
	}
}

// waitForLockHolder waits until a purchase of product id holds its lock
// under strategy (its key is on the first Redis node, or a majority of the
// nodes for redlock); false when the purchase was answered first.
func waitForLockHolder(t *testing.T, in *apptest.Instance, strategy string, id int64, errc chan error) (held bool) {
	t.Helper()
	need := 1
	if strategy == "redlock" {
		need = len(in.Config.RedisAddrs)/2 + 1
	}
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("a purchase of product %d to take its lock", id), func() bool {
		held = in.LockHolders(t, strategy, id) >= need
		return held || ended(t, errc)
	})
	return held
}

// ended says the holding purchase has been answered; a transport error
// fails t.
func ended(t *testing.T, errc chan error) bool {
	t.Helper()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("holding purchase: %v", err)
		}
		return true
	default:
		return false
	}
}

// waitForRowLock waits until a purchase of product id holds the product's
// row lock: a probe's SELECT ... FOR UPDATE NOWAIT fails while it does. The
// probe that succeeds holds the lock only until its immediate rollback.
// It returns false when the purchase was answered first.
func waitForRowLock(t *testing.T, in *apptest.Instance, id int64, errc chan error) (held bool) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("a purchase of product %d to take its row lock", id), func() bool {
		tx := in.Stores.DB.Begin()
		if tx.Error != nil {
			t.Fatalf("begin: %v", tx.Error)
		}
		var got int64
		err := tx.Raw("SELECT id FROM products WHERE id = ? FOR UPDATE NOWAIT", id).Scan(&got).Error
		if rerr := tx.Rollback().Error; rerr != nil {
			t.Fatalf("rollback: %v", rerr)
		}
		var myErr *mysql.MySQLError
		// lock wait timeout (MariaDB) or lock NOWAIT (MySQL)
		held = errors.As(err, &myErr) && (myErr.Number == 1205 || myErr.Number == 3572)
		if err != nil && !held {
			t.Fatalf("probe the row lock of product %d: %v", id, err)
		}
		return held || ended(t, errc)
	})
	return held
}

// TestOverrideNeedsToken: under SECKILL_STRATEGY_OVERRIDE=true the
// override's parameters need the admin token (401 without it, nothing
// sold); with the override off they answer 403, token or not.
func TestOverrideNeedsToken(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "phone", 5)
	for _, q := range []string{"strategy=none", "hold_ms=10", "pause_ms=10", "fencing=false", "batch=1"} {
		r := in.Do(t, http.MethodPost, apptest.PurchasePath(id, q), `{"user_id":"u-1","quantity":1}`, nil)
		apptest.WantError(t, q+" without the token", r, http.StatusUnauthorized, "unauthorized")
		r = in.Do(t, http.MethodPost, apptest.PurchasePath(id, q), `{"user_id":"u-1","quantity":1}`, map[string]string{"Authorization": "Bearer wrong"})
		apptest.WantError(t, q+" with a wrong token", r, http.StatusUnauthorized, "unauthorized")
	}
	if a := in.Audit(t, id); a.Orders != 0 || a.Stock != 5 {
		t.Errorf("audit after refused purchases = %+v; want nothing sold", a)
	}
	if r := in.PostPurchase(t, id, "strategy=none", `{"user_id":"u-1","quantity":1}`); r.Status != http.StatusCreated {
		t.Errorf("purchase with the token = %v; want 201", r)
	}
	// The dashboard's calls need no token.
	if r := in.Get(t, "/api/v1/products"); r.Status != http.StatusOK {
		t.Errorf("GET /api/v1/products = %v; want 200", r)
	}

	off := apptest.Start(t, map[string]string{"SECKILL_STRATEGY_OVERRIDE": "false"})
	offID := off.Create(t, "phone", 5)
	for _, header := range []map[string]string{nil, off.AdminHeader()} {
		r := off.Do(t, http.MethodPost, apptest.PurchasePath(offID, "strategy=none"), `{"user_id":"u-1","quantity":1}`, header)
		apptest.WantError(t, "override off", r, http.StatusForbidden, "strategy_override_disabled")
	}
}

// TestReadyzNamesTheDatabase: with the database gone, /readyz answers 503
// naming the database, without the driver's error or any address (the
// route is unauthenticated).
func TestReadyzNamesTheDatabase(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	if r := in.Get(t, "/readyz"); r.Status != http.StatusOK || string(r.Body) != `{"status":"ready"}` {
		t.Fatalf("GET /readyz = %v; want 200 {\"status\":\"ready\"}", r)
	}
	sqlDB, err := in.Stores.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlDB.Close(); err != nil { // as if the server went away
		t.Fatal(err)
	}
	r := in.Get(t, "/readyz")
	var body api.Ready
	if err := json.Unmarshal(r.Body, &body); err != nil || r.Status != http.StatusServiceUnavailable || body.Status != "unavailable" ||
		body.Down != "database" || body.Error == nil || body.Error.Code != "unavailable" || !strings.Contains(body.Error.Message, "database") {
		t.Fatalf("GET /readyz with the database closed = %v; want 503 naming the database as down", r)
	}
	for _, leak := range []string{"sql:", "closed", "127.0.0.1", "tcp", in.Config.MySQLDSN} {
		if strings.Contains(string(r.Body), leak) {
			t.Errorf("GET /readyz body = %s; want no %q in it (driver errors and addresses go to the log)", r.Body, leak)
		}
	}
}

// TestPurchaseState: GET /api/v1/purchases/{request_id} answers, under any
// strategy, what became of a purchase attempt: "ordered" with the very
// order its purchase answered, a request ID holding a "/" included; 404 purchase_not_found for an attempt that was refused or
// never made; 400 for a request ID the contract does not allow.
func TestPurchaseState(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "lamp", 1)

	bought := in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1,"request_id":"state-1"}`)
	if bought.Status != http.StatusCreated {
		t.Fatalf("purchase = %v; want 201", bought)
	}
	var made order
	apptest.Decode(t, bought, &made)
	refused := in.PostPurchase(t, id, "", `{"user_id":"u-2","quantity":1,"request_id":"state-2"}`)
	apptest.WantError(t, "purchase when sold out", refused, http.StatusConflict, "sold_out")

	r := in.Get(t, "/api/v1/purchases/state-1")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /api/v1/purchases/state-1 = %v; want 200", r)
	}
	wantKeys(t, "a purchase's state", r.Body, []string{"order", "request_id", "state"})
	var raw struct {
		Order json.RawMessage `json:"order"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	wantKeys(t, "a purchase's order", raw.Order, orderKeys)
	var got api.PurchaseState
	apptest.Decode(t, r, &got)
	if got.RequestID != "state-1" || got.State != api.StateOrdered || got.Order == nil || !reflect.DeepEqual(*got.Order, made) {
		t.Errorf("state of state-1 = %+v (order %+v); want ordered, the order %+v", got, got.Order, made)
	}

	slash := in.Create(t, "shelf", 1)
	if r := in.PostPurchase(t, slash, "", `{"user_id":"u-3","quantity":1,"request_id":"shop/7"}`); r.Status != http.StatusCreated {
		t.Fatalf("purchase with request ID shop/7 = %v; want 201", r)
	}
	var withSlash api.PurchaseState
	apptest.Decode(t, in.Get(t, "/api/v1/purchases/shop%2F7"), &withSlash)
	if withSlash.RequestID != "shop/7" || withSlash.Order == nil || withSlash.Order.ProductID != slash {
		t.Errorf("state of shop/7 = %+v; want its order of product %d", withSlash, slash)
	}

	apptest.WantError(t, "the state of a refused purchase", in.Get(t, "/api/v1/purchases/state-2"), http.StatusNotFound, "purchase_not_found")
	apptest.WantError(t, "the state of a purchase never made", in.Get(t, "/api/v1/purchases/never"), http.StatusNotFound, "purchase_not_found")
	apptest.WantError(t, "a request ID with a control character", in.Get(t, "/api/v1/purchases/a%01b"), http.StatusBadRequest, "invalid_argument")
}

// TestPurchaseStateOfServerRequestID: a purchase sent without a request ID
// can be found by the one the server made, which its order carries.
func TestPurchaseStateOfServerRequestID(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	id := in.Create(t, "desk", 2)
	r := in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1}`)
	var made order
	apptest.Decode(t, r, &made)
	if made.RequestID == nil {
		t.Fatalf("order %+v carries no request ID", made)
	}
	var got api.PurchaseState
	apptest.Decode(t, in.Get(t, "/api/v1/purchases/"+*made.RequestID), &got)
	if got.Order == nil || got.Order.OrderID != made.OrderID {
		t.Errorf("state of %s = %+v; want order %d", *made.RequestID, got, made.OrderID)
	}
}
