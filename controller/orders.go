package controller

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/orders"
)

// handleOrder answers one order to its buyer (?user_id= naming the
// order's user) or to the admin; anyone else gets 404 order_not_found, as
// for an order that is not there.
func handleOrder(svc *service.Seckill, log *slog.Logger, admin func(*gin.Context) bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil || id <= 0 {
			writeError(c, log, invalidf("order id %q must be a positive integer", c.Param("id")))
			return
		}
		q := c.Request.URL.Query()
		if len(q["user_id"]) > 1 {
			writeError(c, log, invalidf("query parameter user_id is given %d times", len(q["user_id"])))
			return
		}
		user, err := buyerOf(c, q.Get("user_id"))
		if err != nil {
			writeError(c, log, err)
			return
		}
		o, err := svc.Order(c.Request.Context(), id, user, admin(c))
		if err != nil {
			writeError(c, log, err)
			return
		}
		c.JSON(http.StatusOK, toOrder(o))
	}
}

// orderActionRequest is api.OrderAction as the server decodes it: a
// pointer tells a missing user_id from an empty one.
type orderActionRequest struct {
	UserID *string `json:"user_id"`
}

// handleOrderAction answers a buyer's action on an order (svc.Pay or
// svc.Cancel), its body {"user_id": "..."}: 200 with the order as the
// action left it.
func handleOrderAction(log *slog.Logger, act func(c *gin.Context, id int64, user string) (model.Order, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil || id <= 0 {
			writeError(c, log, invalidf("order id %q must be a positive integer", c.Param("id")))
			return
		}
		var body orderActionRequest
		if err := decodeBody(c, &body); err != nil {
			writeError(c, log, err)
			return
		}
		if body.UserID == nil && !tokenBuyer(c) {
			writeError(c, log, invalidf("user_id is required"))
			return
		}
		user, err := buyerOf(c, derefOr(body.UserID, ""))
		if err != nil {
			writeError(c, log, err)
			return
		}
		o, err := act(c, id, user)
		if err != nil {
			writeError(c, log, err)
			return
		}
		c.JSON(http.StatusOK, toOrder(o))
	}
}

// handlePay pays an order for its buyer: POST /api/v1/orders/{id}/pay;
// with the payment provider's callbacks on (byCallback), 403 forbidden:
// orders are paid only through them.
func handlePay(svc *service.Seckill, log *slog.Logger, byCallback bool) gin.HandlerFunc {
	pay := handleOrderAction(log, func(c *gin.Context, id int64, user string) (model.Order, error) {
		return svc.Pay(c.Request.Context(), id, user)
	})
	if !byCallback {
		return pay
	}
	return func(c *gin.Context) {
		writeError(c, log, apiError(codeForbidden, "orders are paid by the payment provider's signed callback here (POST /api/v1/payments)"))
	}
}

// handleCancel cancels an order: POST /api/v1/orders/{id}/cancel.
func handleCancel(svc *service.Seckill, log *slog.Logger) gin.HandlerFunc {
	return handleOrderAction(log, func(c *gin.Context, id int64, user string) (model.Order, error) {
		return svc.Cancel(c.Request.Context(), id, user)
	})
}

// handleOrders answers a page of a product's orders, oldest first:
// ?status=, ?limit= (1 to 1000, 100 by default) and ?after= (the next of
// the page before).
func handleOrders(svc *service.Seckill, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := productID(c)
		if err != nil {
			writeError(c, log, err)
			return
		}
		q := c.Request.URL.Query()
		for name, vs := range q {
			switch {
			case name != "status" && name != "limit" && name != "after":
				writeError(c, log, invalidf("unknown query parameter %s (status, limit, after)", name))
				return
			case len(vs) > 1:
				writeError(c, log, invalidf("query parameter %s is given %d times", name, len(vs)))
				return
			}
		}
		page := orders.OrdersPage{Status: q.Get("status"), After: q.Get("after")}
		if v, ok := q["limit"]; ok {
			n, err := strconv.Atoi(v[0])
			if err != nil || n < 1 {
				writeError(c, log, invalidf("limit must be from 1 to %d", orders.MaxOrdersPage))
				return
			}
			page.Limit = n
		}
		orders, next, err := svc.Orders(c.Request.Context(), id, page)
		if err != nil {
			writeError(c, log, err)
			return
		}
		out := api.Orders{Orders: make([]api.Order, len(orders)), Next: next}
		for i, o := range orders {
			out.Orders[i] = toOrder(o)
		}
		c.JSON(http.StatusOK, out)
	}
}

// derefOr is *p, or def when p is nil.
func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
