package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Strategy is one entry of GET /api/v1/strategies.
type Strategy struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Safe        bool   `json:"safe"`
}

// Audit is the server's answer to GET /api/v1/products/{id}/audit.
type Audit struct {
	ProductID     int64 `json:"product_id"`
	InitialStock  int64 `json:"initial_stock"`
	Stock         int64 `json:"stock"`
	Orders        int64 `json:"orders"`
	UnitsSold     int64 `json:"units_sold"`
	OversoldUnits int64 `json:"oversold_units"`
	Consistent    bool  `json:"consistent"`
}

// Held says the stock invariant held: the audit is consistent and nothing
// was oversold.
func (a Audit) Held() bool { return a.Consistent && a.OversoldUnits == 0 }

type product struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	Stock        int64  `json:"stock"`
	InitialStock int64  `json:"initial_stock"`
}

// APIError is an error answer of the service.
type APIError struct {
	Method, URL string
	Status      int
	Code        string // the contract's error code, e.g. "unauthorized"
	Message     string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("driver: %s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("driver: %s %s: %d %s: %s", e.Method, e.URL, e.Status, e.Code, e.Message)
}

// api makes the driver's bookkeeping calls (not the load) on one instance.
type api struct {
	client *http.Client
	base   string
	token  string
}

// callTimeout bounds one bookkeeping call.
const callTimeout = 30 * time.Second

func (a api) call(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("driver: %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return fmt.Errorf("driver: %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("driver: %s %s: %w", method, a.base+path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("driver: %s %s: read body: %w", method, a.base+path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Method: method, URL: a.base + path, Status: resp.StatusCode}
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil {
			e.Code, e.Message = eb.Error.Code, eb.Error.Message
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("driver: %s %s: decode answer: %w", method, a.base+path, err)
	}
	return nil
}

func (a api) healthz(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.call(ctx, http.MethodGet, "/healthz", nil, nil); err != nil {
		return fmt.Errorf("driver: instance %s cannot be reached: %w", a.base, err)
	}
	return nil
}

func (a api) strategies(ctx context.Context) ([]Strategy, error) {
	var out []Strategy
	err := a.call(ctx, http.MethodGet, "/api/v1/strategies", nil, &out)
	return out, err
}

func (a api) createProduct(ctx context.Context, name string, stock int64) (product, error) {
	var p product
	err := a.call(ctx, http.MethodPost, "/api/v1/admin/products", map[string]any{"name": name, "stock": stock}, &p)
	return p, err
}

func (a api) setStock(ctx context.Context, id, stock int64) (product, error) {
	var p product
	err := a.call(ctx, http.MethodPut, "/api/v1/admin/products/"+strconv.FormatInt(id, 10)+"/stock", map[string]any{"stock": stock}, &p)
	return p, err
}

func (a api) product(ctx context.Context, id int64) (product, error) {
	var p product
	err := a.call(ctx, http.MethodGet, "/api/v1/products/"+strconv.FormatInt(id, 10), nil, &p)
	return p, err
}

func (a api) audit(ctx context.Context, id int64) (Audit, error) {
	var out Audit
	err := a.call(ctx, http.MethodGet, "/api/v1/products/"+strconv.FormatInt(id, 10)+"/audit", nil, &out)
	return out, err
}
