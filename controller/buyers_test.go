package controller_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/controller"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// idp is an identity provider of the test's own: one key, its JWK Set in
// a file.
type idp struct {
	signer *buyer.Signer
	jwks   string // the file
}

func newIDP(t *testing.T, alg string) *idp {
	t.Helper()
	dir := t.TempDir()
	s, err := buyer.NewKeyFiles(dir, alg)
	if err != nil {
		t.Fatal(err)
	}
	return &idp{signer: s, jwks: filepath.Join(dir, "jwks.json")}
}

// bearer is the header of a token for sub.
func (p *idp) bearer(t *testing.T, sub string) map[string]string {
	t.Helper()
	tok, err := p.signer.BuyerToken(sub, "seckill", "", time.Now(), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"Authorization": "Bearer " + tok}
}

// TestBuyerJWT: under SECKILL_BUYER_AUTH=jwt a buyer route without a valid
// token answers 401 with its challenge and sells nothing; the token's sub
// is the buyer (a body may leave user_id out, and one naming another buyer
// is 403); another buyer's order and purchase are 404, as unknown ones;
// the admin token stands for any buyer.
func TestBuyerJWT(t *testing.T) {
	t.Parallel()
	p := newIDP(t, "ES256")
	in := apptest.Start(t, map[string]string{"SECKILL_BUYER_AUTH": "jwt", "SECKILL_BUYER_JWKS": p.jwks})
	id := in.Create(t, "lamp", 5)
	path := apptest.PurchasePath(id, "")

	for name, tc := range map[string]struct {
		header  map[string]string
		invalid bool // error="invalid_token" in the challenge: a bearer token was sent
	}{
		"no token":                    {nil, false},
		"garbled token":               {map[string]string{"Authorization": "Bearer abc.def.ghi"}, true},
		"another scheme":              {map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, false},
		"a token of another provider": {newIDP(t, "ES256").bearer(t, "alice"), true},
		"a sub that is no user ID":    {p.bearer(t, strings.Repeat("x", 65)), true},
	} {
		r := in.Do(t, http.MethodPost, path, `{"user_id":"alice","quantity":1}`, tc.header)
		apptest.WantError(t, "a purchase with "+name, r, http.StatusUnauthorized, "unauthenticated")
		challenge := r.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(challenge, `Bearer realm="seckill"`) || strings.Contains(challenge, "invalid_token") != tc.invalid {
			t.Errorf("a purchase with %s: WWW-Authenticate %q; want the Bearer challenge, invalid_token when a bearer token was sent", name, challenge)
		}
	}

	alice := p.bearer(t, "alice")
	r := in.Do(t, http.MethodPost, path, `{"user_id":"bob","quantity":1}`, alice)
	apptest.WantError(t, "alice buying as bob", r, http.StatusForbidden, "forbidden")

	r = in.Do(t, http.MethodPost, path, `{"quantity":1,"request_id":"alice-1"}`, alice)
	if r.Status != http.StatusCreated {
		t.Fatalf("alice's purchase without user_id = %v; want 201", r)
	}
	var o order
	apptest.Decode(t, r, &o)
	if o.UserID != "alice" {
		t.Errorf("alice's order is %q's; want alice's", o.UserID)
	}
	// The per-user limit (1) counts the buyer the token names.
	r = in.Do(t, http.MethodPost, path, `{"user_id":"alice","quantity":1}`, alice)
	apptest.WantError(t, "alice's second unit", r, http.StatusConflict, "limit_exceeded")

	orderPath := fmt.Sprintf("/api/v1/orders/%d", o.OrderID)
	bob := p.bearer(t, "bob")
	for _, tc := range []struct {
		what   string
		method string
		path   string
		body   string
		header map[string]string
		status int
		code   string
	}{
		{"bob reading alice's order", http.MethodGet, orderPath, "", bob, http.StatusNotFound, "order_not_found"},
		{"bob naming alice in the query", http.MethodGet, orderPath + "?user_id=alice", "", bob, http.StatusForbidden, "forbidden"},
		{"bob cancelling as alice", http.MethodPost, orderPath + "/cancel", `{"user_id":"alice"}`, bob, http.StatusForbidden, "forbidden"},
		{"bob paying as alice", http.MethodPost, orderPath + "/pay", `{"user_id":"alice"}`, bob, http.StatusForbidden, "forbidden"},
		{"bob naming alice in a cancel's query", http.MethodPost, orderPath + "/cancel?user_id=alice", `{}`, bob, http.StatusForbidden, "forbidden"},
		{"bob naming alice in a purchase's query", http.MethodGet, "/api/v1/purchases/alice-1?user_id=alice", "", bob, http.StatusForbidden, "forbidden"},
		{"paying without a token", http.MethodPost, orderPath + "/pay", `{"user_id":"alice"}`, nil, http.StatusUnauthorized, "unauthenticated"},
		{"reading a purchase without a token", http.MethodGet, "/api/v1/purchases/alice-1", "", nil, http.StatusUnauthorized, "unauthenticated"},
		{"bob reading alice's purchase", http.MethodGet, "/api/v1/purchases/alice-1", "", bob, http.StatusNotFound, "purchase_not_found"},
		{"bob cancelling alice's order", http.MethodPost, orderPath + "/cancel", `{}`, bob, http.StatusNotFound, "order_not_found"},
		{"bob paying alice's order", http.MethodPost, orderPath + "/pay", `{"user_id":"bob"}`, bob, http.StatusNotFound, "order_not_found"},
		{"cancelling without a token", http.MethodPost, orderPath + "/cancel", `{"user_id":"alice"}`, nil, http.StatusUnauthorized, "unauthenticated"},
		{"reading without a token", http.MethodGet, orderPath + "?user_id=alice", "", nil, http.StatusUnauthorized, "unauthenticated"},
	} {
		apptest.WantError(t, tc.what, in.Do(t, tc.method, tc.path, tc.body, tc.header), tc.status, tc.code)
	}
	for _, path := range []string{orderPath, "/api/v1/purchases/alice-1"} {
		if r := in.Do(t, http.MethodGet, path, "", alice); r.Status != http.StatusOK {
			t.Errorf("alice: GET %s = %v; want 200", path, r)
		}
	}
	if r := in.Do(t, http.MethodPost, orderPath+"/pay", `{}`, alice); r.Status != http.StatusOK {
		t.Errorf("alice paying her order = %v; want 200", r)
	}
	// The admin token stands for any buyer, as under open.
	r = in.Do(t, http.MethodPost, path, `{"user_id":"carol","quantity":1}`, in.AdminHeader())
	if r.Status != http.StatusCreated {
		t.Errorf("the admin buying for carol = %v; want 201", r)
	}
	if a := in.Audit(t, id); !a.Consistent || a.UnitsSold != 2 {
		t.Errorf("audit = %+v; want 2 units sold (alice's and carol's), consistent", a)
	}
	metrics := in.Get(t, "/metrics")
	for _, want := range []string{`seckill_auth_failures_total{reason="missing"} 6`, `seckill_auth_failures_total{reason="malformed"} 1`, `seckill_auth_failures_total{reason="subject"} 1`, `seckill_auth_failures_total{reason="unknown_key"} 1`} {
		if !strings.Contains(string(metrics.Body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestBuyerJWTNeedsKeys: a JWK Set that cannot be read or holds no usable
// key stops the instance, naming the variable.
func TestBuyerJWTNeedsKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hmacOnly := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(hmacOnly, []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, vars := range []map[string]string{
		{"SECKILL_BUYER_JWKS": hmacOnly},
		{"SECKILL_BUYER_JWKS": filepath.Join(dir, "missing.json")},
		{"SECKILL_BUYER_JWKS": gone.URL + "/jwks.json"},
		{"SECKILL_BUYER_ISSUER": gone.URL},
	} {
		vars["SECKILL_BUYER_AUTH"] = "jwt"
		cfg, err := config.Load(func(k string) string { return vars[k] }, false)
		if err != nil {
			t.Fatal(err)
		}
		v, err := app.OpenBuyers(t.Context(), cfg, log)
		want := "SECKILL_BUYER_JWKS"
		if vars["SECKILL_BUYER_JWKS"] == "" {
			want = "SECKILL_BUYER_ISSUER"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: OpenBuyers = %v, %v; want an error naming %s", vars, v, err, want)
		}
	}
}

// TestRefusedTokensFillNoLog: a flood of refused buyer tokens is logged as
// the access log's sampler allows (the first 100 a second, then one in
// 100), with no line of its own per refusal: the refusals are counted by
// reason in seckill_auth_failures_total, and logged at debug level only.
func TestRefusedTokensFillNoLog(t *testing.T) {
	t.Parallel()
	var out testenv.Buffer
	log := slog.New(controller.LogHandler(slog.NewJSONHandler(&out, nil))) // Info and above
	p := newIDP(t, "ES256")
	keys, err := buyer.NewKeys(t.Context(), p.jwks, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := &stepClock{}
	clock.set(time.Unix(1_800_000_000, 0), 0)
	r := newRouted(t, log, nil, controller.Options{Clock: clock.Now,
		Buyers: controller.NewBuyers(buyer.NewVerifier(keys, "seckill", "", nil))})
	e := newExchange(http.MethodPost, "/api/v1/products/1/purchase")
	e.req.Header.Set("Authorization", "Bearer abc.def.ghi")
	const flood = 300
	for range flood {
		if status := e.serve(r, []byte(`{"user_id":"alice","quantity":1}`)); status != http.StatusUnauthorized {
			t.Fatalf("a purchase with a garbled token = %d %s; want 401", status, e.out.Bytes())
		}
	}
	lines, _, _ := accessLogCounts(t, &out)
	if n := lines[accessLogKey{"/api/v1/products/:id/purchase", 401}]; n != 102 {
		t.Errorf("%d refused purchases in one second wrote %d access log lines; want 102 (100, then one in 100)", flood, n)
	}
	if n := len(records(t, &out, "buyer token refused")); n != 0 {
		t.Errorf("%d refused purchases wrote %d lines of their refusal at Info; want none", flood, n)
	}
}
