package docs_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestAPIMatchesTheDocument takes the service through every operation of
// docs/openapi.yaml and every answer each one lists, error codes included,
// through the validator: the failures the store can have (a database cut
// off, a COMMIT reply lost, a write refused, a Redis replica that does not
// acknowledge) are made for real. Every answer must be valid against the
// document the instance serves, and every answer the document lists must
// be given.
func TestAPIMatchesTheDocument(t *testing.T) {
	testenv.QuietRedis()
	direct := testenv.MySQL(t)
	proxy, dsn := testenv.Proxy(t, direct)
	reserveMaster := testenv.StartRedis(t)
	replica := testenv.StartRedisReplica(t, reserveMaster)
	// a: short lock waits and leases, so that lock_timeout and lock_lost
	// come quickly; a per-IP limit the validator's own client IPs stay
	// under; reserve on a master whose replica must acknowledge.
	a := apptest.Start(t, map[string]string{
		"SECKILL_MYSQL_DSN":       dsn,
		"SECKILL_LOCK_WAIT":       "500ms",
		"SECKILL_LOCK_TTL":        "500ms",
		"SECKILL_IP_LIMIT":        "3/1m",
		"SECKILL_TRUSTED_PROXIES": "127.0.0.1/32",
		"SECKILL_RESERVE_REDIS":   reserveMaster.Addr,
		"SECKILL_RESERVE_ACKS":    "1/100ms",
	})
	a2 := a.Another(t) // the same sale: another holder of the same locks
	// b: the override off, and orders that expire after a second.
	b := apptest.Start(t, map[string]string{"SECKILL_STRATEGY_OVERRIDE": "false", "SECKILL_PAYMENT_TIMEOUT": "1s"})
	// j: buyers known by their tokens.
	keys := t.TempDir()
	signer, err := buyer.NewKeyFiles(keys, "EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	j := apptest.Start(t, map[string]string{"SECKILL_BUYER_AUTH": "jwt", "SECKILL_BUYER_JWKS": filepath.Join(keys, "jwks.json")})
	// ap: a's sale, its orders paid by the provider's signed callbacks.
	ap := a.AnotherOn(t, map[string]string{"SECKILL_PAYMENT_SECRET": tourPaymentSecret})
	v := newValidator(t, a.URL, a2.URL, b.URL, j.URL, ap.URL)
	ca := caller{t: t, hc: v.client(), url: a.URL, token: a.AdminToken}
	ca2 := caller{t: t, hc: v.client(), url: a2.URL, token: a.AdminToken}
	cb := caller{t: t, hc: v.client(), url: b.URL, token: b.AdminToken}
	cj := caller{t: t, hc: v.client(), url: j.URL, token: j.AdminToken}
	cp := caller{t: t, hc: v.client(), url: ap.URL, token: a.AdminToken}
	db, err := sql.Open("mysql", direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	big := fmt.Sprintf(`{"user_id": "u-big", "quantity": 1, "request_id": %q}`, strings.Repeat("x", 5000))

	// Operations.
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/", "/openapi.json", "/openapi.yaml"} {
		ca.want(ca.do("GET", path, ""), 200, "")
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline"} {
		ca.want(ca.admin("GET", path, ""), 200, "")
		ca.want(ca.do("GET", path, ""), 401, "unauthorized")
	}
	ca.want(ca.admin("GET", "/debug/pprof/nosuch", ""), 404, "")
	ca.want(ca.admin("POST", "/debug/pprof/symbol", ""), 200, "")
	ca.want(ca.do("POST", "/debug/pprof/symbol", ""), 401, "unauthorized")
	ca.want(ca.do("GET", "/api/v1/nosuch", ""), 404, "not_found")
	ca.want(ca.do("GET", "/healthz/", ""), 404, "not_found") // not redirected
	ca.want(ca.do("GET", "/metrics", "", "Accept", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"), 200, "")
	ca.want(ca.admin("POST", "/debug/pprof/", ""), 200, "")
	ca.want(ca.do("POST", "/debug/pprof/", ""), 401, "unauthorized")
	ca.want(ca.admin("GET", "/debug/pprof/heap?seconds=abc", ""), 400, "")
	// Go's runtime takes one CPU profile at a time: one asked for while
	// another runs is refused (a 500 of net/http/pprof's own).
	testenv.Eventually(t, 30*time.Second, "a second CPU profile refused", func() bool {
		first := ca.async(func() reply { return ca.admin("GET", "/debug/pprof/profile?seconds=1", "") })
		time.Sleep(200 * time.Millisecond)
		second := ca.admin("GET", "/debug/pprof/profile?seconds=1", "")
		<-first
		return second.status == 500
	})
	ca.want(ca.do("DELETE", "/api/v1/products", ""), 405, "method_not_allowed")
	ca.want(ca.do("GET", "/api/v1/strategies", ""), 200, "")
	ca.want(ca.do("GET", "/api/v1/products", ""), 200, "")

	// The catalogue.
	const missing = "/api/v1/products/999999999"
	ca.want(ca.do("POST", "/api/v1/admin/products", `{"name": "x", "stock": 1}`), 401, "unauthorized")
	ca.want(ca.admin("POST", "/api/v1/admin/products", `{"name": "", "stock": 1}`), 400, "invalid_argument")
	ca.want(ca.admin("POST", "/api/v1/admin/products", big), 413, "payload_too_large")
	p := ca.create("phone", 10)
	pp := fmt.Sprintf("/api/v1/products/%d", p)
	ca.want(ca.do("GET", pp, ""), 200, "")
	ca.want(ca.do("GET", "/api/v1/products/abc", ""), 400, "invalid_argument")
	ca.want(ca.do("GET", missing, ""), 404, "product_not_found")
	stock := fmt.Sprintf("/api/v1/admin/products/%d/stock", p)
	ca.want(ca.do("PUT", stock, `{"stock": 10}`), 401, "unauthorized")
	ca.want(ca.admin("PUT", stock, `{"stock": -1}`), 400, "invalid_argument")
	ca.want(ca.admin("PUT", stock, big), 413, "payload_too_large")
	ca.want(ca.admin("PUT", "/api/v1/admin/products/999999999/stock", `{"stock": 1}`), 404, "product_not_found")
	ca.want(ca.admin("PUT", stock, `{"stock": 10}`), 200, "")

	// Purchases under a lock.
	first := ca.want(ca.buy(p, "", purchase("u-1", 1, "r-1")), 201, "")
	ca.want(ca.buy(p, "", purchase("u-1", 1, "r-1")), 200, "")
	ca.want(ca.buy(p, "", purchase("u-1", 2, "r-1")), 409, "request_id_reused")
	ca.want(ca.buy(p, "", purchase("u-1", 1, "r-2")), 409, "limit_exceeded")
	ca.want(ca.buy(p, "", `{"user_id": "u-1"}`), 400, "invalid_argument")
	ca.want(ca.buy(p, "", `{"user_id": "u-x", "quantity": 1, "request_id": null, "coupon": "none"}`), 201, "") // unknown members ignored
	ca.want(ca.buy(p, "", big), 413, "payload_too_large")
	ca.want(ca.do("POST", fmt.Sprintf("/api/v1/products/%d/purchase?hold_ms=1", p), purchase("u-3", 1, "")), 401, "unauthorized")
	ca.want(ca.do("POST", missing+"/purchase", purchase("u-3", 1, "")), 404, "product_not_found")
	cb.want(cb.do("POST", "/api/v1/products/1/purchase?strategy=redlock", purchase("u-3", 1, "")), 403, "strategy_override_disabled")
	one := ca.create("last one", 1)
	ca.want(ca.buy(one, "", purchase("u-a", 1, "")), 201, "")
	ca.want(ca.buy(one, "", purchase("u-b", 1, "")), 409, "sold_out")
	for i := range 4 { // the fourth from one address is over SECKILL_IP_LIMIT
		r := ca.do("POST", missing+"/purchase", purchase("u-ip", 1, ""), "X-Forwarded-For", "198.51.100.7")
		if i == 3 {
			ca.want(r, 429, "rate_limited")
		}
	}
	ca.want(ca.do("GET", "/api/v1/purchases/r-1", ""), 200, "")
	ca.want(ca.do("GET", "/api/v1/purchases/"+strings.Repeat("r", 65), ""), 400, "invalid_argument")
	ca.want(ca.do("GET", "/api/v1/purchases/never-made", ""), 404, "purchase_not_found")

	// Lock failures, between two instances (buyers of one instance wait in
	// line in-process: only another instance contends for the lock).
	held := ca.create("held", 10)
	done := ca.async(func() reply { return ca.buy(held, "hold_ms=2000&batch=1", purchase("u-h1", 1, "")) })
	testenv.Eventually(t, 10*time.Second, "the first buyer holding the lock", func() bool { return a.LockHolders(t, "redlock", held) >= 2 })
	ca2.want(ca2.buy(held, "", purchase("u-h2", 1, "")), 503, "lock_timeout")
	ca.want(<-done, 201, "")
	paused := ca.create("paused", 10)
	done = ca.async(func() reply { return ca.buy(paused, "pause_ms=3000&batch=1", purchase("u-p1", 1, "")) })
	testenv.Eventually(t, 10*time.Second, "the paused buyer holding the lock", func() bool { return a.LockHolders(t, "redlock", paused) >= 2 })
	time.Sleep(700 * time.Millisecond) // past its lease: the next holder overtakes it
	ca2.want(ca2.buy(paused, "", purchase("u-p2", 1, "")), 201, "")
	ca.want(<-done, 503, "lock_lost")

	// An order's life.
	order := fmt.Sprintf("/api/v1/orders/%d", first.OrderID)
	ca.want(ca.do("GET", order+"?user_id=u-1", ""), 200, "")
	ca.want(ca.admin("GET", order, ""), 200, "")
	ca.want(ca.do("GET", order+"?user_id=u-2", ""), 404, "order_not_found")
	ca.want(ca.do("GET", "/api/v1/orders/abc", ""), 400, "invalid_argument")
	ca.want(ca.do("POST", order+"/pay", `{"user_id": "u-1"}`), 200, "")
	ca.want(ca.do("POST", order+"/cancel", `{"user_id": "u-1"}`), 409, "order_paid")
	second := ca.want(ca.buy(p, "", purchase("u-2", 1, "r-3")), 201, "")
	order2 := fmt.Sprintf("/api/v1/orders/%d", second.OrderID)
	ca.want(ca.do("POST", order2+"/cancel", `{"user_id": "u-2"}`), 200, "")
	ca.want(ca.do("POST", order2+"/pay", `{"user_id": "u-2"}`), 409, "order_closed")
	for _, act := range []string{"/pay", "/cancel"} {
		ca.want(ca.do("POST", "/api/v1/orders/abc"+act, `{"user_id": "u-2"}`), 400, "invalid_argument")
		ca.want(ca.do("POST", "/api/v1/orders/999999999"+act, `{"user_id": "u-2"}`), 404, "order_not_found")
		ca.want(ca.do("POST", order2+act, big), 413, "payload_too_large")
	}
	bp := cb.create("expiring", 5)
	expiring := cb.want(cb.buy(bp, "", purchase("u-e", 1, "")), 201, "")
	expired := fmt.Sprintf("/api/v1/orders/%d", expiring.OrderID)
	testenv.Eventually(t, 10*time.Second, "the unpaid order expired", func() bool {
		var o api.Order
		r := cb.do("GET", expired+"?user_id=u-e", "")
		return r.status == 200 && json.Unmarshal(r.body, &o) == nil && o.Status == "expired"
	})
	cb.want(cb.do("POST", expired+"/cancel", `{"user_id": "u-e"}`), 409, "order_closed")

	// The admin's views.
	ca.want(ca.admin("GET", pp+"/orders?limit=1", ""), 200, "")
	ca.want(ca.do("GET", pp+"/orders", ""), 401, "unauthorized")
	ca.want(ca.admin("GET", pp+"/orders?limit=0", ""), 400, "invalid_argument")
	ca.want(ca.admin("GET", missing+"/orders", ""), 404, "product_not_found")
	ca.want(ca.admin("GET", pp+"/audit", ""), 200, "")
	ca.want(ca.do("GET", pp+"/audit", ""), 401, "unauthorized")
	ca.want(ca.admin("GET", "/api/v1/products/0/audit", ""), 400, "invalid_argument")
	ca.want(ca.admin("GET", missing+"/audit", ""), 404, "product_not_found")

	// reserve: a promise, its order, a refusal, and one that stands on the
	// master alone.
	rp := ca.create("reserved", 5)
	r := ca.want(ca.buy(rp, "strategy=reserve", purchase("u-r1", 1, "rr-1")), 202, "")
	if r.RemainingStock != 4 {
		t.Errorf("the reservation left %d; want 4", r.RemainingStock)
	}
	ca.waitState("rr-1", "ordered")
	ca.want(ca.buy(rp, "strategy=reserve", purchase("u-r1", 1, "rr-1")), 200, "")
	ca.want(ca.buy(rp, "strategy=redlock", purchase("u-r2", 1, "")), 409, "strategy_conflict")
	refused := ca.create("refused", 5)
	ca.want(ca.buy(refused, "strategy=reserve", purchase("u-f1", 1, "rf-1")), 202, "")
	ca.waitState("rf-1", "ordered")
	// The database now has fewer units than Redis counts: the next
	// reservation's order is refused.
	if _, err := db.Exec("UPDATE products SET stock = 0 WHERE id = ?", refused); err != nil {
		t.Fatal(err)
	}
	ca.want(ca.buy(refused, "strategy=reserve", purchase("u-f2", 1, "rf-2")), 202, "")
	ca.waitState("rf-2", "failed")
	unacked := ca.create("unacknowledged", 5)
	ca.want(ca.buy(unacked, "strategy=reserve", purchase("u-u1", 1, "")), 202, "")
	replica.Freeze(t)
	ca.want(ca.buy(unacked, "strategy=reserve", purchase("u-u2", 1, "ru-2")), 503, "outcome_unknown")
	replica.Thaw(t)
	ca.waitState("ru-2", "ordered") // the reservation stood on the master: its order was written

	// The database refuses to change an order: pay and cancel write
	// nothing and say so.
	third := ca.want(ca.buy(p, "", purchase("u-3", 1, "")), 201, "")
	order3 := fmt.Sprintf("/api/v1/orders/%d", third.OrderID)
	if _, err := db.Exec("CREATE TRIGGER refuse_order_updates BEFORE UPDATE ON orders FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'"); err != nil {
		t.Fatal(err)
	}
	ca.want(ca.do("POST", order3+"/pay", `{"user_id": "u-3"}`), 503, "unavailable")
	ca.want(ca.do("POST", order3+"/cancel", `{"user_id": "u-3"}`), 503, "unavailable")
	if _, err := db.Exec("DROP TRIGGER refuse_order_updates"); err != nil {
		t.Fatal(err)
	}

	// A cancel whose COMMIT reply is lost, and whose read-back cannot
	// learn its outcome either.
	proxy.HoldCommitReplies()
	ca.want(ca.do("POST", order3+"/cancel", `{"user_id": "u-3"}`), 503, "outcome_unknown")
	proxy.Pass()
	ca.want(ca.do("POST", order3+"/cancel", `{"user_id": "u-3"}`), 200, "")

	// The database cut off: every route that needs it answers 503, a
	// payment whose UPDATE was sent without an answer outcome_unknown.
	fourth := ca.want(ca.buy(p, "", purchase("u-4", 1, "")), 201, "")
	fifth := ca.want(ca.buy(p, "", purchase("u-6", 1, "")), 201, "")
	fresh := ca.create("fresh", 5)
	proxy.Partition()
	var wg sync.WaitGroup
	cutOff := func(c caller, status int, code string, call func() reply) {
		wg.Go(func() { c.want(call(), status, code) })
	}
	cutOff(ca, 503, "", func() reply { return ca.do("GET", "/readyz", "") })
	cutOff(ca, 503, "unavailable", func() reply { return ca.do("GET", "/api/v1/products", "") })
	cutOff(ca, 503, "unavailable", func() reply { return ca.do("GET", pp, "") })
	cutOff(ca, 503, "unavailable", func() reply { return ca.buy(fresh, "", purchase("u-5", 1, "")) })
	cutOff(ca, 503, "unavailable", func() reply { return ca.do("GET", "/api/v1/purchases/r-1", "") })
	cutOff(ca, 503, "unavailable", func() reply { return ca.do("GET", order+"?user_id=u-1", "") })
	cutOff(ca, 503, "unavailable", func() reply { return ca.admin("GET", pp+"/orders", "") })
	cutOff(ca, 503, "unavailable", func() reply { return ca.admin("GET", pp+"/audit", "") })
	cutOff(ca, 503, "unavailable", func() reply { return ca.admin("POST", "/api/v1/admin/products", `{"name": "y", "stock": 1}`) })
	cutOff(ca, 503, "unavailable", func() reply { return ca.admin("PUT", stock, `{"stock": 10}`) })
	cutOff(ca, 503, "unavailable", func() reply {
		return ca.do("POST", fmt.Sprintf("/api/v1/orders/%d/cancel", fourth.OrderID), `{"user_id": "u-4"}`)
	})
	cutOff(cp, 503, "unavailable", func() reply { return cp.payment(paymentOf("pay-cut", fifth.OrderID)) })
	cutOff(ca, 503, "outcome_unknown", func() reply {
		return ca.do("POST", fmt.Sprintf("/api/v1/orders/%d/pay", fourth.OrderID), `{"user_id": "u-4"}`)
	})
	wg.Wait()
	proxy.Heal()

	buyerTour(t, cj, signer)
	paymentTour(ca, cp, ca.create("paid by callback", 5))
	v.checkCoverage(t)
}

// buyerTour takes the buyer routes of an instance under
// SECKILL_BUYER_AUTH=jwt: without a token, and with a token naming
// another buyer than the body or the query.
func buyerTour(t *testing.T, c caller, signer *buyer.Signer) {
	tok, err := signer.BuyerToken("u-alice", "seckill", "", time.Now(), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	alice := []string{"Authorization", "Bearer " + tok}
	p := c.create("tokens", 5)
	path := fmt.Sprintf("/api/v1/products/%d/purchase", p)
	c.want(c.do("POST", path, purchase("u-alice", 1, "ra-1")), 401, "unauthenticated")
	c.want(c.do("POST", path, purchase("u-bob", 1, "ra-1"), alice...), 403, "forbidden")
	o := c.want(c.do("POST", path, `{"quantity": 1, "request_id": "ra-1"}`, alice...), 201, "")
	order := fmt.Sprintf("/api/v1/orders/%d", o.OrderID)
	c.want(c.do("GET", "/api/v1/purchases/ra-1", ""), 401, "unauthenticated")
	c.want(c.do("GET", "/api/v1/purchases/ra-1?user_id=u-bob", "", alice...), 403, "forbidden")
	c.want(c.do("GET", order+"?user_id=u-alice", ""), 401, "unauthenticated")
	c.want(c.do("GET", order+"?user_id=u-bob", "", alice...), 403, "forbidden")
	for _, action := range []string{"/pay", "/cancel"} {
		c.want(c.do("POST", order+action, `{"user_id": "u-alice"}`), 401, "unauthenticated")
		c.want(c.do("POST", order+action, `{"user_id": "u-bob"}`, alice...), 403, "forbidden")
	}
	c.want(c.do("POST", order+"/pay", `{}`, alice...), 200, "")
}

// caller makes the tour's calls of one instance through the validator.
type caller struct {
	t          *testing.T
	hc         *http.Client
	url, token string
}

// reply is an answer as it came.
type reply struct {
	method, path string
	status       int
	body         []byte
}

func (r reply) code() string { return errorCode(r.body) }

// do sends a request; header is name, value pairs.
func (c caller) do(method, path, body string, header ...string) reply {
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Errorf("%s %s: %v", method, path, err)
		return reply{method: method, path: path}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Errorf("%s %s: %v", method, path, err)
	}
	return reply{method, path, res.StatusCode, b}
}

// admin is do with the admin token.
func (c caller) admin(method, path, body string) reply {
	return c.do(method, path, body, "Authorization", "Bearer "+c.token)
}

// buy posts a purchase of product id; a query (the override's) goes with
// the admin token.
func (c caller) buy(id int64, query, body string) reply {
	path := fmt.Sprintf("/api/v1/products/%d/purchase", id)
	if query == "" {
		return c.do("POST", path, body)
	}
	return c.admin("POST", path+"?"+query, body)
}

// async runs call in a goroutine and hands over its reply.
func (c caller) async(call func() reply) <-chan reply {
	out := make(chan reply, 1)
	go func() { out <- call() }()
	return out
}

// result is the fields of the answers the tour reads on.
type result struct {
	ID             int64 `json:"id"`
	OrderID        int64 `json:"order_id"`
	RemainingStock int64 `json:"remaining_stock"`
}

// want fails the test unless r has status and, for an error, code; it
// returns what the tour reads of the body.
func (c caller) want(r reply, status int, code string) result {
	c.t.Helper()
	if r.status != status || code != "" && r.code() != code {
		c.t.Errorf("%s %s = %d %s; want %d %s", r.method, r.path, r.status, r.body, status, code)
	}
	var out result
	if status < 300 && strings.HasPrefix(string(r.body), "{") {
		if err := json.Unmarshal(r.body, &out); err != nil {
			c.t.Errorf("%s %s: %v", r.method, r.path, err)
		}
	}
	return out
}

// create creates a product and returns its id.
func (c caller) create(name string, stock int64) int64 {
	c.t.Helper()
	body, _ := json.Marshal(api.NewProduct{Name: name, Stock: stock})
	p := c.want(c.admin("POST", "/api/v1/admin/products", string(body)), 201, "")
	if p.ID == 0 {
		c.t.Fatalf("create %s: no id", name)
	}
	return p.ID
}

// waitState waits until GET /api/v1/purchases/{rid} says state.
func (c caller) waitState(rid, state string) {
	c.t.Helper()
	var last reply
	if !testenv.Until(15*time.Second, func() bool {
		last = c.do("GET", "/api/v1/purchases/"+rid, "")
		var s api.PurchaseState
		return last.status == 200 && json.Unmarshal(last.body, &s) == nil && s.State == state
	}) {
		c.t.Fatalf("purchase %s: %d %s after 15 s; want state %s", rid, last.status, last.body, state)
	}
}

// purchase is a purchase body.
func purchase(user string, quantity int64, rid string) string {
	b, _ := json.Marshal(api.Purchase{UserID: user, Quantity: quantity, RequestID: rid})
	return string(b)
}

const tourPaymentSecret = "whsec-tour"

// paymentOf is a payment callback's body.
func paymentOf(payment string, order int64) string {
	return fmt.Sprintf(`{"payment_id": %q, "order_id": %d}`, payment, order)
}

// payment sends the provider's callback with body, signed now.
func (c caller) payment(body string) reply {
	return c.do("POST", "/api/v1/payments", body, api.SignatureHeader, api.SignPayment(tourPaymentSecret, time.Now(), []byte(body)))
}

// paymentTour takes the provider's callback: at a, which takes none, and
// at cp, whose orders it pays (product p is on sale at both).
func paymentTour(ca, cp caller, p int64) {
	paid := ca.want(ca.buy(p, "", purchase("u-p1", 1, "")), 201, "")
	ca.want(ca.payment(paymentOf("pay-1", paid.OrderID)), 403, "forbidden")
	cp.want(cp.do("POST", fmt.Sprintf("/api/v1/orders/%d/pay", paid.OrderID), `{"user_id": "u-p1"}`), 403, "forbidden")
	cp.want(cp.do("POST", "/api/v1/payments", paymentOf("pay-1", paid.OrderID)), 401, "unauthenticated")
	cp.want(cp.payment(paymentOf("pay-1", paid.OrderID)), 200, "")
	cp.want(cp.payment(paymentOf("pay-1", paid.OrderID)), 200, "") // the provider's retry
	cp.want(cp.payment(paymentOf("pay-2", 999999)), 404, "order_not_found")
	cp.want(cp.payment(`{"order_id": 1}`), 400, "invalid_argument")
	cp.want(cp.payment(strings.Repeat(" ", 5000)), 413, "payload_too_large")
	closed := ca.want(ca.buy(p, "", purchase("u-p2", 1, "")), 201, "")
	ca.want(ca.do("POST", fmt.Sprintf("/api/v1/orders/%d/cancel", closed.OrderID), `{"user_id": "u-p2"}`), 200, "")
	cp.want(cp.payment(paymentOf("pay-3", closed.OrderID)), 409, "order_closed")
}
