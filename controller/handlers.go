package controller

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

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

// purchaseRequest is api.Purchase as the server decodes it: pointers tell
// a missing field (or null) from a zero, so that a body without user_id or
// quantity is refused as such ("user_id is required"). api.Purchase cannot
// tell them apart, and pointers there would have every client (the load
// driver, the demo, the tests) write &v for a value; so the server keeps
// this copy, field for field api.Purchase's (TestRequestsAreTheAPIShapes).
type purchaseRequest struct {
	UserID    *string `json:"user_id"`
	Quantity  *int64  `json:"quantity"`
	RequestID string  `json:"request_id"`
}

// purchaseOptions are what a purchase's handler needs of the router's
// settings.
type purchaseOptions struct {
	// override is SECKILL_STRATEGY_OVERRIDE; admin says a request carries
	// the admin token, which the override's parameters need.
	override bool
	admin    func(*gin.Context) bool
	// strategy is SECKILL_LOCK, for the log.
	strategy string
}

func handlePurchase(svc *service.Seckill, log *slog.Logger, opts purchaseOptions) gin.HandlerFunc {
	bufs := newBodyBuffers()
	return func(c *gin.Context) {
		p, err := purchaseFrom(c, opts, bufs)
		if err == nil {
			p.UserID, err = buyerOf(c, p.UserID)
		}
		if err != nil {
			writeError(c, log, err)
			return
		}
		// Every line logged about this purchase names it.
		setPurchaseLog(c, purchaseLog{product: p.ProductID, user: p.UserID,
			strategy: cmp.Or(p.Strategy, opts.strategy), requestID: p.RequestID})
		r, err := svc.Purchase(c.Request.Context(), p)
		if err != nil {
			writeError(c, log, err)
			return
		}
		if r.Reservation != nil {
			// Accepted, written moments later: the Location says where to
			// ask what became of it.
			c.Header("Location", "/api/v1/purchases/"+url.PathEscape(r.Reservation.RequestID))
			c.JSON(http.StatusAccepted, toReservation(*r.Reservation))
			return
		}
		status := http.StatusCreated
		if r.Replayed {
			status = http.StatusOK
		}
		c.JSON(status, toOrder(r.Order))
	}
}

// invalidf is a 400 invalid_argument with a formatted message.
func invalidf(format string, args ...any) error {
	return apiError(failure.CodeInvalid, fmt.Sprintf(format, args...))
}

// overrideParams are the query parameters that only the strategy override
// allows.
func overrideParams() []string {
	return []string{"strategy", "hold_ms", "pause_ms", "fencing", "batch"}
}

// purchaseFrom reads a purchase from the path, the body (into a buffer of
// bufs) and, under the strategy override and with the admin token, the
// query.
func purchaseFrom(c *gin.Context, opts purchaseOptions, bufs *bodyBuffers) (service.Purchase, error) {
	id, err := productID(c)
	if err != nil {
		return service.Purchase{}, err
	}
	buf := bufs.get()
	defer bufs.put(buf)
	body, err := readBodyInto(c.Request.Body, *buf)
	if err != nil {
		return service.Purchase{}, err
	}
	q := c.Request.URL.RawQuery
	return decodePurchase(id, body, q, purchaseRules{override: opts.override, admin: opts.override && q != "" && opts.admin(c),
		userOptional: tokenBuyer(c)})
}

// decodePurchase reads a purchase of product id from its JSON body and its
// raw query. Nothing is rewritten on the way: a body that is not one
// object whose members have the documented types (members it does not
// know are ignored; a member given twice is refused), or a query that does
// not parse, is refused. The override's parameters need rules.override (or answer 403) and
// rules.admin, the admin token (or answer 401).
func decodePurchase(id int64, body []byte, rawQuery string, rules purchaseRules) (service.Purchase, error) {
	req, ok := decodePurchaseFast(body)
	if !ok {
		var err error
		if req, err = decodePurchaseSlow(body); err != nil {
			return service.Purchase{}, err
		}
	}
	switch {
	case !req.hasUser && !rules.userOptional:
		return service.Purchase{}, invalidf("user_id is required")
	case !req.hasQuantity:
		return service.Purchase{}, invalidf("quantity is required")
	}
	p := service.Purchase{ProductID: id, UserID: req.user, Quantity: req.quantity, RequestID: req.requestID}
	// A parameter dropped for a bad escape would silently buy under the
	// defaults: the whole query must parse.
	if rawQuery == "" {
		return p, nil // the common case: nothing to parse
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return service.Purchase{}, invalidf("the query does not parse: %v", err)
	}
	for _, name := range overrideParams() {
		if !q.Has(name) {
			continue
		}
		if !rules.override {
			return service.Purchase{}, apiError(codeOverrideDisabled, fmt.Sprintf("query parameter %s needs SECKILL_STRATEGY_OVERRIDE=true", name))
		}
		if !rules.admin {
			return service.Purchase{}, apiError(codeUnauthorized,
				fmt.Sprintf("query parameter %s needs Authorization: Bearer <SECKILL_ADMIN_TOKEN>", name))
		}
		if len(q[name]) > 1 {
			return service.Purchase{}, invalidf("query parameter %s is given %d times", name, len(q[name]))
		}
		if err := setOverride(&p, name, q.Get(name)); err != nil {
			return service.Purchase{}, err
		}
	}
	return p, nil
}

// purchaseRules are what a purchase's request may carry: the override's
// parameters (override, admin), and no user_id when a token names the
// buyer (userOptional).
type purchaseRules struct {
	override, admin, userOptional bool
}

// setOverride sets the override parameter name of p to v, or says why v
// is not one.
func setOverride(p *service.Purchase, name, v string) error {
	switch name {
	case "strategy":
		if v == "" {
			return invalidf("strategy is empty")
		}
		p.Strategy = v
	case "hold_ms", "pause_ms":
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > api.MaxHold.Milliseconds() {
			return invalidf("%s must be an integer from 0 to %d", name, api.MaxHold.Milliseconds())
		}
		if name == "hold_ms" {
			p.Work = time.Duration(ms) * time.Millisecond
		} else {
			p.Pause = time.Duration(ms) * time.Millisecond
		}
	case "fencing":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return invalidf("fencing must be true or false")
		}
		p.Fencing = &b
	case "batch":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxBatch {
			return invalidf("batch must be an integer from 1 to %d", api.MaxBatch)
		}
		p.Batch = n
	}
	return nil
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
