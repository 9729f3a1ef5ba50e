package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// PaymentMAC is HMAC-SHA256 of "<ts>.<body>" keyed by secret: what a
// payment callback's v1 carries, hex-encoded.
func PaymentMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// SignPayment is the SignatureHeader of a payment callback with body, sent
// at t, as the payment provider computes it.
func SignPayment(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(PaymentMAC([]byte(secret), ts, body))
}
