package controller

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/service"
)

// Error codes of the contract that are not the service's own.
var (
	errUnauthorized     = errors.New("unauthorized")
	errOverrideDisabled = errors.New("strategy override disabled")
	errTooLarge         = errors.New("payload too large")
	errRouteNotFound    = errors.New("route not found")
	errMethodNotAllowed = errors.New("method not allowed")
)

// writeError is the one place that turns an error into a status and the
// contract's body {"error": {"code", "message"}}. 5xx are logged with the
// full error; unknown errors become a generic 500.
func writeError(c *gin.Context, log *slog.Logger, err error) {
	status, code := classify(err)
	msg := message(err)
	if status >= 500 {
		// A lock not granted or overtaken is what contention and lease
		// overruns look like, not a fault: a warning. The rest is an error.
		level := slog.LevelError
		switch code {
		case "lock_timeout":
			level, msg = slog.LevelWarn, "the product's lock was not granted within the wait; retry later"
		case "lock_lost":
			level, msg = slog.LevelWarn, "the lock's lease ran out and a later holder took over; nothing was written"
		case "unavailable":
			msg = "a store the service needs is unavailable; retry later"
		default:
			msg = "internal error"
		}
		log.Log(c.Request.Context(), level, "request failed", "method", c.Request.Method,
			"path", c.Request.URL.Path, "status", status, "code", code, "err", err)
	}
	switch status {
	case http.StatusServiceUnavailable:
		if code == "lock_timeout" {
			c.Header("Retry-After", "1")
		}
	case http.StatusUnauthorized:
		c.Header("WWW-Authenticate", `Bearer realm="seckill admin"`)
	}
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": msg}})
}

func classify(err error) (int, string) {
	switch {
	case errors.Is(err, service.ErrInvalid):
		return http.StatusBadRequest, "invalid_argument"
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, "unauthorized"
	case errors.Is(err, errOverrideDisabled):
		return http.StatusForbidden, "strategy_override_disabled"
	case errors.Is(err, service.ErrNotFound):
		return http.StatusNotFound, "product_not_found"
	case errors.Is(err, errRouteNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, errMethodNotAllowed):
		return http.StatusMethodNotAllowed, "method_not_allowed"
	case errors.Is(err, service.ErrSoldOut):
		return http.StatusConflict, "sold_out"
	case errors.Is(err, service.ErrLimitExceeded):
		return http.StatusConflict, "limit_exceeded"
	case errors.Is(err, service.ErrRequestIDReused):
		return http.StatusConflict, "request_id_reused"
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, "payload_too_large"
	case errors.Is(err, service.ErrLockTimeout):
		return http.StatusServiceUnavailable, "lock_timeout"
	case errors.Is(err, service.ErrLockLost):
		return http.StatusServiceUnavailable, "lock_lost"
	case errors.Is(err, service.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "unavailable"
	}
	return http.StatusInternalServerError, "internal"
}

// message is the text for a person: the error without the chain of
// operations that only the log needs, for client errors.
func message(err error) string {
	s := err.Error()
	for _, known := range []error{service.ErrInvalid, errOverrideDisabled} {
		if prefix := known.Error() + ": "; strings.HasPrefix(s, prefix) {
			return strings.TrimPrefix(s, prefix)
		}
	}
	return s
}
