package controller

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/service"
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
		o, err := svc.Order(c.Request.Context(), id, q.Get("user_id"), admin(c))
		if err != nil {
			writeError(c, log, err)
			return
		}
		c.JSON(http.StatusOK, toOrder(o))
	}
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
		page := service.OrdersPage{Status: q.Get("status"), After: q.Get("after")}
		if v, ok := q["limit"]; ok {
			n, err := strconv.Atoi(v[0])
			if err != nil || n < 1 {
				writeError(c, log, invalidf("limit must be from 1 to %d", service.MaxOrdersPage))
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
