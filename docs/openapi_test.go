package docs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The document held to the truth: a validator (kin-openapi) sits in the
// transport of every call the tests make to running instances, checks the
// request and the answer against the document the instance serves, and
// notes which answer of which operation it saw. After the tour every
// status the document lists, and every error code of each, must have been
// seen and found valid: a handler that answers a shape, a status or a code
// the document does not have fails, and so does a document that promises
// an answer no handler gives.

// answer is one kind of answer: an operation (its operationId; the
// document's RouteNotFound or MethodNotAllowed for a request it has no
// operation for), a status and, for an error, its code.
type answer struct {
	op     string
	status int
	code   string
}

func (a answer) String() string {
	if a.code == "" {
		return fmt.Sprintf("%s %d", a.op, a.status)
	}
	return fmt.Sprintf("%s %d %s", a.op, a.status, a.code)
}

// The pseudo-operations of the requests the document has no operation for.
const (
	noRoute  = "(RouteNotFound)"
	noMethod = "(MethodNotAllowed)"
)

// validator checks every exchange against doc and counts what it saw.
type validator struct {
	t      testing.TB
	doc    *openapi3.T
	router routers.Router
	base   http.RoundTripper
	// ip numbers the client IPs the transport gives requests that name none
	// (X-Forwarded-For from a trusted proxy), so that only the calls that
	// mean to meet the per-IP limit meet it.
	ip atomic.Int64

	mu   sync.Mutex
	seen map[answer]int
}

// newValidator loads the document served at url+"/openapi.json" (through
// no validator: it is what the others are checked against), checks it as
// an OpenAPI 3.1 document, and returns a validator of the instances at
// urls.
func newValidator(t testing.TB, urls ...string) *validator {
	t.Helper()
	res, err := http.Get(urls[0] + "/openapi.json")
	if err != nil {
		t.Fatalf("GET /openapi.json: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.json = %d %v", res.StatusCode, err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("load the served document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("the served document is OpenAPI %s; want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served document is not a valid OpenAPI document: %v", err)
	}
	// The routes of the instances under test, not of the document's
	// example server.
	doc.Servers = nil
	for _, u := range urls {
		doc.Servers = append(doc.Servers, &openapi3.Server{URL: u})
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("route the document: %v", err)
	}
	return &validator{t: t, doc: doc, router: router, base: http.DefaultTransport, seen: map[answer]int{}}
}

// client returns an HTTP client whose every exchange v checks.
func (v *validator) client() *http.Client { return &http.Client{Transport: v} }

// RoundTrip sends req and checks the exchange.
func (v *validator) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	if req.Header.Get("X-Forwarded-For") == "" {
		n := v.ip.Add(1)
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255))
	}
	res, err := v.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resBody, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(resBody))
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	if err := v.check(req, reqBody, res, resBody); err != nil {
		v.t.Errorf("%s %s answered %d %s:\n%v", req.Method, req.URL.RequestURI(), res.StatusCode, resBody, err)
	}
	return res, nil
}

// check validates one exchange and notes its answer.
func (v *validator) check(req *http.Request, reqBody []byte, res *http.Response, resBody []byte) error {
	ctx := context.Background()
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		// No operation: the answer must be the document's for that case.
		name, status := "RouteNotFound", http.StatusNotFound
		if errors.Is(err, routers.ErrMethodNotAllowed) {
			name, status = "MethodNotAllowed", http.StatusMethodNotAllowed
		}
		v.note(answer{"(" + name + ")", res.StatusCode, errorCode(resBody)})
		if res.StatusCode != status {
			return fmt.Errorf("the document has no operation for it (%v): want %d", err, status)
		}
		schema := v.doc.Components.Responses[name].Value.Content.Get("application/json").Schema.Value
		var body any
		if err := json.Unmarshal(resBody, &body); err != nil {
			return fmt.Errorf("the body is not JSON: %w", err)
		}
		return schema.VisitJSON(body, openapi3.EnableJSONSchema2020())
	}
	v.note(answer{route.Operation.OperationID, res.StatusCode, listedCode(route.Operation, res.StatusCode, resBody)})
	in := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      route,
		Options: &openapi3filter.Options{
			MultiError: true,
			// The admin scheme: a bearer token. Whether it is the right one
			// is the service's to say (401).
			AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
				if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
					return errors.New("no bearer token")
				}
				return nil
			},
		},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	if reqErr != nil && res.StatusCode < 400 {
		return fmt.Errorf("the document refuses the request the service accepted: %w", reqErr)
	}
	return openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 res.StatusCode,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(resBody)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

func (v *validator) note(a answer) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen[a]++
}

// errorCode is the code of an error body, or "".
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// listedCode is the error code of body when op's response of status lists
// codes, else "": an answer that does not list them (/readyz's) is one
// answer whatever its body says.
func listedCode(op *openapi3.Operation, status int, body []byte) string {
	ref := op.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return errorCode(body)
	}
	if mt := ref.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil && len(errorCodes(mt.Schema.Value)) > 0 {
		return errorCode(body)
	}
	return ""
}

// promised lists every answer the document promises: each status of each
// operation and, where the answer is an error, each code it lists; and the
// two answers to requests it has no operation for.
func (v *validator) promised() []answer {
	out := []answer{{noRoute, http.StatusNotFound, "not_found"}, {noMethod, http.StatusMethodNotAllowed, "method_not_allowed"}}
	for _, item := range v.doc.Paths.Map() {
		for _, op := range item.Operations() {
			for status, ref := range op.Responses.Map() {
				n, err := strconv.Atoi(status)
				if err != nil {
					v.t.Errorf("%s: response %q: want a status, not a range or default", op.OperationID, status)
					continue
				}
				codes := []string{""}
				if mt := ref.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
					if c := errorCodes(mt.Schema.Value); len(c) > 0 {
						codes = c
					}
				}
				for _, c := range codes {
					out = append(out, answer{op.OperationID, n, c})
				}
			}
		}
	}
	return out
}

// errorCodes are the codes an error response's schema lists: the enum of
// its error.code.
func errorCodes(s *openapi3.Schema) []string {
	e, ok := s.Properties["error"]
	if !ok {
		return nil
	}
	c, ok := e.Value.Properties["code"]
	if !ok {
		return nil
	}
	var codes []string
	for _, v := range c.Value.Enum {
		codes = append(codes, fmt.Sprint(v))
	}
	return codes
}

// checkCoverage fails t for every answer the document promises that was
// not seen, and names every answer seen that it does not promise (they
// failed validation already).
func (v *validator) checkCoverage(t *testing.T) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	promised := v.promised()
	var missing []string
	for _, a := range promised {
		if v.seen[a] == 0 {
			missing = append(missing, a.String())
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("%d of the document's %d answers were never given by the service in the tour (add them to the tour, or take them out of the document):\n  %s",
			len(missing), len(promised), strings.Join(missing, "\n  "))
	}
	var extra []string
	for a := range maps.Keys(v.seen) {
		if !slices.Contains(promised, a) {
			extra = append(extra, a.String())
		}
	}
	slices.Sort(extra)
	if len(extra) > 0 {
		t.Errorf("answers the document does not have:\n  %s", strings.Join(extra, "\n  "))
	}
}
