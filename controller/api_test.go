package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/apptest"
	"github.com/seckill/seckill/internal/testenv"
)

func TestHealthzAndReadyz(t *testing.T) {
	t.Parallel()
	c := newClient(t, apptest.Start(t, nil))

	r := c.get("/healthz")
	if r.status != http.StatusOK {
		t.Errorf("GET /healthz = %v; want 200", r)
	}
	var health map[string]any
	if err := json.Unmarshal(r.body, &health); err != nil || len(health) != 1 || health["status"] != "ok" {
		t.Errorf("GET /healthz body = %s; want {\"status\":\"ok\"}", r.body)
	}

	if r := c.get("/readyz"); r.status != http.StatusOK {
		t.Errorf("GET /readyz = %v; want 200", r)
	}
}

// TestReadyzNeedsARedisMajority runs an instance on three Redis nodes of its
// own and stops them one by one.
func TestReadyzNeedsARedisMajority(t *testing.T) {
	t.Parallel()
	nodes := []*testenv.Redis{testenv.StartRedis(t), testenv.StartRedis(t), testenv.StartRedis(t)}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	c := newClient(t, apptest.Start(t, map[string]string{
		"SECKILL_REDIS_ADDRS":    strings.Join(addrs, ","),
		"SECKILL_LOCK_WAIT":      "300ms",
		"SECKILL_PER_USER_LIMIT": "0",
	}))
	id := c.createProduct("phone", 100)

	if r := c.get("/readyz"); r.status != http.StatusOK {
		t.Fatalf("GET /readyz with 3 of 3 nodes = %v; want 200", r)
	}
	nodes[0].Stop()
	if r := c.get("/readyz"); r.status != http.StatusOK {
		t.Errorf("GET /readyz with 2 of 3 nodes = %v; want 200", r)
	}
	nodes[1].Stop()
	wantReadyzRedisDown(t, c.get("/readyz"), nodes)
	// The HTTP layer and the database are unaffected.
	if r := c.get("/healthz"); r.status != http.StatusOK {
		t.Errorf("GET /healthz with Redis down = %v; want 200", r)
	}
	wantOnlyRedisLocksUnavailable(t, c, id)
}

// wantReadyzRedisDown checks r, the answer of GET /readyz with 1 of the 3
// Redis nodes up: a 503 that names redis as down, with the error body, and
// no node's address.
func wantReadyzRedisDown(t *testing.T, r response, nodes []*testenv.Redis) {
	t.Helper()
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("GET /readyz with 1 of 3 nodes = %v; want 503", r)
	}
	var body struct {
		Down  string `json:"down"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("GET /readyz body %s: %v", r.body, err)
	}
	if body.Down != "redis" || body.Error.Code != "unavailable" || !strings.Contains(body.Error.Message, "redis") {
		t.Errorf("GET /readyz body = %s; want it to name redis as down, with the error body", r.body)
	}
	for _, n := range nodes {
		if strings.Contains(string(r.body), n.Addr) {
			t.Errorf("GET /readyz body = %s; want no node address in it", r.body)
		}
	}
}

// wantOnlyRedisLocksUnavailable buys product id under every strategy with
// 1 of 3 Redis nodes up: the Redis locks answer 503 (never 500); the others
// still sell, one unit each.
func wantOnlyRedisLocksUnavailable(t *testing.T, c *client, id int64) {
	t.Helper()
	for _, s := range []string{"setnx", "token", "redlock"} {
		r := c.purchase(id, "strategy="+s, `{"user_id":"u-1","quantity":1}`)
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(r.body, &body) // an empty code fails below
		if code := body.Error.Code; r.status != http.StatusServiceUnavailable || code != "unavailable" {
			t.Errorf("purchase by %s with 1 of 3 Redis nodes = %v; want 503 unavailable", s, r)
		}
	}
	for _, s := range []string{"none", "local", "pessimistic", "optimistic"} {
		if r := c.purchase(id, "strategy="+s, `{"user_id":"u-1","quantity":1}`); r.status != http.StatusCreated {
			t.Errorf("purchase by %s with Redis down = %v; want 201", s, r)
		}
	}
	if a := c.audit(id); !a.Consistent || a.UnitsSold != 4 {
		t.Errorf("audit = %+v; want 4 units sold, consistent", a)
	}
}

func TestStrategies(t *testing.T) {
	t.Parallel()
	c := newClient(t, apptest.Start(t, nil))
	r := c.get("/api/v1/strategies")
	if r.status != http.StatusOK {
		t.Fatalf("GET /api/v1/strategies = %v; want 200", r)
	}
	var got []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Safe        bool   `json:"safe"`
	}
	decode(t, r, &got)
	want := []struct {
		name string
		safe bool
	}{
		{"none", false}, {"local", false}, {"setnx", false},
		{"token", true}, {"redlock", true}, {"pessimistic", true}, {"optimistic", true},
	}
	if len(got) != len(want) {
		t.Fatalf("GET /api/v1/strategies = %s; want %d strategies", r.body, len(want))
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Safe != w.safe || got[i].Description == "" {
			t.Errorf("strategy %d = %+v; want name %q, safe %v and a description", i, got[i], w.name, w.safe)
		}
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "strategy", raw[0], []string{"description", "name", "safe"})
}

func TestProducts(t *testing.T) {
	t.Parallel()
	c := newClient(t, apptest.Start(t, nil))

	if r := c.get("/api/v1/products"); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("GET /api/v1/products with none = %v; want 200 []", r)
	}

	r := c.admin(http.MethodPost, "/api/v1/admin/products", `{"name":"phone","stock":100}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /api/v1/admin/products = %v; want 201", r)
	}
	wantKeys(t, "created product", r.body, productKeys)
	var phone product
	decode(t, r, &phone)
	if phone.ID <= 0 || phone.Name != "phone" || phone.Stock != 100 || phone.InitialStock != 100 {
		t.Errorf("created product = %+v; want a new ID, phone, 100, 100", phone)
	}
	laptop := c.createProduct("laptop", 0)

	r = c.get("/api/v1/products")
	if r.status != http.StatusOK {
		t.Fatalf("GET /api/v1/products = %v; want 200", r)
	}
	var list []product
	decode(t, r, &list)
	want := []product{phone, {ID: laptop, Name: "laptop"}}
	if fmt.Sprint(list) != fmt.Sprint(want) {
		t.Errorf("GET /api/v1/products = %+v; want %+v", list, want)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil || len(raw) == 0 {
		t.Fatalf("GET /api/v1/products body %s: %v", r.body, err)
	}
	wantKeys(t, "listed product", raw[0], productKeys)

	r = c.get(fmt.Sprintf("/api/v1/products/%d", phone.ID))
	if r.status != http.StatusOK {
		t.Fatalf("GET /api/v1/products/%d = %v; want 200", phone.ID, r)
	}
	wantKeys(t, "product", r.body, productKeys)
	if got := c.product(phone.ID); got != phone {
		t.Errorf("GET /api/v1/products/%d = %+v; want %+v", phone.ID, got, phone)
	}

	wantError(t, "GET unknown product", c.get("/api/v1/products/987654"), http.StatusNotFound, "product_not_found")
}

func TestAdminNeedsTheToken(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	c := newClient(t, in)
	id := c.createProduct("phone", 10)

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
			r := c.do(req.method, req.path, req.body, header)
			wantError(t, what, r, http.StatusUnauthorized, "unauthorized")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s WWW-Authenticate = %q; want a Bearer challenge", what, r.header.Get("WWW-Authenticate"))
			}
		}
	}
	// Nothing was created or changed.
	if r := c.get("/api/v1/products"); strings.Count(string(r.body), `"id"`) != 1 {
		t.Errorf("GET /api/v1/products after refused admin calls = %v; want the one product", r)
	}
	if p := c.product(id); p.Stock != 10 {
		t.Errorf("stock after refused reset = %d; want 10", p.Stock)
	}
}

// TestPurchase sells the 3 units of one product: a purchase, its replay,
// a request ID reused, the per-user limit, a request ID the server makes,
// then sold out.
func TestPurchase(t *testing.T) {
	t.Parallel()
	c := newClient(t, apptest.Start(t, nil))
	id := c.createProduct("phone", 3)

	first := wantFirstPurchaseReplayed(t, c, id)

	// The same request ID for another purchase is refused.
	for _, body := range []string{
		`{"user_id":"u-2","quantity":1,"request_id":"req-1"}`,
		`{"user_id":"u-1","quantity":2,"request_id":"req-1"}`,
	} {
		wantError(t, "purchase "+body, c.purchase(id, "", body), http.StatusConflict, "request_id_reused")
	}
	other := c.createProduct("tablet", 5)
	wantError(t, "purchase of another product with req-1",
		c.purchase(other, "", `{"user_id":"u-1","quantity":1,"request_id":"req-1"}`), http.StatusConflict, "request_id_reused")

	// The per-user limit is 1 by default.
	wantError(t, "second purchase by u-1", c.purchase(id, "", `{"user_id":"u-1","quantity":1,"request_id":"req-2"}`),
		http.StatusConflict, "limit_exceeded")
	wantError(t, "2 units at once", c.purchase(id, "", `{"user_id":"u-9","quantity":2}`), http.StatusConflict, "limit_exceeded")

	wantServerRequestID(t, c, id, first)

	r := c.purchase(id, "", `{"user_id":"u-3","quantity":1}`)
	if r.status != http.StatusCreated {
		t.Fatalf("purchase of the last unit = %v; want 201", r)
	}
	wantError(t, "purchase when sold out", c.purchase(id, "", `{"user_id":"u-4","quantity":1}`), http.StatusConflict, "sold_out")
	wantError(t, "purchase of an unknown product", c.purchase(987654, "", `{"user_id":"u-4","quantity":1}`),
		http.StatusNotFound, "product_not_found")

	// The replay still works when sold out.
	if r := c.purchase(id, "", `{"user_id":"u-1","quantity":1,"request_id":"req-1"}`); r.status != http.StatusOK {
		t.Errorf("replay when sold out = %v; want 200", r)
	}

	if p := c.product(id); p.Stock != 0 || p.InitialStock != 3 {
		t.Errorf("product after the sale = %+v; want stock 0 of 3", p)
	}
	want := audit{ProductID: id, InitialStock: 3, Stock: 0, Orders: 3, UnitsSold: 3, OversoldUnits: 0, Consistent: true}
	if a := c.audit(id); a != want {
		t.Errorf("audit = %+v; want %+v", a, want)
	}
}

// wantFirstPurchaseReplayed buys 1 of the 3 units of product id for u-1
// under request req-1, then replays it: the replay answers 200 with the
// first order, and sells nothing. It returns the first order.
func wantFirstPurchaseReplayed(t *testing.T, c *client, id int64) order {
	t.Helper()
	r := c.purchase(id, "", `{"user_id":"u-1","quantity":1,"request_id":"req-1"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("purchase = %v; want 201", r)
	}
	wantKeys(t, "order", r.body, orderKeys)
	var first order
	decode(t, r, &first)
	if first.OrderID <= 0 || first.ProductID != id || first.UserID != "u-1" || first.Quantity != 1 ||
		first.RequestID == nil || *first.RequestID != "req-1" || first.Strategy != "redlock" || first.RemainingStock != 2 {
		t.Errorf("order = %s; want a new order of 1 unit for u-1, request req-1, redlock, 2 left", r.body)
	}

	// A replay answers 200 with the first order, and sells nothing.
	r = c.purchase(id, "", `{"user_id":"u-1","quantity":1,"request_id":"req-1"}`)
	if r.status != http.StatusOK {
		t.Fatalf("replayed purchase = %v; want 200", r)
	}
	var replay order
	decode(t, r, &replay)
	if replay.RequestID == nil || *replay.RequestID != "req-1" {
		t.Errorf("replayed order = %s; want request_id req-1", r.body)
	}
	replay.RequestID, first.RequestID = nil, nil
	if replay != first {
		t.Errorf("replayed order = %s; want the first order %+v", r.body, first)
	}
	return first
}

// wantServerRequestID buys the second unit of product id without
// request_id: the order carries one the server made, under which it can be
// looked up (and replayed), and is not first.
func wantServerRequestID(t *testing.T, c *client, id int64, first order) {
	t.Helper()
	r := c.purchase(id, "", `{"user_id":"u-2","quantity":1}`)
	if r.status != http.StatusCreated {
		t.Fatalf("purchase without request_id = %v; want 201", r)
	}
	wantKeys(t, "order without request_id", r.body, orderKeys)
	var second order
	decode(t, r, &second)
	if second.RequestID == nil || !strings.HasPrefix(*second.RequestID, "srv-") || second.RemainingStock != 1 || second.OrderID == first.OrderID {
		t.Errorf("order without request_id = %s; want a request_id made by the server, 1 left, a new order_id", r.body)
	} else if again := c.purchase(id, "", `{"user_id":"u-2","quantity":1,"request_id":"`+*second.RequestID+`"}`); again.status != http.StatusOK {
		t.Errorf("replay of the server's request_id = %v; want 200", again)
	}
}

// TestPurchaseEveryStrategy buys under each strategy through the override
// and checks the order names it.
func TestPurchaseEveryStrategy(t *testing.T) {
	t.Parallel()
	c := newClient(t, apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"}))
	id := c.createProduct("phone", 100)
	remaining := int64(100)
	for _, s := range []string{"none", "local", "setnx", "token", "redlock", "pessimistic", "optimistic"} {
		for _, fencing := range []string{"", "&fencing=false", "&fencing=true"} {
			r := c.purchase(id, "strategy="+s+"&hold_ms=0"+fencing, `{"user_id":"u-1","quantity":2}`)
			if r.status != http.StatusCreated {
				t.Errorf("purchase with strategy=%s%s = %v; want 201", s, fencing, r)
				continue
			}
			remaining -= 2
			var o order
			decode(t, r, &o)
			if o.Strategy != s || o.RemainingStock != remaining || o.Quantity != 2 {
				t.Errorf("order with strategy=%s%s = %s; want strategy %s, 2 units, %d left", s, fencing, r.body, s, remaining)
			}
		}
	}
	if a := c.audit(id); !a.Consistent || a.Stock != remaining || a.UnitsSold != 100-remaining {
		t.Errorf("audit = %+v; want consistent with %d left", a, remaining)
	}
}

// TestPurchaseConcurrentBuyers: more buyers than units, at once; the safe
// strategies sell exactly the stock and answer the rest sold_out, never a 5xx.
func TestPurchaseConcurrentBuyers(t *testing.T) {
	t.Parallel()
	c := newClient(t, apptest.Start(t, nil))
	const stock, buyers = 5, 20
	for _, s := range []string{"redlock", "optimistic"} {
		id := c.createProduct("phone-"+s, stock)
		results := make([]response, buyers)
		var g errgroup.Group
		for i := range buyers {
			g.Go(func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				r, err := send(ctx, http.MethodPost, c.base+purchasePath(id, "strategy="+s),
					fmt.Sprintf(`{"user_id":"u-%d","quantity":1}`, i), c.auth())
				results[i] = r
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatalf("%s: purchase: %v", s, err)
		}
		sold := 0
		for _, r := range results {
			switch r.status {
			case http.StatusCreated:
				sold++
			default:
				wantError(t, s+" purchase", r, http.StatusConflict, "sold_out")
			}
		}
		if sold != stock {
			t.Errorf("%s: %d of %d buyers got a unit of %d; want %d", s, sold, buyers, stock, stock)
		}
		want := audit{ProductID: id, InitialStock: stock, Stock: 0, Orders: stock, UnitsSold: stock, Consistent: true}
		if a := c.audit(id); a != want {
			t.Errorf("%s: audit = %+v; want %+v", s, a, want)
		}
	}
}

func TestStockReset(t *testing.T) {
	t.Parallel()
	c := newClient(t, apptest.Start(t, nil))
	id := c.createProduct("phone", 2)
	for _, u := range []string{"u-1", "u-2"} {
		if r := c.purchase(id, "", fmt.Sprintf(`{"user_id":%q,"quantity":1,"request_id":"r-%s"}`, u, u)); r.status != http.StatusCreated {
			t.Fatalf("purchase by %s = %v; want 201", u, r)
		}
	}

	r := c.admin(http.MethodPut, fmt.Sprintf("/api/v1/admin/products/%d/stock", id), `{"stock":5}`)
	if r.status != http.StatusOK {
		t.Fatalf("PUT stock = %v; want 200", r)
	}
	wantKeys(t, "reset product", r.body, productKeys)
	var p product
	decode(t, r, &p)
	if want := (product{ID: id, Name: "phone", Stock: 5, InitialStock: 5}); p != want {
		t.Errorf("PUT stock = %+v; want %+v", p, want)
	}
	if want := (audit{ProductID: id, InitialStock: 5, Stock: 5, Consistent: true}); c.audit(id) != want {
		t.Errorf("audit after reset = %+v; want %+v (orders deleted)", c.audit(id), want)
	}
	// The orders are gone: the limit counts from zero and request IDs are free.
	r = c.purchase(id, "", `{"user_id":"u-1","quantity":1,"request_id":"r-u-1"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("purchase by u-1 after reset = %v; want 201", r)
	}
	var o order
	decode(t, r, &o)
	if o.RemainingStock != 4 {
		t.Errorf("order after reset = %+v; want 4 left", o)
	}

	r = c.admin(http.MethodPut, fmt.Sprintf("/api/v1/admin/products/%d/stock", id), `{"stock":0}`)
	if r.status != http.StatusOK {
		t.Fatalf("PUT stock 0 = %v; want 200", r)
	}
	wantError(t, "purchase after reset to 0", c.purchase(id, "", `{"user_id":"u-5","quantity":1}`), http.StatusConflict, "sold_out")
	wantError(t, "PUT stock of unknown product", c.admin(http.MethodPut, "/api/v1/admin/products/987654/stock", `{"stock":1}`),
		http.StatusNotFound, "product_not_found")
}

func TestAudit(t *testing.T) {
	t.Parallel()
	c := newClient(t, apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"}))
	id := c.createProduct("phone", 10)
	for i, q := range []int{1, 3, 2} {
		if r := c.purchase(id, "", fmt.Sprintf(`{"user_id":"u-%d","quantity":%d}`, i, q)); r.status != http.StatusCreated {
			t.Fatalf("purchase of %d = %v; want 201", q, r)
		}
	}
	// The audit is an admin's: without the token, 401.
	wantError(t, "GET audit without the token", c.get(fmt.Sprintf("/api/v1/products/%d/audit", id)), http.StatusUnauthorized, "unauthorized")
	r := c.admin(http.MethodGet, fmt.Sprintf("/api/v1/products/%d/audit", id), "")
	if r.status != http.StatusOK {
		t.Fatalf("GET audit = %v; want 200", r)
	}
	wantKeys(t, "audit", r.body, auditKeys)
	want := audit{ProductID: id, InitialStock: 10, Stock: 4, Orders: 3, UnitsSold: 6, OversoldUnits: 0, Consistent: true}
	var a audit
	decode(t, r, &a)
	if a != want {
		t.Errorf("audit = %+v; want %+v", a, want)
	}
	wantError(t, "audit of unknown product", c.admin(http.MethodGet, "/api/v1/products/987654/audit", ""), http.StatusNotFound, "product_not_found")
	wantError(t, "audit of product abc", c.admin(http.MethodGet, "/api/v1/products/abc/audit", ""), http.StatusBadRequest, "invalid_argument")
}

// TestAuditShowsOversell lets the unsafe strategy none oversell under
// concurrent buyers with a hold and checks that audit reports it: the
// audit's arithmetic, not whether this run happened to race.
func TestAuditShowsOversell(t *testing.T) {
	t.Parallel()
	c := newClient(t, apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"}))
	const stock, buyers = 2, 6
	id := c.createProduct("phone", stock)
	var g errgroup.Group
	for i := range buyers {
		g.Go(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := send(ctx, http.MethodPost, c.base+purchasePath(id, "strategy=none&hold_ms=300"),
				fmt.Sprintf(`{"user_id":"u-%d","quantity":1}`, i), c.auth())
			if err == nil && r.status != http.StatusCreated && r.status != http.StatusConflict {
				err = fmt.Errorf("purchase = %v; want 201 or 409", r)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	a := c.audit(id)
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
	c := newClient(t, apptest.Start(t, nil))
	id := c.createProduct("phone", 5)
	if r := c.purchase(id, "", `{"user_id":"u-1","quantity":1}`); r.status != http.StatusCreated {
		t.Fatalf("purchase = %v; want 201", r)
	}
	c.purchase(id, "", `{"user_id":"u-1","quantity":1}`) // limit_exceeded

	r := c.get("/metrics")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %s; want 200 text/plain", r.status, r.header.Get("Content-Type"))
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
		if !strings.Contains(string(r.body), want) {
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
	c := newClient(t, in)
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
	r := c.get("/metrics")
	if !strings.Contains(string(r.body), `seckill_purchases_total{outcome="lock_timeout",strategy="token"} 1`) ||
		!strings.Contains(string(r.body), `seckill_lock_failures_total{reason="timeout",strategy="token"} 1`) {
		t.Errorf("GET /metrics does not count the token lock_timeout")
	}
}

// lockTimeout runs TestLockTimeout for strategy s on a product of its own.
func lockTimeout(t *testing.T, in *apptest.Instance, s string) {
	c := newClient(t, in)
	id := c.createProduct("phone-"+s, 10)
	var (
		first chan response
		errc  chan error
	)
	for attempt := 1; ; attempt++ {
		first, errc = make(chan response, 1), make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// batch=1: a hold of the holder alone, so that the waiter who comes
			// while it takes the lock is not sold in the same hold.
			r, err := send(ctx, http.MethodPost, c.base+purchasePath(id, "strategy="+s+"&hold_ms=2000&batch=1"), `{"user_id":"holder","quantity":1}`, c.auth())
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
		if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"lock_timeout"`) || attempt == 5 {
			t.Fatalf("holding purchase ended before it held the lock (attempt %d): %v", attempt, r)
		}
	}

	r := c.purchase(id, "strategy="+s, `{"user_id":"waiter","quantity":1}`)
	wantError(t, "purchase while the lock is held", r, http.StatusServiceUnavailable, "lock_timeout")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("lock_timeout answer has no Retry-After header: %v", r.header)
	}

	if err := <-errc; err != nil {
		t.Fatalf("holding purchase: %v", err)
	}
	if r := <-first; r.status != http.StatusCreated {
		t.Errorf("holding purchase = %v; want 201", r)
	}
	want := audit{ProductID: id, InitialStock: 10, Stock: 9, Orders: 1, UnitsSold: 1, Consistent: true}
	if a := c.audit(id); a != want {
		t.Errorf("audit = %+v; want %+v", a, want)
	}
	// The lock was released: the next buyer gets it at once.
	if r := c.purchase(id, "strategy="+s, `{"user_id":"waiter","quantity":1}`); r.status != http.StatusCreated {
		t.Errorf("purchase after the holder finished = %v; want 201", r)
	}
}

// waitForLockHolder waits until a purchase of product id holds its lock
// under strategy (the lock's key is on the first Redis node); false when the
// purchase was answered first.
func waitForLockHolder(t *testing.T, in *apptest.Instance, strategy string, id int64, errc chan error) (held bool) {
	t.Helper()
	// Every Redis lock (setnx, token, redlock) is on the first node.
	node := redis.NewClient(&redis.Options{Addr: in.Config.RedisAddrs[0]})
	defer node.Close()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("a purchase of product %d to take its lock", id), func() bool {
		n, err := node.Exists(context.Background(), in.LockKey(strategy, id)).Result()
		if err != nil {
			t.Fatalf("EXISTS %s: %v", in.LockKey(strategy, id), err)
		}
		held = n > 0
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
	c := newClient(t, in)
	id := c.createProduct("phone", 5)
	for _, q := range []string{"strategy=none", "hold_ms=10", "pause_ms=10", "fencing=false", "batch=1"} {
		r := c.do(http.MethodPost, purchasePath(id, q), `{"user_id":"u-1","quantity":1}`, nil)
		wantError(t, q+" without the token", r, http.StatusUnauthorized, "unauthorized")
		r = c.do(http.MethodPost, purchasePath(id, q), `{"user_id":"u-1","quantity":1}`, map[string]string{"Authorization": "Bearer wrong"})
		wantError(t, q+" with a wrong token", r, http.StatusUnauthorized, "unauthorized")
	}
	if a := c.audit(id); a.Orders != 0 || a.Stock != 5 {
		t.Errorf("audit after refused purchases = %+v; want nothing sold", a)
	}
	if r := c.purchase(id, "strategy=none", `{"user_id":"u-1","quantity":1}`); r.status != http.StatusCreated {
		t.Errorf("purchase with the token = %v; want 201", r)
	}
	// The dashboard's calls need no token.
	if r := c.get("/api/v1/products"); r.status != http.StatusOK {
		t.Errorf("GET /api/v1/products = %v; want 200", r)
	}

	off := newClient(t, apptest.Start(t, map[string]string{"SECKILL_STRATEGY_OVERRIDE": "false"}))
	offID := off.createProduct("phone", 5)
	for _, header := range []map[string]string{nil, off.auth()} {
		r := off.do(http.MethodPost, purchasePath(offID, "strategy=none"), `{"user_id":"u-1","quantity":1}`, header)
		wantError(t, "override off", r, http.StatusForbidden, "strategy_override_disabled")
	}
}
