package controller_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testkit/apptest"
)

// TestMalformedRequests: every malformed request answers its 4xx and the
// contract's error body, never a 500.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"})
	id := in.Create(t, "phone", 1000)
	for _, tc := range malformedRequests(id) {
		header := map[string]string{}
		wantsToken := strings.Contains(tc.path, "?") || strings.HasSuffix(tc.path, "/audit")
		if tc.auth == authAdmin || (tc.auth == "" && wantsToken) {
			header["Authorization"] = "Bearer " + in.AdminToken
		}
		r := in.Do(t, tc.method, tc.path, tc.body, header)
		apptest.WantError(t, fmt.Sprintf("%s: %s %s", tc.name, tc.method, tc.path), r, tc.status, tc.code)
		if tc.status == http.StatusMethodNotAllowed && r.Header.Get("Allow") == "" {
			t.Errorf("%s: 405 without an Allow header", tc.name)
		}
	}

	// None of them sold anything or changed the product.
	if p := in.Product(t, id); p.Stock != 1000 || p.InitialStock != 1000 {
		t.Errorf("product after the malformed requests = %+v; want 1000 of 1000", p)
	}
	if r := in.Get(t, "/api/v1/products"); strings.Count(string(r.Body), `"id"`) != 1 {
		t.Errorf("GET /api/v1/products = %v; want only the one product", r)
	}
}

// The auth of a malformed request: authAdmin sends the token; "" sends it
// too where the contract wants it (the override's parameters, the audit),
// so that the case tests what it names; authAnonymous never does.
const authAdmin, authAnonymous = "admin", "anonymous"

// malformedRequest is one request TestMalformedRequests sends and the
// error it wants back.
type malformedRequest struct {
	name         string
	method, path string
	body         string
	auth         string // authAdmin: the admin token
	status       int
	code         string
}

// malformedRequests are TestMalformedRequests' cases against the product
// id, one on sale with 1000 units.
func malformedRequests(id int64) []malformedRequest {
	purchase := apptest.PurchasePath(id, "")
	product := fmt.Sprintf("/api/v1/products/%d", id)
	stock := fmt.Sprintf("/api/v1/admin/products/%d/stock", id)
	const ok = `{"user_id":"u-1","quantity":1}`
	const admin, anonymous = authAdmin, authAnonymous
	return []malformedRequest{
		// Product IDs.
		{"product id abc", "GET", "/api/v1/products/abc", "", "", 400, "invalid_argument"},
		{"product id 0", "GET", "/api/v1/products/0", "", "", 400, "invalid_argument"},
		{"product id -1", "GET", "/api/v1/products/-1", "", "", 400, "invalid_argument"},
		{"product id 1.5", "GET", "/api/v1/products/1.5", "", "", 400, "invalid_argument"},
		{"product id 0x10", "GET", "/api/v1/products/0x10", "", "", 400, "invalid_argument"},
		{"product id beyond int64", "GET", "/api/v1/products/99999999999999999999", "", "", 400, "invalid_argument"},
		{"product id max int64", "GET", "/api/v1/products/9223372036854775807", "", "", 404, "product_not_found"},
		{"purchase product id abc", "POST", "/api/v1/products/abc/purchase", ok, "", 400, "invalid_argument"},
		{"purchase product id 0", "POST", "/api/v1/products/0/purchase", ok, "", 400, "invalid_argument"},
		{"purchase product id -1", "POST", "/api/v1/products/-1/purchase", ok, "", 400, "invalid_argument"},
		{"purchase product id beyond int64", "POST", "/api/v1/products/99999999999999999999/purchase", ok, "", 400, "invalid_argument"},
		{"purchase product id max int64", "POST", "/api/v1/products/9223372036854775807/purchase", ok, "", 404, "product_not_found"},
		{"audit product id -1", "GET", "/api/v1/products/-1/audit", "", "", 400, "invalid_argument"},
		{"audit product id beyond int64", "GET", "/api/v1/products/99999999999999999999/audit", "", "", 400, "invalid_argument"},
		{"stock product id abc", "PUT", "/api/v1/admin/products/abc/stock", `{"stock":1}`, admin, 400, "invalid_argument"},
		{"stock product id 0", "PUT", "/api/v1/admin/products/0/stock", `{"stock":1}`, admin, 400, "invalid_argument"},

		// Purchase bodies.
		{"no body", "POST", purchase, "", "", 400, "invalid_argument"},
		{"malformed JSON", "POST", purchase, `{"user_id":"u-1",`, "", 400, "invalid_argument"},
		{"not JSON", "POST", purchase, `user_id=u-1&quantity=1`, "", 400, "invalid_argument"},
		{"JSON array", "POST", purchase, `[{"user_id":"u-1","quantity":1}]`, "", 400, "invalid_argument"},
		{"JSON string", "POST", purchase, `"u-1"`, "", 400, "invalid_argument"},
		{"JSON null", "POST", purchase, `null`, "", 400, "invalid_argument"},
		{"two objects", "POST", purchase, ok + ok, "", 400, "invalid_argument"},
		{"trailing garbage", "POST", purchase, ok + ` x`, "", 400, "invalid_argument"},
		{"trailing brace", "POST", purchase, ok + `}`, "", 400, "invalid_argument"},
		{"trailing bracket", "POST", purchase, ok + `]`, "", 400, "invalid_argument"},
		{"quantity as string", "POST", purchase, `{"user_id":"u-1","quantity":"1"}`, "", 400, "invalid_argument"},
		{"quantity 1.5", "POST", purchase, `{"user_id":"u-1","quantity":1.5}`, "", 400, "invalid_argument"},
		{"quantity 1e0", "POST", purchase, `{"user_id":"u-1","quantity":1e0}`, "", 400, "invalid_argument"},
		{"quantity beyond int64", "POST", purchase, `{"user_id":"u-1","quantity":99999999999999999999}`, "", 400, "invalid_argument"},
		{"quantity null", "POST", purchase, `{"user_id":"u-1","quantity":null}`, "", 400, "invalid_argument"},
		{"user_id as number", "POST", purchase, `{"user_id":5,"quantity":1}`, "", 400, "invalid_argument"},
		{"request_id as number", "POST", purchase, `{"user_id":"u-1","quantity":1,"request_id":5}`, "", 400, "invalid_argument"},
		{"missing user_id", "POST", purchase, `{"quantity":1}`, "", 400, "invalid_argument"},
		{"missing quantity", "POST", purchase, `{"user_id":"u-1"}`, "", 400, "invalid_argument"},
		{"empty object", "POST", purchase, `{}`, "", 400, "invalid_argument"},
		{"empty user_id", "POST", purchase, `{"user_id":"","quantity":1}`, "", 400, "invalid_argument"},
		{"blank user_id", "POST", purchase, `{"user_id":"   ","quantity":1}`, "", 400, "invalid_argument"},
		{"user_id 65 characters", "POST", purchase, fmt.Sprintf(`{"user_id":%q,"quantity":1}`, strings.Repeat("u", 65)), "", 400, "invalid_argument"},
		{"quantity 0", "POST", purchase, `{"user_id":"u-1","quantity":0}`, "", 400, "invalid_argument"},
		{"quantity -1", "POST", purchase, `{"user_id":"u-1","quantity":-1}`, "", 400, "invalid_argument"},
		{"quantity 101", "POST", purchase, `{"user_id":"u-1","quantity":101}`, "", 400, "invalid_argument"},
		{"request_id 65 characters", "POST", purchase, fmt.Sprintf(`{"user_id":"u-1","quantity":1,"request_id":%q}`, strings.Repeat("r", 65)), "", 400, "invalid_argument"},
		// Input that would silently merge identities or change the purchase.
		{"user_id of invalid UTF-8", "POST", purchase, "{\"user_id\":\"u-\xff\",\"quantity\":1}", "", 400, "invalid_argument"},
		{"user_id with a lone surrogate", "POST", purchase, `{"user_id":"u-\ud800","quantity":1}`, "", 400, "invalid_argument"},
		{"request_id of invalid UTF-8", "POST", purchase, "{\"user_id\":\"u-1\",\"quantity\":1,\"request_id\":\"r-\xc3\"}", "", 400, "invalid_argument"},
		{"user_id with NUL", "POST", purchase, `{"user_id":"u\u0000","quantity":1}`, "", 400, "invalid_argument"},
		{"user_id with a tab", "POST", purchase, `{"user_id":"u\t1","quantity":1}`, "", 400, "invalid_argument"},
		{"user_id with a newline", "POST", purchase, `{"user_id":"u\n1","quantity":1}`, "", 400, "invalid_argument"},
		{"request_id with a newline", "POST", purchase, `{"user_id":"u-1","quantity":1,"request_id":"r\n1"}`, "", 400, "invalid_argument"},
		{"quantity given twice", "POST", purchase, `{"user_id":"u-1","quantity":1,"quantity":100}`, "", 400, "invalid_argument"},
		{"user_id given twice", "POST", purchase, `{"user_id":"u-1","user_id":"u-2","quantity":1}`, "", 400, "invalid_argument"},
		{"request_id given twice", "POST", purchase, `{"user_id":"u-1","quantity":1,"request_id":"r-1","request_id":"r-1"}`, "", 400, "invalid_argument"},
		// Near misses of the body the fast decoder reads (decodePurchaseFast).
		{"user_id null", "POST", purchase, `{"user_id":null,"quantity":1}`, "", 400, "invalid_argument"},
		{"user_id in other case", "POST", purchase, `{"User_ID":"u-1","quantity":1}`, "", 400, "invalid_argument"},
		{"quantity -0", "POST", purchase, `{"user_id":"u-1","quantity":-0}`, "", 400, "invalid_argument"},
		{"quantity 01", "POST", purchase, `{"user_id":"u-1","quantity":01}`, "", 400, "invalid_argument"},
		{"trailing comma", "POST", purchase, `{"user_id":"u-1","quantity":1,}`, "", 400, "invalid_argument"},
		{"vertical tab before the body", "POST", purchase, "\v" + ok, "", 400, "invalid_argument"},
		{"strategy=%zz", "POST", apptest.PurchasePath(id, "strategy=%zz"), ok, "", 400, "invalid_argument"},
		{"strategy given twice", "POST", apptest.PurchasePath(id, "strategy=none&strategy=redlock"), ok, "", 400, "invalid_argument"},
		{"body over 4 KiB", "POST", purchase, fmt.Sprintf(`{"user_id":"u-1","quantity":1,"pad":%q}`, strings.Repeat("x", 5000)), "", 413, "payload_too_large"},

		// Query parameters under the override.
		{"strategy=bogus", "POST", apptest.PurchasePath(id, "strategy=bogus"), ok, "", 400, "invalid_argument"},
		{"strategy empty", "POST", apptest.PurchasePath(id, "strategy="), ok, "", 400, "invalid_argument"},
		{"strategy=REDLOCK", "POST", apptest.PurchasePath(id, "strategy=REDLOCK"), ok, "", 400, "invalid_argument"},
		{"hold_ms=-1", "POST", apptest.PurchasePath(id, "hold_ms=-1"), ok, "", 400, "invalid_argument"},
		{"hold_ms=10001", "POST", apptest.PurchasePath(id, "hold_ms=10001"), ok, "", 400, "invalid_argument"},
		{"hold_ms=abc", "POST", apptest.PurchasePath(id, "hold_ms=abc"), ok, "", 400, "invalid_argument"},
		{"hold_ms=1.5", "POST", apptest.PurchasePath(id, "hold_ms=1.5"), ok, "", 400, "invalid_argument"},
		{"hold_ms empty", "POST", apptest.PurchasePath(id, "hold_ms="), ok, "", 400, "invalid_argument"},
		{"hold_ms beyond int64", "POST", apptest.PurchasePath(id, "hold_ms=99999999999999999999"), ok, "", 400, "invalid_argument"},
		{"fencing=maybe", "POST", apptest.PurchasePath(id, "fencing=maybe"), ok, "", 400, "invalid_argument"},

		// The override's parameters and the audit without the token.
		{"override without the token", "POST", apptest.PurchasePath(id, "strategy=none"), ok, anonymous, 401, "unauthorized"},
		{"hold_ms without the token", "POST", apptest.PurchasePath(id, "hold_ms=100"), ok, anonymous, 401, "unauthorized"},
		{"audit without the token", "GET", product + "/audit", "", anonymous, 401, "unauthorized"},

		// Routes and methods.
		{"unknown route", "GET", "/nope", "", "", 404, "not_found"},
		{"unknown API route", "GET", "/api/v1/orders", "", "", 404, "not_found"},
		{"unknown product subroute", "GET", product + "/nope", "", "", 404, "not_found"},
		{"DELETE product", "DELETE", product, "", "", 405, "method_not_allowed"},
		{"GET purchase", "GET", purchase, "", "", 405, "method_not_allowed"},
		{"PUT purchase", "PUT", purchase, ok, "", 405, "method_not_allowed"},
		{"POST healthz", "POST", "/healthz", "", "", 405, "method_not_allowed"},
		{"POST products", "POST", "/api/v1/products", `{"name":"x","stock":1}`, "", 405, "method_not_allowed"},
		{"GET admin products", "GET", "/api/v1/admin/products", "", admin, 405, "method_not_allowed"},

		// Admin bodies.
		{"create with stock -1", "POST", "/api/v1/admin/products", `{"name":"x","stock":-1}`, admin, 400, "invalid_argument"},
		{"create beyond the most stock", "POST", "/api/v1/admin/products", `{"name":"x","stock":1000000001}`, admin, 400, "invalid_argument"},
		{"create with stock as string", "POST", "/api/v1/admin/products", `{"name":"x","stock":"5"}`, admin, 400, "invalid_argument"},
		{"create with stock 1.5", "POST", "/api/v1/admin/products", `{"name":"x","stock":1.5}`, admin, 400, "invalid_argument"},
		{"create without name", "POST", "/api/v1/admin/products", `{"stock":1}`, admin, 400, "invalid_argument"},
		{"create without stock", "POST", "/api/v1/admin/products", `{"name":"x"}`, admin, 400, "invalid_argument"},
		{"create with empty name", "POST", "/api/v1/admin/products", `{"name":"","stock":1}`, admin, 400, "invalid_argument"},
		{"create with name of 129 characters", "POST", "/api/v1/admin/products", fmt.Sprintf(`{"name":%q,"stock":1}`, strings.Repeat("n", 129)), admin, 400, "invalid_argument"},
		{"create with name as number", "POST", "/api/v1/admin/products", `{"name":5,"stock":1}`, admin, 400, "invalid_argument"},
		{"create with malformed JSON", "POST", "/api/v1/admin/products", `{"name":`, admin, 400, "invalid_argument"},
		{"create without body", "POST", "/api/v1/admin/products", "", admin, 400, "invalid_argument"},
		{"create with body over 4 KiB", "POST", "/api/v1/admin/products", fmt.Sprintf(`{"name":%q,"stock":1}`, strings.Repeat("n", 5000)), admin, 413, "payload_too_large"},
		{"stock -1", "PUT", stock, `{"stock":-1}`, admin, 400, "invalid_argument"},
		{"stock missing", "PUT", stock, `{}`, admin, 400, "invalid_argument"},
		{"stock as string", "PUT", stock, `{"stock":"1"}`, admin, 400, "invalid_argument"},
		{"stock malformed JSON", "PUT", stock, `{"stock":`, admin, 400, "invalid_argument"},
		{"stock body over 4 KiB", "PUT", stock, `{"stock":1,"pad":"` + strings.Repeat("x", 5000) + `"}`, admin, 413, "payload_too_large"},
	}
}

// TestRequestLimitsAccepted: the edges of the limits are accepted.
func TestRequestLimitsAccepted(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"})
	id := in.Create(t, "phone", 1000)
	body4K := `{"user_id":"pad","quantity":1}`
	body4K += strings.Repeat(" ", 4<<10-len(body4K))

	for _, tc := range []struct {
		name, query, body string
	}{
		{"user_id of 64 characters", "", fmt.Sprintf(`{"user_id":%q,"quantity":1}`, strings.Repeat("u", 64))},
		{"user_id of 64 non-ASCII characters", "", fmt.Sprintf(`{"user_id":%q,"quantity":1}`, strings.Repeat("ü", 64))},
		{"request_id of 64 characters", "", fmt.Sprintf(`{"user_id":"u-1","quantity":1,"request_id":%q}`, strings.Repeat("r", 64))},
		{"quantity 100", "", `{"user_id":"u-1","quantity":100}`},
		{"body of exactly 4 KiB", "", body4K},
		{"unknown fields are ignored", "", `{"user_id":"u-1","quantity":1,"coupon":"FREE","extra":{"a":[1,2]}}`},
		{"empty request_id is no request_id", "", `{"user_id":"u-1","quantity":1,"request_id":""}`},
		{"hold_ms=0", "hold_ms=0", `{"user_id":"u-1","quantity":1}`},
		{"fencing=false", "fencing=false", `{"user_id":"u-1","quantity":1}`},
		{"fencing=1", "fencing=1", `{"user_id":"u-1","quantity":1}`},
	} {
		r := in.PostPurchase(t, id, tc.query, tc.body)
		if r.Status != http.StatusCreated {
			t.Errorf("%s: purchase = %v; want 201", tc.name, r)
		}
	}
	if a := in.Audit(t, id); !a.Consistent || a.UnitsSold != 109 || a.Orders != 10 {
		t.Errorf("audit = %+v; want 10 orders of 109 units, consistent", a)
	}

	for _, tc := range []struct {
		name string
		body string
		want int64
	}{
		{"stock 0", `{"name":"zero","stock":0}`, 0},
		{"the most stock", `{"name":"many","stock":1000000000}`, 1000000000},
		{"name of 128 characters", fmt.Sprintf(`{"name":%q,"stock":1}`, strings.Repeat("n", 128)), 1},
		{"non-ASCII name", `{"name":"手机 📱","stock":1}`, 1},
	} {
		r := in.Admin(t, http.MethodPost, "/api/v1/admin/products", tc.body)
		if r.Status != http.StatusCreated {
			t.Errorf("%s: create = %v; want 201", tc.name, r)
			continue
		}
		var p product
		apptest.Decode(t, r, &p)
		if p.Stock != tc.want || p.InitialStock != tc.want || !strings.Contains(tc.body, fmt.Sprintf("%q", p.Name)) {
			t.Errorf("%s: created %+v from %s", tc.name, p, tc.body)
		}
	}
}

// TestOverrideDisabled: without SECKILL_STRATEGY_OVERRIDE any of strategy,
// hold_ms and fencing answers 403, even when its value is fine.
func TestOverrideDisabled(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_STRATEGY_OVERRIDE": "false", "SECKILL_PER_USER_LIMIT": "0"})
	id := in.Create(t, "phone", 10)
	const ok = `{"user_id":"u-1","quantity":1}`
	for _, query := range []string{
		"strategy=token", "strategy=redlock", "strategy=bogus", "strategy=",
		"hold_ms=0", "hold_ms=100", "hold_ms=-1",
		"fencing=true", "fencing=false", "fencing=maybe",
		"strategy=none&hold_ms=0&fencing=false",
	} {
		apptest.WantError(t, "purchase ?"+query, in.PostPurchase(t, id, query, ok), http.StatusForbidden, "strategy_override_disabled")
	}
	// Other query parameters are not the override's business.
	r := in.PostPurchase(t, id, "utm_source=mail", ok)
	if r.Status != http.StatusCreated {
		t.Fatalf("purchase without override parameters = %v; want 201", r)
	}
	var o order
	apptest.Decode(t, r, &o)
	if o.Strategy != "redlock" {
		t.Errorf("order strategy = %q; want the default, redlock", o.Strategy)
	}
	if p := in.Product(t, id); p.Stock != 9 {
		t.Errorf("stock = %d; want 9: the refused purchases sold nothing", p.Stock)
	}
}

// TestDefaultStrategyFromConfig: SECKILL_LOCK picks the strategy of a
// purchase that names none.
func TestDefaultStrategyFromConfig(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_LOCK": "optimistic"})
	id := in.Create(t, "phone", 10)
	r := in.PostPurchase(t, id, "", `{"user_id":"u-1","quantity":1}`)
	var o order
	if r.Status == http.StatusCreated {
		apptest.Decode(t, r, &o)
	}
	if r.Status != http.StatusCreated || o.Strategy != "optimistic" {
		t.Errorf("purchase = %v; want 201 by optimistic", r)
	}
}
