package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/apptest"
)

// client talks to one instance of the service.
type client struct {
	t     testing.TB
	base  string
	token string
}

func newClient(t testing.TB, in *apptest.Instance) *client {
	return &client{t: t, base: in.URL, token: in.AdminToken}
}

// response is a finished exchange; body is read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// send makes one request. It returns an error rather than failing the test
// so that goroutines can use it; callers on the test goroutine use do.
func send(ctx context.Context, method, url, body string, header map[string]string) (response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return response{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}, nil
}

func (c *client) do(method, path, body string, header map[string]string) response {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := send(ctx, method, c.base+path, body, header)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (c *client) get(path string) response { c.t.Helper(); return c.do(http.MethodGet, path, "", nil) }

func (c *client) admin(method, path, body string) response {
	c.t.Helper()
	return c.do(method, path, body, c.auth())
}

// auth is the header that carries the admin token.
func (c *client) auth() map[string]string {
	return map[string]string{"Authorization": "Bearer " + c.token}
}

// createProduct puts a product on sale and returns its ID.
func (c *client) createProduct(name string, stock int64) int64 {
	c.t.Helper()
	r := c.admin(http.MethodPost, "/api/v1/admin/products", fmt.Sprintf(`{"name":%q,"stock":%d}`, name, stock))
	if r.status != http.StatusCreated {
		c.t.Fatalf("POST /api/v1/admin/products = %v; want 201", r)
	}
	var p product
	decode(c.t, r, &p)
	return p.ID
}

// purchase buys with body; a query (the strategy override's parameters)
// is sent with the admin token, as the contract wants.
func (c *client) purchase(id int64, query, body string) response {
	c.t.Helper()
	var header map[string]string
	if query != "" {
		header = c.auth()
	}
	return c.do(http.MethodPost, purchasePath(id, query), body, header)
}

func purchasePath(id int64, query string) string {
	p := fmt.Sprintf("/api/v1/products/%d/purchase", id)
	if query != "" {
		p += "?" + query
	}
	return p
}

func (c *client) product(id int64) product {
	c.t.Helper()
	r := c.get(fmt.Sprintf("/api/v1/products/%d", id))
	if r.status != http.StatusOK {
		c.t.Fatalf("GET /api/v1/products/%d = %v; want 200", id, r)
	}
	var p product
	decode(c.t, r, &p)
	return p
}

func (c *client) audit(id int64) audit {
	c.t.Helper()
	r := c.admin(http.MethodGet, fmt.Sprintf("/api/v1/products/%d/audit", id), "")
	if r.status != http.StatusOK {
		c.t.Fatalf("GET /api/v1/products/%d/audit = %v; want 200", id, r)
	}
	var a audit
	decode(c.t, r, &a)
	return a
}

// The contract's shapes.
type (
	product = api.Product
	order   = api.Order
	audit   = api.Audit
)

var (
	productKeys = []string{"id", "initial_stock", "name", "stock"}
	orderKeys   = []string{"order_id", "product_id", "quantity", "remaining_stock", "request_id", "strategy", "user_id"}
	auditKeys   = []string{"consistent", "initial_stock", "orders", "oversold_units", "product_id", "stock", "units_sold"}
)

// decode decodes r's body into v, refusing fields v does not have.
func decode(t testing.TB, r response, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s into %T: %v", r.body, v, err)
	}
}

// keysOf returns the sorted keys of the JSON object in b.
func keysOf(t testing.TB, b []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s as an object: %v", b, err)
	}
	return slices.Sorted(maps.Keys(m))
}

// wantKeys fails unless the JSON object in b has exactly keys.
func wantKeys(t testing.TB, what string, b []byte, keys []string) {
	t.Helper()
	if got := keysOf(t, b); !slices.Equal(got, keys) {
		t.Errorf("%s has fields %q; want exactly %q", what, got, keys)
	}
}

// wantError checks that r carries the contract's error body with status
// and code.
func wantError(t testing.TB, what string, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s = %v; want %d %s", what, r, status, code)
	}
	if r.status >= 500 && status < 500 {
		t.Errorf("%s answered a %d, a bug by the contract", what, r.status)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s Content-Type = %q; want application/json", what, ct)
	}
	// api.ErrorBody, with a pointer to tell a missing "error" from an
	// empty one.
	var body struct {
		Error *api.Error `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Error == nil {
		t.Errorf("%s body = %s; want {\"error\":{\"code\",\"message\"}} (%v)", what, r.body, err)
		return
	}
	if body.Error.Code != code {
		t.Errorf("%s error code = %q; want %q (body %s)", what, body.Error.Code, code, r.body)
	}
	if body.Error.Message == "" {
		t.Errorf("%s error message is empty; want text for a person", what)
	}
}
