package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/api"
)

// Response is an answer as it came: status, headers and the whole body,
// for the tests of the contract's statuses, error bodies and headers, with
// the request it answers.
type Response struct {
	Method, Path string
	Status       int
	Header       http.Header
	Body         []byte
}

func (r Response) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// Send makes one request of the instance: method, path (with its query)
// and body as given, header on top (a body is sent as JSON). It returns an
// error instead of failing a test, so that a goroutine may call it; ctx is
// bounded by the harness's call timeout.
func (s *Service) Send(ctx context.Context, method, path, body string, header map[string]string) (Response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return s.request(ctx, method, path, rd, header)
}

// send is Send of in encoded as JSON (nil: no body).
func (s *Service) send(ctx context.Context, method, path string, in any, header map[string]string) (Response, error) {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return Response{}, fmt.Errorf("apptest: %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	return s.request(ctx, method, path, rd, header)
}

func (s *Service) request(ctx context.Context, method, path string, body io.Reader, header map[string]string) (Response, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, body)
	if err != nil {
		return Response{}, fmt.Errorf("apptest: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("apptest: %s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, fmt.Errorf("apptest: %s %s: read the body: %w", method, path, err)
	}
	return Response{Method: method, Path: path, Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// Do is Send for the test's goroutine: a request that gets no answer
// fails t.
func (s *Service) Do(t testing.TB, method, path, body string, header map[string]string) Response {
	t.Helper()
	r, err := s.Send(context.Background(), method, path, body, header)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Get is Do of a GET without a header.
func (s *Service) Get(t testing.TB, path string) Response {
	t.Helper()
	return s.Do(t, http.MethodGet, path, "", nil)
}

// Admin is Do with the admin token.
func (s *Service) Admin(t testing.TB, method, path, body string) Response {
	t.Helper()
	return s.Do(t, method, path, body, s.AdminHeader())
}

// AdminHeader is the header that carries the admin token.
func (s *Service) AdminHeader() map[string]string {
	return map[string]string{"Authorization": "Bearer " + s.AdminToken}
}

// PostPurchase posts body as a purchase of product id; a query (the
// override's parameters, as written: malformed ones too) is sent with the
// admin token, as the contract wants, and a purchase without one without
// it.
func (s *Service) PostPurchase(t testing.TB, id int64, query, body string) Response {
	t.Helper()
	var header map[string]string
	if query != "" {
		header = s.AdminHeader()
	}
	return s.Do(t, http.MethodPost, PurchasePath(id, query), body, header)
}

// PurchasePath is the path of a purchase of product id with query, as
// written ("": none).
func PurchasePath(id int64, query string) string {
	p := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/purchase"
	if query != "" {
		p += "?" + query
	}
	return p
}

// wantDecoded fails t unless r has status, and decodes its body into v as
// Decode does.
func wantDecoded(t testing.TB, r Response, status int, v any) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s %s = %v; want %d", r.Method, r.Path, r, status)
	}
	Decode(t, r, v)
}

// Decode decodes r's body into v, refusing fields v does not have: the
// answer is the contract's shape, nothing more.
func Decode(t testing.TB, r Response, v any) {
	t.Helper()
	if err := decodeStrict(r.Body, v); err != nil {
		t.Fatalf("decode %s into %T: %v", r.Body, v, err)
	}
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// WantError fails t unless r is the contract's error answer: status, a
// JSON body {"error": {"code": code, "message": text for a person}} and
// nothing else, and no 5xx where a 4xx was wanted.
func WantError(t testing.TB, what string, r Response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s = %v; want %d %s", what, r, status, code)
	}
	if r.Status >= 500 && status < 500 {
		t.Errorf("%s answered a %d, a bug by the contract", what, r.Status)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s Content-Type = %q; want application/json", what, ct)
	}
	// api.ErrorBody, with a pointer to tell a missing "error" from an
	// empty one.
	var body struct {
		Error *api.Error `json:"error"`
	}
	if err := decodeStrict(r.Body, &body); err != nil || body.Error == nil {
		t.Errorf("%s body = %s; want {\"error\":{\"code\",\"message\"}} (%v)", what, r.Body, err)
		return
	}
	if body.Error.Code != code {
		t.Errorf("%s error code = %q; want %q (body %s)", what, body.Error.Code, code, r.Body)
	}
	if body.Error.Message == "" {
		t.Errorf("%s error message is empty; want text for a person", what)
	}
}
