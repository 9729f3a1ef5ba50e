package controller

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/go-json-experiment/json"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

func toProduct(p model.Product) api.Product {
	return api.Product{ID: p.ID, Name: p.Name, Stock: p.Stock, InitialStock: p.InitialStock}
}

func toOrder(o model.Order) api.Order {
	out := api.Order{OrderID: o.ID, ProductID: o.ProductID, UserID: string(o.UserID), Quantity: o.Quantity,
		Strategy: o.Strategy, RemainingStock: o.RemainingStock, Status: o.Status}
	if o.ExpiresAt != nil && o.Status == model.StatusUnpaid {
		at := o.ExpiresAt.UTC()
		out.ExpiresAt = &at
	}
	if o.RequestID != nil {
		rid := string(*o.RequestID)
		out.RequestID = &rid
	}
	return out
}

// handleReady answers 200 while the database and a majority of the Redis
// nodes answer and the instance is not draining; else 503 naming what is
// down (database, redis or, while draining, the instance itself; unknown
// for an error that names no dependency), as api.Ready. The
// route is unauthenticated: the body names no address and no driver error,
// which go to the log.
func handleReady(svc *service.Seckill, log *slog.Logger, drain *Drain) gin.HandlerFunc {
	return func(c *gin.Context) {
		notReady := func(down, msg string) {
			c.JSON(http.StatusServiceUnavailable, api.Ready{Status: "unavailable", Down: down,
				Error: &api.Error{Code: string(failure.CodeUnavailable), Message: msg}})
		}
		if drain.Started() {
			notReady("instance", "the instance is shutting down")
			return
		}
		err := svc.Ready(c.Request.Context())
		if err == nil {
			c.JSON(http.StatusOK, api.Ready{Status: "ready"})
			return
		}
		down := "unknown"
		if dep, ok := errors.AsType[*service.DependencyError](err); ok {
			down = dep.Dependency
		}
		log.WarnContext(c.Request.Context(), "not ready", "down", down, "err", err)
		switch down {
		case "database":
			notReady(down, "database is down: it does not answer")
		case "redis":
			notReady(down, "redis is down: fewer than a majority of its nodes answer")
		default:
			notReady(down, "a dependency is down")
		}
	}
}

func handleStrategies(svc *service.Seckill) gin.HandlerFunc {
	return func(c *gin.Context) {
		var out []api.Strategy
		for _, s := range svc.Strategies() {
			out = append(out, api.Strategy{Name: s.Name, Description: s.Description, Safe: s.Safe})
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
		out := make([]api.Product, 0, len(ps))
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

// handlePurchaseState answers what became of a purchase attempt, by its
// request ID: ordered, pending (a reservation not written yet) or failed.
func handlePurchaseState(svc *service.Seckill, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		rid := c.Param("request_id")
		// Another buyer's purchase is not there, to a buyer of a token.
		a, err := svc.PurchaseOfBuyer(c.Request.Context(), rid, c.GetString(buyerKey))
		if err != nil {
			writeError(c, log, err)
			return
		}
		out := api.PurchaseState{RequestID: rid}
		switch {
		case a.Order != nil:
			order := toOrder(*a.Order)
			out.State, out.Order = api.StateOrdered, &order
		case a.Reservation != nil:
			r := toReservation(*a.Reservation)
			out.State, out.Reservation = api.StatePending, &r
		default:
			out.State, out.Error = api.StateFailed, &api.Error{Code: string(a.Failed.Code), Message: a.Failed.Message}
		}
		c.JSON(http.StatusOK, out)
	}
}

// toReservation is the contract's reservation of r.
func toReservation(r service.Reservation) api.Reservation {
	return api.Reservation{RequestID: r.RequestID, ProductID: r.ProductID, UserID: r.UserID, Quantity: r.Quantity,
		Strategy: r.Strategy, Status: api.ReservationPending, RemainingStock: r.Left}
}

func handleAudit(svc *service.Seckill, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := productID(c)
		if err == nil {
			var a service.Audit
			if a, err = svc.Audit(c.Request.Context(), id); err == nil {
				c.JSON(http.StatusOK, api.Audit(a))
				return
			}
		}
		writeError(c, log, err)
	}
}

// createProductRequest is api.NewProduct as the server decodes it:
// pointers tell a missing field (or null) from a zero, as purchaseRequest
// does for api.Purchase, and for the same reason.
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
			err = invalidf("name is required")
		case body.Stock == nil:
			err = invalidf("stock is required")
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

// setStockRequest is api.SetStock as the server decodes it: a pointer
// tells a missing field (or null) from a zero, as purchaseRequest does for
// api.Purchase, and for the same reason.
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
			err = invalidf("stock is required")
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
		return 0, invalidf("product id %q must be a positive integer", c.Param("id"))
	}
	return id, nil
}

// decodeBody reads the body (readBody) and decodes it into v (decodeJSON).
func decodeBody(c *gin.Context, v any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// readBody reads at most maxBody bytes of body (readBodyInto), into a
// buffer of its own: the admin's routes that use it are too rare to be
// worth a pool.
func readBody(c *gin.Context) ([]byte, error) {
	return readBodyInto(c.Request.Body, make([]byte, 0, maxBody+1))
}

// decodeJSON decodes one JSON object into v, strictly: numbers must be
// integers where v says so, a key may not be given twice (which would
// silently take the last), strings must be valid UTF-8 (no invalid bytes
// or lone surrogates, which would silently become U+FFFD), and nothing may
// follow the object.
func decodeJSON(body []byte, v any) error {
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' {
		return invalidf("body must be a JSON object of the documented shape")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return invalidf("body must be one JSON object of the documented shape: %v", err)
	}
	return nil
}
