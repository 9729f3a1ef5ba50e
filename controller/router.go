// Package controller is the HTTP face of the service: every route of the
// contract in one function, handlers as closures, and one function that
// turns errors into the contract's statuses and bodies.
package controller

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/docs"
	"github.com/seckill/seckill/service"
)

// Options are the router's settings.
type Options struct {
	// AdminToken is the bearer token of /api/v1/admin/*, the audit,
	// /debug/pprof/ and a purchase's override parameters.
	AdminToken string
	// StrategyOverride lets a purchase that carries the admin token choose
	// strategy, hold_ms, pause_ms, fencing and batch with query parameters
	// (overrideParams).
	StrategyOverride bool
	// Gatherer serves /metrics; Registerer takes the HTTP instruments.
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	// Strategy is the strategy of a purchase that names none (SECKILL_LOCK),
	// for the log.
	Strategy string
	// Drain is the instance's shutdown: /readyz answers 503 once it has
	// started. Nil: a drain of the router's own, never started.
	Drain *Drain
	// Buyers, when not nil, verifies buyers' tokens on the buyer routes
	// (SECKILL_BUYER_AUTH=jwt); nil: the buyer is the user_id sent.
	Buyers *Buyers
	// Payments, when not nil, takes the payment provider's signed
	// callbacks, and orders are paid only through them
	// (SECKILL_PAYMENT_SECRET); nil: buyers pay their orders.
	Payments *Payments
	// IPLimiter, when not nil, limits the purchase requests of each client
	// IP (SECKILL_IP_LIMIT).
	IPLimiter *IPLimiter
	// TrustedProxies are the peers (CIDRs or addresses) whose
	// X-Forwarded-For names the client; from any other peer the header is
	// ignored and the peer is the client.
	TrustedProxies []string
	// Clock is the access log's clock: the latency it logs, and the
	// seconds its sampling counts in. Nil is time.Now.
	Clock func() time.Time
}

// maxBody is the largest request body the API reads.
const maxBody = 4 << 10

// NewRouter returns the service's routes.
func NewRouter(svc *service.Seckill, log *slog.Logger, opts Options) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	if opts.Drain == nil {
		opts.Drain = &Drain{}
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	r := gin.New()
	// The client is the TCP peer, unless the peer is a trusted proxy: then
	// the right-most address of X-Forwarded-For that is not a trusted
	// proxy. Gin trusts every peer unless told otherwise.
	r.RemoteIPHeaders = []string{"X-Forwarded-For"}
	if err := r.SetTrustedProxies(opts.TrustedProxies); err != nil {
		// config.Load has checked them: a bug.
		panic(fmt.Sprintf("controller: trusted proxies %q: %v", opts.TrustedProxies, err))
	}
	r.HandleMethodNotAllowed = true
	// A path with a slash too many or too few is not found (404
	// not_found, as the API's document says), not redirected.
	r.RedirectTrailingSlash = false
	r.ContextWithFallback = true
	// Routes match the path as sent, so that a request ID holding a "/"
	// (escaped, %2F) stays one segment; path values are unescaped.
	r.UseRawPath, r.UnescapePathValues = true, true
	r.Use(requestID(), recovery(log), requestMetrics(opts.Registerer), accessLog(log, opts.Drain, opts.Clock))
	r.NoRoute(func(c *gin.Context) { writeError(c, log, apiError(codeRouteNotFound, "no such route")) })
	r.NoMethod(func(c *gin.Context) {
		writeError(c, log, apiError(codeMethodNotAllowed, "method not allowed on this route"))
	})

	r.GET("/", handleDashboard())
	r.GET("/openapi.json", handleDocument("application/json; charset=utf-8", openapiJSON()))
	r.GET("/openapi.yaml", handleDocument("application/yaml; charset=utf-8", docs.OpenAPIYAML()))
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, api.Health{Status: "ok"}) })
	r.GET("/readyz", handleReady(svc, log, opts.Drain))
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{})))

	v1 := r.Group("/api/v1")
	v1.GET("/strategies", handleStrategies(svc))
	v1.GET("/products", handleProducts(svc, log))
	v1.GET("/products/:id", handleProduct(svc, log))
	isAdminReq := func(c *gin.Context) bool { return isAdmin(c, opts.AdminToken) }
	// The buyer routes: who the buyer is, asked of one place (buyers.go).
	failures := authFailures(opts.Registerer)
	buyerGate := authenticate(log, opts.Buyers, failures, isAdminReq)
	purchase := []gin.HandlerFunc{buyerGate, handlePurchase(svc, log, purchaseOptions{override: opts.StrategyOverride,
		strategy: opts.Strategy, admin: isAdminReq})}
	if opts.IPLimiter != nil {
		purchase = slices.Insert(purchase, 0, limitIP(log, opts.IPLimiter))
	}
	v1.POST("/products/:id/purchase", purchase...)
	// The audit counts and sums all of a product's orders, on the pool the
	// purchases need: an admin's.
	v1.GET("/products/:id/audit", requireToken(log, opts.AdminToken), handleAudit(svc, log))
	v1.GET("/purchases/:request_id", buyerGate, handlePurchaseState(svc, log))
	// An order to its buyer or to the admin; a product's orders to the
	// admin.
	v1.GET("/orders/:id", buyerGate, handleOrder(svc, log, isAdminReq))
	v1.GET("/products/:id/orders", requireToken(log, opts.AdminToken), handleOrders(svc, log))
	v1.POST("/orders/:id/pay", buyerGate, handlePay(svc, log, opts.Payments != nil))
	v1.POST("/payments", handlePayment(svc, log, opts.Payments, failures))
	v1.POST("/orders/:id/cancel", buyerGate, handleCancel(svc, log))

	admin := v1.Group("/admin", requireToken(log, opts.AdminToken))
	admin.POST("/products", handleCreateProduct(svc, log))
	admin.PUT("/products/:id/stock", handleSetStock(svc, log))

	// Go's profiles (net/http/pprof), on this router and nowhere else,
	// behind the admin token: they show the program's internals and a CPU
	// profile or trace costs the instance while it runs.
	r.Match([]string{http.MethodGet, http.MethodPost}, "/debug/pprof/*profile",
		requireToken(log, opts.AdminToken), handleProfile())
	return r
}

// handleProfile serves net/http/pprof's handlers under /debug/pprof/: the
// index, cmdline, profile (CPU), symbol, trace, and any named profile
// (heap, goroutine, allocs, block, mutex, threadcreate).
func handleProfile() gin.HandlerFunc {
	return func(c *gin.Context) {
		switch strings.TrimPrefix(c.Param("profile"), "/") {
		case "cmdline":
			pprof.Cmdline(c.Writer, c.Request)
		case "profile":
			pprof.Profile(c.Writer, c.Request)
		case "symbol":
			pprof.Symbol(c.Writer, c.Request)
		case "trace":
			pprof.Trace(c.Writer, c.Request)
		default:
			// The index, and the named profiles by the path's last element.
			pprof.Index(c.Writer, c.Request)
		}
	}
}

// requireToken lets through requests that carry the admin token (isAdmin).
func requireToken(log *slog.Logger, token string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !isAdmin(c, token) {
			writeError(c, log, apiError(codeUnauthorized, "this needs Authorization: Bearer <SECKILL_ADMIN_TOKEN>"))
			return
		}
		c.Next()
	}
}

// isAdmin says the request carries "Authorization: Bearer <token>" (the
// scheme's name in any case, as RFC 9110 has it), compared in constant
// time. An empty token admits nobody.
func isAdmin(c *gin.Context, token string) bool {
	scheme, got, ok := strings.Cut(c.GetHeader("Authorization"), " ")
	return ok && token != "" && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}
