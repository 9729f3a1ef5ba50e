package api

import "time"

// The contract's limits of a purchase.
const (
	// MaxQuantity is the most units one purchase may ask for.
	MaxQuantity = 100
	// MaxIDLength is the most characters of a user_id or a request_id.
	MaxIDLength = 64
	// MaxHold is the longest hold_ms (and pause_ms) a purchase may ask for.
	MaxHold = 10 * time.Second
	// MaxBatch is the largest batch: SECKILL_BATCH and a purchase's batch=.
	MaxBatch = 1000
)

// Product is the contract's product.
type Product struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	Stock        int64  `json:"stock"`
	InitialStock int64  `json:"initial_stock"`
}

// Order is the contract's order: the answer to a purchase. RequestID is
// null for an order that has none.
type Order struct {
	OrderID        int64   `json:"order_id"`
	ProductID      int64   `json:"product_id"`
	UserID         string  `json:"user_id"`
	Quantity       int64   `json:"quantity"`
	RequestID      *string `json:"request_id"`
	Strategy       string  `json:"strategy"`
	RemainingStock int64   `json:"remaining_stock"`
	// Status is unpaid, paid, cancelled or expired; ExpiresAt (RFC 3339,
	// UTC) is there only while the order is unpaid.
	Status    string     `json:"status"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Orders is a page of a product's orders, oldest first (GET
// /api/v1/products/{id}/orders); Next, absent on the last page, is the
// after= of the next one.
type Orders struct {
	Orders []Order `json:"orders"`
	Next   string  `json:"next,omitempty"`
}

// Reservation is the contract's reservation: the answer 202 of a purchase
// under reserve, whose order is written moments later. RemainingStock is
// the counter in Redis after this reservation took its units.
type Reservation struct {
	RequestID      string `json:"request_id"`
	ProductID      int64  `json:"product_id"`
	UserID         string `json:"user_id"`
	Quantity       int64  `json:"quantity"`
	Strategy       string `json:"strategy"`
	Status         string `json:"status"`
	RemainingStock int64  `json:"remaining_stock"`
}

// ReservationPending is the status of a reservation not yet written.
const ReservationPending = "pending"

// PurchaseState is what became of a purchase attempt, under any strategy
// (GET /api/v1/purchases/{request_id}): StateOrdered with its Order,
// StatePending with its Reservation (under reserve, not written yet), or
// StateFailed with the Error the database refused it with.
type PurchaseState struct {
	RequestID   string       `json:"request_id"`
	State       string       `json:"state"`
	Order       *Order       `json:"order,omitempty"`
	Reservation *Reservation `json:"reservation,omitempty"`
	Error       *Error       `json:"error,omitempty"`
}

// The states of a purchase attempt.
const (
	StateOrdered = "ordered"
	StatePending = "pending"
	StateFailed  = "failed"
)

// Audit is the answer to GET /api/v1/products/{id}/audit. Consistent is
// stock >= 0 && initial_stock - stock == units_sold; OversoldUnits is
// max(0, units_sold - initial_stock).
type Audit struct {
	ProductID     int64 `json:"product_id"`
	InitialStock  int64 `json:"initial_stock"`
	Stock         int64 `json:"stock"`
	Orders        int64 `json:"orders"`
	UnitsSold     int64 `json:"units_sold"`
	UnitsReturned int64 `json:"units_returned"`
	OversoldUnits int64 `json:"oversold_units"`
	Consistent    bool  `json:"consistent"`
}

// Held says the stock invariant held: the audit is consistent and nothing
// was oversold.
func (a Audit) Held() bool { return a.Consistent && a.OversoldUnits == 0 }

// Strategy is one entry of GET /api/v1/strategies.
type Strategy struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Safe        bool   `json:"safe"`
}

// Purchase is the body of POST /api/v1/products/{id}/purchase. UserID and
// Quantity are required; RequestID is optional.
type Purchase struct {
	UserID    string `json:"user_id"`
	Quantity  int64  `json:"quantity"`
	RequestID string `json:"request_id,omitempty"`
}

// OrderAction is the body of POST /api/v1/orders/{id}/pay and .../cancel:
// the order's buyer, its only identity.
type OrderAction struct {
	UserID string `json:"user_id"`
}

// Payment is the body of the payment provider's callback, POST
// /api/v1/payments: the provider's ID of the payment and the order it
// pays.
type Payment struct {
	PaymentID string `json:"payment_id"`
	OrderID   int64  `json:"order_id"`
}

// SignatureHeader carries a payment callback's signature:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<the raw body>">".
const SignatureHeader = "Seckill-Signature"

// NewProduct is the body of POST /api/v1/admin/products; both fields are
// required.
type NewProduct struct {
	Name  string `json:"name"`
	Stock int64  `json:"stock"`
}

// SetStock is the body of PUT /api/v1/admin/products/{id}/stock; Stock is
// required.
type SetStock struct {
	Stock int64 `json:"stock"`
}

// Health is the answer to GET /healthz: {"status": "ok"} while the
// process runs.
type Health struct {
	Status string `json:"status"`
}

// Ready is the answer to GET /readyz: {"status": "ready"} with 200, or with
// 503 {"down", "error", "status": "unavailable"}, where Down names what is
// down ("database", "redis", "instance" while it drains, or "unknown") and
// Error is the error body's inside, code "unavailable". Its keys are in
// alphabetical order, as the server has always sent them.
type Ready struct {
	Down   string `json:"down,omitempty"`
	Error  *Error `json:"error,omitempty"`
	Status string `json:"status"`
}

// ErrorBody is every error's body: {"error": {"code", "message"}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error is the inside of an error body: the contract's code, e.g.
// "sold_out", and a text for a person.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
