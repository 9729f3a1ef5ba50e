// Package failure is how the service says no: the contract's error codes
// (Code), the error that carries one with a message for the buyer and a
// cause for the log (Error), and the errors a caller tells apart (ErrSoldOut
// and the others, compared with errors.Is). The controller maps a code to
// an HTTP status; the metrics count purchases by it.
package failure

import (
	"context"
	"errors"
	"fmt"
)

// Code is one of the contract's error codes. The controller maps it to an
// HTTP status, and it is the outcome label of the purchase metrics.
type Code string

// The codes the service answers with.
const (
	CodeInvalid         Code = "invalid_argument"
	CodeNotFound        Code = "product_not_found"
	CodeSoldOut         Code = "sold_out"
	CodeLimitExceeded   Code = "limit_exceeded"
	CodeRequestIDReused Code = "request_id_reused"
	CodeLockTimeout     Code = "lock_timeout"
	CodeLockLost        Code = "lock_lost"
	CodeUnavailable     Code = "unavailable"
)

// The codes that need a word more.
const (
	// CodeStrategyConflict: the product sells under reserve (since its
	// first reserve purchase after its last reset), and the purchase asked
	// for another strategy. reserve itself never answers it: it takes over
	// a product the others have sold since the reset.
	CodeStrategyConflict Code = "strategy_conflict"
	// CodePurchaseNotFound: no order (and, under reserve, no reservation)
	// carries the request ID.
	CodePurchaseNotFound Code = "purchase_not_found"
	// CodeOrderNotFound: no order has that ID, or it is another user's
	// (an order ID alone reveals nothing).
	CodeOrderNotFound Code = "order_not_found"
	// CodeOrderPaid: the order is paid, and a paid order is not cancelled.
	CodeOrderPaid Code = "order_paid"
	// CodeOrderClosed: the order is cancelled or expired, and is paid no
	// more (or, expired, cancelled no more).
	CodeOrderClosed Code = "order_closed"
	// CodeOutcomeUnknown: a COMMIT was sent and what became of it could not
	// be looked up; a replay of the request ID answers the truth.
	CodeOutcomeUnknown Code = "outcome_unknown"
	// CodeInternal is a bug: an error that carries no code.
	CodeInternal Code = "internal"
)

// Error is an error with its code, a message for the person who made the
// request and, for the log, its cause.
type Error struct {
	Code Code
	// Message names nothing internal: it is safe to show a client.
	Message string
	// Err is the cause, if any, for the log.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Err == nil:
		return e.Message
	case e.Message == "":
		return e.Err.Error()
	}
	return e.Message + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error of the same code, so that
// errors.Is(err, ErrSoldOut) holds for every sold-out answer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// The errors a caller tells apart, one per code but CodeInternal: compare
// with errors.Is.
var (
	ErrInvalid          = &Error{Code: CodeInvalid, Message: "invalid argument"}
	ErrNotFound         = &Error{Code: CodeNotFound, Message: "product not found"}
	ErrStrategyConflict = &Error{Code: CodeStrategyConflict, Message: "the product sells under another strategy until its stock is reset"}
	ErrPurchaseNotFound = &Error{Code: CodePurchaseNotFound, Message: "no purchase carries that request_id"}
	ErrSoldOut          = &Error{Code: CodeSoldOut, Message: "sold out"}
	ErrLimitExceeded    = &Error{Code: CodeLimitExceeded, Message: "per-user limit exceeded"}
	ErrRequestIDReused  = &Error{Code: CodeRequestIDReused, Message: "request_id already used for another purchase"}
	ErrLockTimeout      = &Error{Code: CodeLockTimeout, Message: "the product's lock was held by others for the whole wait"}
	ErrLockLost         = &Error{Code: CodeLockLost, Message: "the lock's lease ran out and a later holder took over; nothing was written"}
	ErrUnavailable      = &Error{Code: CodeUnavailable, Message: "a store the service needs is unavailable"}
	ErrOutcomeUnknown   = &Error{Code: CodeOutcomeUnknown, Message: "the purchase may or may not have been made"}
)

// Because returns an *Error of e's code and message whose cause, for the
// log, is cause: ErrLockTimeout.Because(err).
func (e *Error) Because(cause error) *Error {
	return &Error{Code: e.Code, Message: e.Message, Err: cause}
}

// StrategyConflict is the answer to a purchase of product id under a
// strategy the product does not sell under now.
func StrategyConflict(id int64) *Error {
	return Errorf(CodeStrategyConflict, "product %d sells under reserve until its stock is reset", id)
}

// NotFound is the answer about product id, which does not exist.
func NotFound(id int64) *Error {
	return Errorf(CodeNotFound, "product %d not found", id)
}

// Errorf makes an *Error of code whose message is formatted.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code err carries. A context that ended is
// CodeUnavailable (the purchase was not decided); anything else without a
// code is CodeInternal.
//
// It looks for the *Error with errors.AsType, which, unlike errors.As with
// a pointer that escapes, allocates nothing: the metrics ask on every
// failed purchase.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return CodeUnavailable
	}
	return CodeInternal
}

// MessageOf returns the message for a person: that of the first *Error
// in err's chain, without the operations around it.
func MessageOf(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	return err.Error()
}

// Store makes a database error an ErrUnavailable that says what was
// being done, unless it already carries a code or is a context's end.
func Store(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return ErrUnavailable.Because(fmt.Errorf("%s: %w", op, err))
}
