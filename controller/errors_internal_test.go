package controller

import (
	"net/http"
	"testing"

	"github.com/seckill/seckill/service/failure"
)

// TestStatusOf: every code of the contract maps to the status the contract
// gives it, and a code it does not know is a 500.
func TestStatusOf(t *testing.T) {
	for code, want := range map[failure.Code]int{
		failure.CodeInvalid:          http.StatusBadRequest,
		codeUnauthorized:             http.StatusUnauthorized,
		codeOverrideDisabled:         http.StatusForbidden,
		failure.CodeNotFound:         http.StatusNotFound,
		failure.CodePurchaseNotFound: http.StatusNotFound,
		codeRouteNotFound:            http.StatusNotFound,
		codeMethodNotAllowed:         http.StatusMethodNotAllowed,
		failure.CodeSoldOut:          http.StatusConflict,
		failure.CodeLimitExceeded:    http.StatusConflict,
		failure.CodeRequestIDReused:  http.StatusConflict,
		failure.CodeStrategyConflict: http.StatusConflict,
		codePayloadTooLarge:          http.StatusRequestEntityTooLarge,
		codeRateLimited:              http.StatusTooManyRequests,
		failure.CodeLockTimeout:      http.StatusServiceUnavailable,
		failure.CodeLockLost:         http.StatusServiceUnavailable,
		failure.CodeUnavailable:      http.StatusServiceUnavailable,
		failure.CodeOutcomeUnknown:   http.StatusServiceUnavailable,
		failure.CodeInternal:         http.StatusInternalServerError,
		"no_such_code":               http.StatusInternalServerError,
	} {
		if got := statusOf(code); got != want {
			t.Errorf("statusOf(%s) = %d; want %d", code, got, want)
		}
	}
}
