// Package client is a small client of the seckill service's HTTP API, as
// the contract describes it: health, strategies, products, purchases,
// audits and the admin calls. The load driver makes all its bookkeeping
// calls through it; anything else outside the service that talks to the
// service (the demo, scripts) can use it the same way.
//
// Every call takes a context and is bounded by Client.CallTimeout. An
// answer that is not 2xx comes back as an *Error carrying the status and the
// contract's error code.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/seckill/seckill/api"
)

// DefaultCallTimeout bounds one call when Client.CallTimeout is 0.
const DefaultCallTimeout = 30 * time.Second

// maxAnswer is the most of an answer's body that is read.
const maxAnswer = 1 << 20

// Client calls one instance of the service.
type Client struct {
	// BaseURL is the instance's base URL, e.g. http://127.0.0.1:8080,
	// without a trailing slash.
	BaseURL string
	// AdminToken, when not empty, is sent as a bearer token (the admin
	// calls, the audit and a purchase's Override need it).
	AdminToken string
	// HTTP sends the calls; nil means NewHTTPClient(0).
	HTTP *http.Client
	// CallTimeout bounds each call; 0 means DefaultCallTimeout.
	CallTimeout time.Duration
}

// NewHTTPClient returns an http.Client suited to the service: never through
// a proxy, never asking for gzip, waiting at most headerTimeout for an
// answer's headers once a request is sent (0: no limit but the call's).
func NewHTTPClient(headerTimeout time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
		DisableCompression:    true,
	}}
}

// The contract's shapes (package api), under the names this package has
// always given them.
type (
	// Strategy is one entry of GET /api/v1/strategies.
	Strategy = api.Strategy
	// Product is the contract's product.
	Product = api.Product
	// Order is the contract's order: the answer to a purchase.
	Order = api.Order
	// Audit is the server's answer to GET /api/v1/products/{id}/audit.
	Audit = api.Audit
	// Purchase is the body of a purchase.
	Purchase = api.Purchase
	// PurchaseState is what became of a purchase attempt.
	PurchaseState = api.PurchaseState
	// Reservation is the answer 202 of a purchase under reserve.
	Reservation = api.Reservation
)

// Override are the query parameters a purchase may carry when the service
// runs with SECKILL_STRATEGY_OVERRIDE=true; the zero value sends none.
type Override struct {
	// Strategy names the strategy; "" leaves the server's default.
	Strategy string
	// Hold > 0 is sent as hold_ms (whole milliseconds).
	Hold time.Duration
	// Pause > 0 is sent as pause_ms (whole milliseconds).
	Pause time.Duration
	// Batch > 0 is sent as batch.
	Batch int
	// Fencing, when not nil, is sent as fencing.
	Fencing *bool
}

// Query returns the query string of o, "" when it sends nothing.
func (o Override) Query() string {
	q := url.Values{}
	if o.Strategy != "" {
		q.Set("strategy", o.Strategy)
	}
	if o.Hold > 0 {
		q.Set("hold_ms", strconv.FormatInt(o.Hold.Milliseconds(), 10))
	}
	if o.Pause > 0 {
		q.Set("pause_ms", strconv.FormatInt(o.Pause.Milliseconds(), 10))
	}
	if o.Batch > 0 {
		q.Set("batch", strconv.Itoa(o.Batch))
	}
	if o.Fencing != nil {
		q.Set("fencing", strconv.FormatBool(*o.Fencing))
	}
	return q.Encode()
}

// PurchasePath is the path of a purchase of product id with o's query.
func PurchasePath(id int64, o Override) string {
	p := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/purchase"
	if q := o.Query(); q != "" {
		p += "?" + q
	}
	return p
}

// Error is an answer of the service that is not 2xx.
type Error struct {
	Method, URL string
	Status      int
	// Code is the contract's error code, e.g. "sold_out"; "" when the
	// body did not carry one.
	Code    string
	Message string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("client: %s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("client: %s %s: %d %s: %s", e.Method, e.URL, e.Status, e.Code, e.Message)
}

// Healthz checks that the instance answers GET /healthz.
func (c *Client) Healthz(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Strategies lists the strategies the instance serves.
func (c *Client) Strategies(ctx context.Context) ([]Strategy, error) {
	var out []Strategy
	err := c.call(ctx, http.MethodGet, "/api/v1/strategies", nil, &out)
	return out, err
}

// Products lists every product.
func (c *Client) Products(ctx context.Context) ([]Product, error) {
	var out []Product
	err := c.call(ctx, http.MethodGet, "/api/v1/products", nil, &out)
	return out, err
}

// Product reads one product.
func (c *Client) Product(ctx context.Context, id int64) (Product, error) {
	var p Product
	err := c.call(ctx, http.MethodGet, productPath(id), nil, &p)
	return p, err
}

// CreateProduct creates a product of stock units (an admin call).
func (c *Client) CreateProduct(ctx context.Context, name string, stock int64) (Product, error) {
	var p Product
	err := c.call(ctx, http.MethodPost, "/api/v1/admin/products", api.NewProduct{Name: name, Stock: stock}, &p)
	return p, err
}

// SetStock sets a product's stock and initial stock to stock and deletes
// its orders (an admin call).
func (c *Client) SetStock(ctx context.Context, id, stock int64) (Product, error) {
	var p Product
	err := c.call(ctx, http.MethodPut, "/api/v1/admin/products/"+strconv.FormatInt(id, 10)+"/stock", api.SetStock{Stock: stock}, &p)
	return p, err
}

// Audit reads a product's audit.
func (c *Client) Audit(ctx context.Context, id int64) (Audit, error) {
	var a Audit
	err := c.call(ctx, http.MethodGet, productPath(id)+"/audit", nil, &a)
	return a, err
}

// Buy makes one purchase of product id. A 201 and a replay's 200 both
// return the order; any other answer is an *Error.
func (c *Client) Buy(ctx context.Context, id int64, p Purchase, o Override) (Order, error) {
	var out Order
	err := c.call(ctx, http.MethodPost, PurchasePath(id, o), p, &out)
	return out, err
}

// Purchased is what a purchase got: the order of a 201 or of a replay's
// 200, or under reserve the reservation of a 202 (Reservation not nil).
type Purchased struct {
	Status      int
	Order       Order
	Reservation *Reservation
}

// Purchase makes one purchase of product id and says what came back, a
// 202's reservation included; any answer but a 2xx is an *Error.
func (c *Client) Purchase(ctx context.Context, id int64, p Purchase, o Override) (Purchased, error) {
	status, data, err := c.sendStatus(ctx, http.MethodPost, PurchasePath(id, o), p)
	if err != nil {
		return Purchased{}, err
	}
	out := Purchased{Status: status}
	if status == http.StatusAccepted {
		out.Reservation = &Reservation{}
		err = json.Unmarshal(data, out.Reservation)
	} else {
		err = json.Unmarshal(data, &out.Order)
	}
	if err != nil {
		return out, fmt.Errorf("client: purchase of product %d: decode the answer %d: %w", id, status, err)
	}
	return out, nil
}

// PurchaseState asks what became of the purchase attempt with requestID:
// a 404 purchase_not_found is an *Error.
func (c *Client) PurchaseState(ctx context.Context, requestID string) (PurchaseState, error) {
	var out PurchaseState
	err := c.call(ctx, http.MethodGet, "/api/v1/purchases/"+url.PathEscape(requestID), nil, &out)
	return out, err
}

// PurchaseStateAs is PurchaseState with token as the bearer token: the
// buyer's, under SECKILL_BUYER_AUTH=jwt.
func (c *Client) PurchaseStateAs(ctx context.Context, requestID, token string) (PurchaseState, error) {
	as := *c
	as.AdminToken = token // sent as the bearer token, whoever's it is
	return as.PurchaseState(ctx, requestID)
}

// PayByCallback pays order id as the payment provider does: its callback,
// POST /api/v1/payments, signed with secret (SECKILL_PAYMENT_SECRET) now.
// The order, paid; a refusal is an *Error.
func (c *Client) PayByCallback(ctx context.Context, secret, paymentID string, id int64) (Order, error) {
	b, err := json.Marshal(api.Payment{PaymentID: paymentID, OrderID: id})
	if err != nil {
		return Order{}, fmt.Errorf("client: payment of order %d: %w", id, err)
	}
	h := http.Header{}
	h.Set(api.SignatureHeader, api.SignPayment(secret, time.Now(), b))
	_, data, err := c.sendBody(ctx, http.MethodPost, "/api/v1/payments", b, h)
	if err != nil {
		return Order{}, err
	}
	var out Order
	if err := json.Unmarshal(data, &out); err != nil {
		return Order{}, fmt.Errorf("client: payment of order %d: decode the answer: %w", id, err)
	}
	return out, nil
}

// Pay pays order id as its buyer user: the order, paid; a 409
// order_closed (or any other refusal) is an *Error.
func (c *Client) Pay(ctx context.Context, id int64, user string) (Order, error) {
	var out Order
	err := c.call(ctx, http.MethodPost, orderPath(id)+"/pay", api.OrderAction{UserID: user}, &out)
	return out, err
}

// Cancel cancels order id as its buyer user, which puts its units back on
// sale: the order, cancelled; a 409 order_paid or order_closed (or any
// other refusal) is an *Error.
func (c *Client) Cancel(ctx context.Context, id int64, user string) (Order, error) {
	var out Order
	err := c.call(ctx, http.MethodPost, orderPath(id)+"/cancel", api.OrderAction{UserID: user}, &out)
	return out, err
}

// Order reads order id as its buyer user.
func (c *Client) Order(ctx context.Context, id int64, user string) (Order, error) {
	var out Order
	err := c.call(ctx, http.MethodGet, orderPath(id)+"?user_id="+url.QueryEscape(user), nil, &out)
	return out, err
}

func orderPath(id int64) string { return "/api/v1/orders/" + strconv.FormatInt(id, 10) }

func productPath(id int64) string { return "/api/v1/products/" + strconv.FormatInt(id, 10) }

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	data, err := c.send(ctx, method, path, in)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: %s %s%s: decode the answer: %w", method, c.BaseURL, path, err)
	}
	return nil
}

// send makes one call and returns the body of a 2xx answer.
func (c *Client) send(ctx context.Context, method, path string, in any) ([]byte, error) {
	_, data, err := c.sendStatus(ctx, method, path, in)
	return data, err
}

// sendStatus is send, with the 2xx status.
func (c *Client) sendStatus(ctx context.Context, method, path string, in any) (int, []byte, error) {
	var b []byte
	if in != nil {
		var err error
		if b, err = json.Marshal(in); err != nil {
			return 0, nil, fmt.Errorf("client: %s %s%s: %w", method, c.BaseURL, path, err)
		}
	}
	return c.sendBody(ctx, method, path, b, nil)
}

// sendBody is sendStatus of a body as it is (nil: none), header on top.
func (c *Client) sendBody(ctx context.Context, method, path string, b []byte, header http.Header) (int, []byte, error) {
	timeout := c.CallTimeout
	if timeout == 0 {
		timeout = DefaultCallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := c.BaseURL + path
	in := b != nil
	var body io.Reader
	if in {
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, nil, fmt.Errorf("client: %s %s: %w", method, u, err)
	}
	if in {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	hc := c.HTTP
	if hc == nil {
		hc = NewHTTPClient(0)
		defer hc.CloseIdleConnections()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("client: %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, nil, fmt.Errorf("client: %s %s: read the answer: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Method: method, URL: u, Status: resp.StatusCode}
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) == nil {
			e.Code, e.Message = eb.Error.Code, eb.Error.Message
		}
		return 0, nil, e
	}
	return resp.StatusCode, data, nil
}
