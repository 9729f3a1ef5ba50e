package controller

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/service/failure"
)

// Who is buying: the one place the buyer routes ask. Under
// SECKILL_BUYER_AUTH=open the buyer is the user_id the client sends (the
// articles' and the workshop's way); under jwt it is the sub of the
// buyer's token, verified before anything is read (package buyer), and a
// user_id that names another buyer is refused. The admin token stands for
// any buyer under both.

// The contract's codes of who is buying.
const (
	codeUnauthenticated failure.Code = "unauthenticated"
	codeForbidden       failure.Code = "forbidden"
)

// buyerKey is where authenticate leaves the token's buyer in the
// request's context.
const buyerKey = "seckill.buyer"

// Buyers verifies buyers' tokens; one without a verifier (or nil) is
// SECKILL_BUYER_AUTH=open.
type Buyers struct {
	verifier *buyer.Verifier
}

// NewBuyers returns the buyer routes' gate, under jwt when v is not nil.
func NewBuyers(v *buyer.Verifier) *Buyers {
	return &Buyers{verifier: v}
}

// authFailures is seckill_auth_failures_total, buyer tokens and payment
// callbacks refused by why, every reason at 0 from the start.
func authFailures(reg prometheus.Registerer) *prometheus.CounterVec {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_auth_failures_total",
		Help: "Buyer tokens and payment callbacks refused, by why.",
	}, []string{"reason"})
	for _, r := range buyer.Reasons() {
		vec.WithLabelValues(string(r))
	}
	for _, r := range paymentReasons() {
		vec.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(vec)
	}
	return vec
}

// authenticate gates a buyer route: under jwt, a request without the admin
// token needs a valid buyer token, or answers 401 unauthenticated with
// WWW-Authenticate, before its body is read.
func authenticate(log *slog.Logger, b *Buyers, failures *prometheus.CounterVec, admin func(*gin.Context) bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if b == nil || b.verifier == nil || admin(c) {
			c.Next()
			return
		}
		tok, sent := bearerToken(c)
		claims, err := b.verifier.Verify(c.Request.Context(), tok)
		if err == nil && api.CheckID(claims.Subject) != nil {
			// No buyer of the API's: a user ID is 1 to 64 characters.
			err = &buyer.Refused{Reason: buyer.ReasonSubject, Err: fmt.Errorf("sub %q is not a user ID", claims.Subject)}
		}
		if err != nil {
			failures.WithLabelValues(string(buyer.ReasonOf(err))).Inc()
			challenge := `Bearer realm="seckill"`
			if sent {
				challenge += `, error="invalid_token"`
			}
			c.Header("WWW-Authenticate", challenge)
			// At debug level: a flood of bad tokens writes the access log's
			// sampled lines, not one of its own per refusal; the metric
			// counts every refusal by reason.
			log.Debug("buyer token refused", "reason", buyer.ReasonOf(err), "err", err)
			writeError(c, log, apiError(codeUnauthenticated, "this route needs a valid buyer token: Authorization: Bearer <JWT>"))
			c.Abort()
			return
		}
		if c.Request.URL.RawQuery != "" && c.Query("user_id") != "" && c.Query("user_id") != claims.Subject {
			writeError(c, log, apiError(codeForbidden, "user_id names another buyer than the token's"))
			c.Abort()
			return
		}
		c.Set(buyerKey, claims.Subject)
		c.Next()
	}
}

// bearerToken is the request's bearer token; sent says one was sent (an
// Authorization of another scheme sends none).
func bearerToken(c *gin.Context) (string, bool) {
	scheme, tok, ok := strings.Cut(c.GetHeader("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// buyerOf is the buyer a request acts for, given the user_id it names
// ("" for none): the token's sub when authenticate found one (403
// forbidden when claimed names another), else claimed.
func buyerOf(c *gin.Context, claimed string) (string, error) {
	sub := c.GetString(buyerKey)
	switch {
	case sub == "":
		return claimed, nil
	case claimed != "" && claimed != sub:
		return "", apiError(codeForbidden, "user_id names another buyer than the token's")
	}
	return sub, nil
}

// tokenBuyer says the request's buyer is a token's sub (it may leave
// user_id out).
func tokenBuyer(c *gin.Context) bool { return c.GetString(buyerKey) != "" }
