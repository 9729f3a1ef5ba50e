package controller

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/service"
)

// The contract's codes that are the HTTP layer's own, not the service's.
const (
	codeUnauthorized     service.Code = "unauthorized"
	codeOverrideDisabled service.Code = "strategy_override_disabled"
	codePayloadTooLarge  service.Code = "payload_too_large"
	codeRouteNotFound    service.Code = "not_found"
	codeMethodNotAllowed service.Code = "method_not_allowed"
	codeRateLimited      service.Code = "rate_limited"
)

// statusOf is the one table from a code to its HTTP status.
func statusOf(code service.Code) int {
	switch code {
	case service.CodeInvalid:
		return http.StatusBadRequest
	case codeUnauthorized:
		return http.StatusUnauthorized
	case codeOverrideDisabled:
		return http.StatusForbidden
	case service.CodeNotFound, codeRouteNotFound:
		return http.StatusNotFound
	case codeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case service.CodeSoldOut, service.CodeLimitExceeded, service.CodeRequestIDReused:
		return http.StatusConflict
	case codePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case codeRateLimited:
		return http.StatusTooManyRequests
	case service.CodeLockTimeout, service.CodeLockLost, service.CodeUnavailable, service.CodeOutcomeUnknown:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// apiError is an error of the HTTP layer with its code and message.
func apiError(code service.Code, msg string) error {
	return &service.Error{Code: code, Message: msg}
}

// writeError is the one place that turns an error into a status and the
// contract's body {"error": {"code", "message"}}. 5xx are logged with the
// full error; an error without a code is a 500 whose details stay in the
// log.
func writeError(c *gin.Context, log *slog.Logger, err error) {
	code := service.ErrorCode(err)
	status := statusOf(code)
	msg := service.ErrorMessage(err)
	if status >= 500 {
		// A lock not granted or overtaken is what contention and lease
		// overruns look like, not a fault: a warning. The rest is an error.
		level := slog.LevelError
		switch code {
		case service.CodeLockTimeout, service.CodeLockLost:
			level = slog.LevelWarn
		case service.CodeUnavailable:
			msg = "a store the service needs is unavailable; retry later"
		case service.CodeOutcomeUnknown:
			// The message names the request ID to replay.
		default:
			code, msg = service.CodeInternal, "internal error"
		}
		log.Log(c.Request.Context(), level, "request failed", "method", c.Request.Method,
			"path", c.Request.URL.Path, "status", status, "code", code, "err", err)
	}
	switch status {
	case http.StatusServiceUnavailable:
		if code == service.CodeLockTimeout || code == service.CodeOutcomeUnknown {
			c.Header("Retry-After", "1")
		}
	case http.StatusUnauthorized:
		c.Header("WWW-Authenticate", `Bearer realm="seckill admin"`)
	}
	c.AbortWithStatusJSON(status, api.ErrorBody{Error: api.Error{Code: string(code), Message: msg}})
}
