package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/render"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/service/failure"
)

// The contract's codes that are the HTTP layer's own, not the service's.
const (
	codeUnauthorized     failure.Code = "unauthorized"
	codeOverrideDisabled failure.Code = "strategy_override_disabled"
	codePayloadTooLarge  failure.Code = "payload_too_large"
	codeRouteNotFound    failure.Code = "not_found"
	codeMethodNotAllowed failure.Code = "method_not_allowed"
	codeRateLimited      failure.Code = "rate_limited"
)

// statusOf is the one table from a code to its HTTP status.
func statusOf(code failure.Code) int {
	switch code {
	case failure.CodeInvalid:
		return http.StatusBadRequest
	case codeUnauthorized, codeUnauthenticated:
		return http.StatusUnauthorized
	case codeOverrideDisabled, codeForbidden:
		return http.StatusForbidden
	case failure.CodeNotFound, failure.CodePurchaseNotFound, failure.CodeOrderNotFound, codeRouteNotFound:
		return http.StatusNotFound
	case codeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case failure.CodeSoldOut, failure.CodeLimitExceeded, failure.CodeRequestIDReused, failure.CodeStrategyConflict,
		failure.CodeOrderPaid, failure.CodeOrderClosed:
		return http.StatusConflict
	case codePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case codeRateLimited:
		return http.StatusTooManyRequests
	case failure.CodeLockTimeout, failure.CodeLockLost, failure.CodeUnavailable, failure.CodeOutcomeUnknown:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// apiError is an error of the HTTP layer with its code and message.
func apiError(code failure.Code, msg string) error {
	return &failure.Error{Code: code, Message: msg}
}

// writeError is the one place that turns an error into a status and the
// contract's body {"error": {"code", "message"}}. 5xx are logged with the
// full error; an error without a code is a 500 whose details stay in the
// log.
func writeError(c *gin.Context, log *slog.Logger, err error) {
	code, msg := codeAndMessage(err)
	status := statusOf(code)
	if status >= 500 {
		// A lock not granted or overtaken is what contention and lease
		// overruns look like, not a fault: a warning. The rest is an error.
		level := slog.LevelError
		switch code {
		case failure.CodeLockTimeout, failure.CodeLockLost:
			level = slog.LevelWarn
		case failure.CodeUnavailable:
			msg = "a store the service needs is unavailable; retry later"
		case failure.CodeOutcomeUnknown:
			// The message names the request ID to replay.
		default:
			code, msg = failure.CodeInternal, "internal error"
		}
		log.Log(c.Request.Context(), level, "request failed", "method", c.Request.Method,
			"path", c.Request.URL.Path, "status", status, "code", code, "err", err)
	}
	switch status {
	case http.StatusServiceUnavailable:
		if code == failure.CodeLockTimeout || code == failure.CodeOutcomeUnknown {
			c.Header("Retry-After", "1")
		}
	case http.StatusUnauthorized:
		if c.Writer.Header().Get("WWW-Authenticate") == "" { // a buyer's challenge is set already
			c.Header("WWW-Authenticate", `Bearer realm="seckill admin"`)
		}
	}
	writeErrorBody(c, status, string(code), msg)
}

// codeAndMessage returns failure.CodeOf(err) and
// failure.MessageOf(err). An *failure.Error in err's chain, the common
// case, gives both at once through errors.AsType, which, unlike the
// errors.As of those two, allocates nothing.
func codeAndMessage(err error) (failure.Code, string) {
	if e, ok := errors.AsType[*failure.Error](err); ok {
		return e.Code, e.Message
	}
	return failure.CodeOf(err), failure.MessageOf(err)
}

// writeErrorBody aborts c and answers status with the contract's error
// body of code and msg, as encoding/json encodes api.ErrorBody without
// escaping <, > and & for HTML (a message reads "Bearer
// <SECKILL_ADMIN_TOKEN>", not "Bearer \u003cSECKILL_ADMIN_TOKEN\u003e"),
// with AbortWithStatusJSON's status and headers
// (TestErrorBodyIsEncodingJSONs). The body is put together from its
// constant parts, without reflection or boxing, unless code or msg has a
// byte that encoding/json escapes: then it encodes it.
func writeErrorBody(c *gin.Context, status int, code, msg string) {
	body, ok := appendErrorBody(make([]byte, 0, len(errorBodyStart+errorBodyMiddle+errorBodyEnd)+len(code)+len(msg)), code, msg)
	if !ok {
		var err error
		if body, err = encodeErrorBody(code, msg); err != nil {
			c.AbortWithStatusJSON(status, api.ErrorBody{Error: api.Error{Code: code, Message: msg}})
			_ = c.Error(err)
			return
		}
	}
	// What AbortWithStatusJSON does: abort, set the status, set the
	// Content-Type unless set already, write the body, and keep an error
	// of the write with the request's.
	c.Abort()
	c.Status(status)
	render.JSON{}.WriteContentType(c.Writer)
	if _, err := c.Writer.Write(body); err != nil {
		_ = c.Error(err)
	}
}

// encodeErrorBody is the error body of code and msg as encoding/json
// encodes it without escaping for HTML, and without the newline its
// Encoder ends with.
func encodeErrorBody(code, msg string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(api.ErrorBody{Error: api.Error{Code: code, Message: msg}}); err != nil {
		return nil, fmt.Errorf("encode an error body: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// The constant parts of an error body.
const (
	errorBodyStart  = `{"error":{"code":"`
	errorBodyMiddle = `","message":"`
	errorBodyEnd    = `"}}`
)

// appendErrorBody appends the error body of code and msg to b, as
// encoding/json encodes api.ErrorBody, when neither has a byte that
// encoding/json would escape; else ok is false.
func appendErrorBody(b []byte, code, msg string) (_ []byte, ok bool) {
	if !jsonPlain(code) || !jsonPlain(msg) {
		return b, false
	}
	b = append(b, errorBodyStart...)
	b = append(b, code...)
	b = append(b, errorBodyMiddle...)
	b = append(b, msg...)
	return append(b, errorBodyEnd...), true
}

// jsonPlain says whether encoding/json, not escaping for HTML, writes s
// as it is between quotes: ASCII from the space on (DEL included), but the
// quote and the backslash.
func jsonPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < ' ' || c >= utf8.RuneSelf, c == '"', c == '\\':
			return false
		}
	}
	return true
}
