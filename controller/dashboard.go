package controller

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// dashboardHTML is the live dashboard of GET /: one page, no build step,
// nothing fetched from elsewhere.
//
//go:embed dashboard.html
var dashboardHTML []byte

// handleDashboard serves the live dashboard. The page's script reads the
// service's own endpoints twice a second: GET /api/v1/products for every
// product's stock, GET /metrics for this instance's purchases by strategy
// and outcome (seckill_purchases_total), GET /api/v1/strategies once for
// their order. It adds no endpoint of its own. Purchases of a product that
// does not exist (product_not_found, the load driver's probes) are not
// sales: the page counts them apart, under the table. It fits a window
// 1280 px wide (TestDashboardFitsTheWindow).
func handleDashboard() gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Cache-Control", "no-store")
		c.Data(http.StatusOK, "text/html; charset=utf-8", dashboardHTML)
	}
}
