package controller

import (
	"net/http"
	"testing"

	"github.com/seckill/seckill/service"
)

// TestStatusOf: every code of the contract maps to the status the contract
// gives it, and a code it does not know is a 500.
func TestStatusOf(t *testing.T) {
	for code, want := range map[service.Code]int{
		service.CodeInvalid:          http.StatusBadRequest,
		codeUnauthorized:             http.StatusUnauthorized,
		codeOverrideDisabled:         http.StatusForbidden,
		service.CodeNotFound:         http.StatusNotFound,
		service.CodePurchaseNotFound: http.StatusNotFound,
		codeRouteNotFound:            http.StatusNotFound,
		codeMethodNotAllowed:         http.StatusMethodNotAllowed,
		service.CodeSoldOut:          http.StatusConflict,
		service.CodeLimitExceeded:    http.StatusConflict,
		service.CodeRequestIDReused:  http.StatusConflict,
		service.CodeStrategyConflict: http.StatusConflict,
		codePayloadTooLarge:          http.StatusRequestEntityTooLarge,
		codeRateLimited:              http.StatusTooManyRequests,
		service.CodeLockTimeout:      http.StatusServiceUnavailable,
		service.CodeLockLost:         http.StatusServiceUnavailable,
		service.CodeUnavailable:      http.StatusServiceUnavailable,
		service.CodeOutcomeUnknown:   http.StatusServiceUnavailable,
		service.CodeInternal:         http.StatusInternalServerError,
		"no_such_code":               http.StatusInternalServerError,
	} {
		if got := statusOf(code); got != want {
			t.Errorf("statusOf(%s) = %d; want %d", code, got, want)
		}
	}
}
