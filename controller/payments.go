package controller

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/service"
)

// The payment provider's callback: POST /api/v1/payments, its body signed
// with SECKILL_PAYMENT_SECRET (api.SignatureHeader). The signature is
// checked over the raw body, in constant time, before the body is read as
// JSON; a callback more than paymentWindow from this clock is refused, so
// that a captured one cannot be replayed later. Paying is idempotent (a
// paid order answers 200 again: providers retry), and the order's life
// decides a payment racing an expiry or a cancel.

// paymentWindow is how far a callback's t may be from this clock.
const paymentWindow = 300 * time.Second

// The reasons a callback is refused, in seckill_auth_failures_total.
const (
	reasonPaymentMissing   = "payment_missing"   // no signature header
	reasonPaymentMalformed = "payment_malformed" // not t=...,v1=...
	reasonPaymentStale     = "payment_stale"     // t too far from this clock
	reasonPaymentSignature = "payment_signature" // no v1 matches
)

// paymentReasons are every payment refusal's reason.
func paymentReasons() []string {
	return []string{reasonPaymentMissing, reasonPaymentMalformed, reasonPaymentStale, reasonPaymentSignature}
}

// Payments checks the payment provider's callbacks; a nil one (no
// SECKILL_PAYMENT_SECRET) takes none, and orders are paid by their buyers.
type Payments struct {
	secret []byte
	now    func() time.Time
}

// NewPayments returns the callbacks' check with secret, nil when secret
// is empty. now is the clock (nil: time.Now).
func NewPayments(secret string, now func() time.Time) *Payments {
	if secret == "" {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &Payments{secret: []byte(secret), now: now}
}

// verify says whether header signs body now, or why not (a reason).
func (p *Payments) verify(header string, body []byte) (string, error) {
	if header == "" {
		return reasonPaymentMissing, errors.New("no " + api.SignatureHeader + " header")
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			return reasonPaymentMalformed, fmt.Errorf("%s: %q is not key=value", api.SignatureHeader, part)
		case k == "t" && ts == "":
			ts = v
		case k == "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return reasonPaymentMalformed, fmt.Errorf("%s: v1 is not a hex HMAC-SHA256", api.SignatureHeader)
			}
			sigs = append(sigs, sig)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return reasonPaymentMalformed, fmt.Errorf("%s: want t=<unix seconds>,v1=<hex>", api.SignatureHeader)
	}
	if d := p.now().Sub(time.Unix(sec, 0)); d > paymentWindow || d < -paymentWindow {
		return reasonPaymentStale, fmt.Errorf("%s: t is %v from this server's clock, more than %v", api.SignatureHeader, d.Round(time.Second), paymentWindow)
	}
	want := api.PaymentMAC(p.secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return "", nil
		}
	}
	return reasonPaymentSignature, fmt.Errorf("%s: no v1 signs this body", api.SignatureHeader)
}

// handlePayment answers the provider's callback: 200 with the order, paid.
func handlePayment(svc *service.Seckill, log *slog.Logger, p *Payments, failures *prometheus.CounterVec) gin.HandlerFunc {
	return func(c *gin.Context) {
		if p == nil {
			writeError(c, log, apiError(codeForbidden, "payments are not taken by callback here: SECKILL_PAYMENT_SECRET is not set"))
			return
		}
		body, err := readBody(c)
		if err != nil {
			writeError(c, log, err)
			return
		}
		if reason, err := p.verify(c.GetHeader(api.SignatureHeader), body); err != nil {
			failures.WithLabelValues(reason).Inc()
			log.Warn("payment callback refused", "reason", reason, "err", err)
			c.Header("WWW-Authenticate", `Seckill-Signature realm="seckill payments"`)
			writeError(c, log, apiError(codeUnauthenticated, err.Error()))
			return
		}
		var pay paymentRequest
		if err := decodeJSON(body, &pay); err != nil {
			writeError(c, log, err)
			return
		}
		switch {
		case pay.PaymentID == nil || api.CheckID(*pay.PaymentID) != nil:
			writeError(c, log, invalidf("payment_id must be 1 to 64 characters of valid UTF-8, without control characters"))
			return
		case pay.OrderID == nil || *pay.OrderID <= 0:
			writeError(c, log, invalidf("order_id must be a positive integer"))
			return
		}
		o, err := svc.PayByProvider(c.Request.Context(), *pay.OrderID)
		if err != nil {
			writeError(c, log, err)
			return
		}
		log.Info("order paid by the provider's callback", "order", o.ID, "payment_id", *pay.PaymentID)
		c.JSON(http.StatusOK, toOrder(o))
	}
}

// paymentRequest is api.Payment as the server decodes it: pointers tell a
// missing member from a zero one.
type paymentRequest struct {
	PaymentID *string `json:"payment_id"`
	OrderID   *int64  `json:"order_id"`
}
