package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
)

type productJSON struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	Stock        int64  `json:"stock"`
	InitialStock int64  `json:"initial_stock"`
}

func toProduct(p model.Product) productJSON {
	return productJSON{ID: p.ID, Name: p.Name, Stock: p.Stock, InitialStock: p.InitialStock}
}

type orderJSON struct {
	OrderID        int64   `json:"order_id"`
	ProductID      int64   `json:"product_id"`
	UserID         string  `json:"user_id"`
	Quantity       int64   `json:"quantity"`
	RequestID      *string `json:"request_id"`
	Strategy       string  `json:"strategy"`
	RemainingStock int64   `json:"remaining_stock"`
}

type auditJSON struct {
	ProductID     int64 `json:"product_id"`
	InitialStock  int64 `json:"initial_stock"`
	Stock         int64 `json:"stock"`
	Orders        int64 `json:"orders"`
	UnitsSold     int64 `json:"units_sold"`
	OversoldUnits int64 `json:"oversold_units"`
	Consistent    bool  `json:"consistent"`
}

type strategyJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Safe        bool   `json:"safe"`
}

func handleReady(svc *service.Seckill) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := svc.Ready(c.Request.Context()); err != nil {
			var dep *service.DependencyError
			down := "unknown"
			if errors.As(err, &dep) {
				down = dep.Dependency
			}
			c.JSON(http.StatusServiceUnavailable, gin.H{
				"status": "unavailable",
				"down":   down,
				"error":  gin.H{"code": "unavailable", "message": err.Error()},
			})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	}
}

func handleStrategies(svc *service.Seckill) gin.HandlerFunc {
	return func(c *gin.Context) {
		var out []strategyJSON
		for _, s := range svc.Strategies() {
			out = append(out, strategyJSON{Name: s.Name, Description: s.Description, Safe: s.Safe})
		}
		c.JSON(http.StatusOK, out)
	}
}

func handleProducts(svc *service.Seckill, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		ps, err := svc.Products(c.Request.Context())
		if err != nil {
			writeError(c, log, err)
			return
		}
		out := make([]productJSON, 0, len(ps))
		for _, p := range ps {
			out = append(out, toProduct(p))
		}
		c.JSON(http.StatusOK, out)
	}
}

func handleProduct(svc *service.Seckill, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := productID(c)
		if err == nil {
			var p model.Product
			if p, err = svc.Product(c.Request.Context(), id); err == nil {
				c.JSON(http.StatusOK, toProduct(p))
				return
			}
		}
		writeError(c, log, err)
	}
}

func handleAudit(svc *service.Seckill, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := productID(c)
		if err == nil {
			var a service.Audit
			if a, err = svc.Audit(c.Request.Context(), id); err == nil {
				c.JSON(http.StatusOK, auditJSON(a))
				return
			}
		}
		writeError(c, log, err)
	}
}

// purchaseRequest is the purchase body; pointers tell a missing field from
// a zero.
type purchaseRequest struct {
	UserID    *string `json:"user_id"`
	Quantity  *int64  `json:"quantity"`
	RequestID string  `json:"request_id"`
}

func handlePurchase(svc *service.Seckill, log *slog.Logger, override bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, err := purchaseFrom(c, override)
		if err != nil {
			writeError(c, log, err)
			return
		}
		r, err := svc.Purchase(c.Request.Context(), p)
		if err != nil {
			writeError(c, log, err)
			return
		}
		status := http.StatusCreated
		if r.Replayed {
			status = http.StatusOK
		}
		o := r.Order
		c.JSON(status, orderJSON{
			OrderID: o.ID, ProductID: o.ProductID, UserID: o.UserID, Quantity: o.Quantity,
			RequestID: o.RequestID, Strategy: o.Strategy, RemainingStock: o.RemainingStock,
		})
	}
}

// purchaseFrom reads a purchase from the path, the body and, under the
// strategy override, the query.
func purchaseFrom(c *gin.Context, override bool) (service.Purchase, error) {
	id, err := productID(c)
	if err != nil {
		return service.Purchase{}, err
	}
	var body purchaseRequest
	if err := decodeBody(c, &body); err != nil {
		return service.Purchase{}, err
	}
	switch {
	case body.UserID == nil:
		return service.Purchase{}, fmt.Errorf("%w: user_id is required", service.ErrInvalid)
	case body.Quantity == nil:
		return service.Purchase{}, fmt.Errorf("%w: quantity is required", service.ErrInvalid)
	}
	p := service.Purchase{ProductID: id, UserID: *body.UserID, Quantity: *body.Quantity, RequestID: body.RequestID}
	q := c.Request.URL.Query()
	for _, name := range []string{"strategy", "hold_ms", "fencing"} {
		if !q.Has(name) {
			continue
		}
		if !override {
			return service.Purchase{}, fmt.Errorf("%w: query parameter %s needs SECKILL_STRATEGY_OVERRIDE=true", errOverrideDisabled, name)
		}
		v := q.Get(name)
		switch name {
		case "strategy":
			p.Strategy = v
			if v == "" {
				return service.Purchase{}, fmt.Errorf("%w: strategy is empty", service.ErrInvalid)
			}
		case "hold_ms":
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 0 || ms > service.MaxHold.Milliseconds() {
				return service.Purchase{}, fmt.Errorf("%w: hold_ms must be an integer from 0 to %d", service.ErrInvalid, service.MaxHold.Milliseconds())
			}
			p.Hold = time.Duration(ms) * time.Millisecond
		case "fencing":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return service.Purchase{}, fmt.Errorf("%w: fencing must be true or false", service.ErrInvalid)
			}
			p.Fencing = &b
		}
	}
	return p, nil
}

type createProductRequest struct {
	Name  *string `json:"name"`
	Stock *int64  `json:"stock"`
}

func handleCreateProduct(svc *service.Seckill, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		var body createProductRequest
		err := decodeBody(c, &body)
		switch {
		case err != nil:
		case body.Name == nil:
			err = fmt.Errorf("%w: name is required", service.ErrInvalid)
		case body.Stock == nil:
			err = fmt.Errorf("%w: stock is required", service.ErrInvalid)
		}
		if err == nil {
			var p model.Product
			if p, err = svc.CreateProduct(c.Request.Context(), *body.Name, *body.Stock); err == nil {
				c.JSON(http.StatusCreated, toProduct(p))
				return
			}
		}
		writeError(c, log, err)
	}
}

type setStockRequest struct {
	Stock *int64 `json:"stock"`
}

func handleSetStock(svc *service.Seckill, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := productID(c)
		var body setStockRequest
		if err == nil {
			err = decodeBody(c, &body)
		}
		if err == nil && body.Stock == nil {
			err = fmt.Errorf("%w: stock is required", service.ErrInvalid)
		}
		if err == nil {
			var p model.Product
			if p, err = svc.SetStock(c.Request.Context(), id, *body.Stock); err == nil {
				c.JSON(http.StatusOK, toProduct(p))
				return
			}
		}
		writeError(c, log, err)
	}
}

// productID reads the :id path parameter: a positive integer.
func productID(c *gin.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: product id %q must be a positive integer", service.ErrInvalid, c.Param("id"))
	}
	return id, nil
}

// decodeBody reads at most maxBody bytes of JSON object into v. Numbers must
// be integers where v says so; trailing data is an error.
func decodeBody(c *gin.Context, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return fmt.Errorf("%w: the body may be at most %d bytes", errTooLarge, maxBody)
	}
	if err != nil {
		return fmt.Errorf("%w: read body: %v", service.ErrInvalid, err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body must be a JSON object of the documented shape: %v", service.ErrInvalid, err)
	}
	// More would miss a stray ] or }: only the end of the body may follow.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: body must hold one JSON object and nothing after it", service.ErrInvalid)
	}
	return nil
}
