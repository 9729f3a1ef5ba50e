package salestore

import (
	"fmt"
	"time"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/stockcache"
)

// The words of a sale, which the service and its store share: a purchase,
// what it is answered, and a sale as the rule decided it.

// Purchase is one buyer's attempt to buy a product.
type Purchase struct {
	ProductID int64
	UserID    string
	Quantity  int64
	// RequestID makes the purchase idempotent: a second purchase with the
	// same RequestID answers with the first order.
	RequestID string
	// Strategy overrides the service's Config.Strategy when not empty.
	Strategy string
	// Work is the contract's hold_ms: simulated business work done inside
	// the lock (the critical section), after the stock is read and before
	// it is written. It is not a hold: a hold is one tenure of a product's
	// lock, in which a batch of purchases is sold.
	Work time.Duration
	// Pause is the contract's pause_ms: a simulated pause of the whole
	// holder inside the critical section, after Work: a stop-the-world GC
	// pause, a frozen VM. Unlike Work it stops the lease's watchdog too, so
	// the lease runs out.
	Pause time.Duration
	// Fencing overrides the service's Config.Fencing when not nil.
	Fencing *bool
	// Batch overrides the service's Config.Batch for the hold this
	// purchase heads, when not 0: the most purchases sold under that one
	// hold of the lock.
	Batch int

	// ServerRequestID says RequestID was made by the server for this
	// purchase (the buyer sent none): no earlier purchase can have used it,
	// so there is nothing to replay, but its order can be looked up when a
	// COMMIT's outcome is unknown.
	ServerRequestID bool
}

// Receipt is the answer to a successful purchase: its order, or under
// reserve its reservation, whose order is written moments later.
type Receipt struct {
	Order model.Order
	// Reservation, when not nil, is the purchase's reservation under
	// reserve (answered 202); Order is then empty.
	Reservation *Reservation
	// Replayed says the order, or the reservation, was made by an earlier
	// purchase with the same request ID.
	Replayed bool
}

// Reservation is one reservation of the reserve strategy, as its stream
// holds it: the purchase, and the stock its counter in Redis left, which
// its order carries as its remaining stock (what the buyer was answered).
type Reservation struct {
	Purchase
	Left int64
}

// Answer is what one purchase of a hold is answered: a receipt or an
// error; or, when SoldOut, that only Stock units were left, too few: its
// buyer then answers sold out after looking up its request ID, on its own
// time rather than the hold's.
type Answer struct {
	R       Receipt
	Err     error
	SoldOut bool
	Stock   int64
}

// NewOrder is the order p makes, leaving stock left.
func NewOrder(p Purchase, strategy string, left int64) model.Order {
	o := model.Order{
		ProductID:      p.ProductID,
		UserID:         model.BinaryString(p.UserID),
		Quantity:       p.Quantity,
		Strategy:       strategy,
		RemainingStock: left,
	}
	if p.RequestID != "" {
		rid := model.BinaryString(p.RequestID)
		o.RequestID = &rid
	}
	return o
}

// FenceMoved is a fenced write's refusal: the product's fence is no longer
// the hold's token. Generation is the product's generation then: a reset
// moves both. The hold decides what it answers (overtaken).
type FenceMoved struct {
	Generation int64
}

func (e *FenceMoved) Error() string {
	return fmt.Sprintf("the fence moved on (generation %d)", e.Generation)
}

// Sale is a sale as the rule decided it: an answer per purchase, and
// what it sells. Orders[k] is the order of purchase Sold[k]; purchase i
// replays purchase FirstOf[i] of the same sale (same request ID); Total is
// the units sold, Left the stock they leave and Units the units of the
// users sold to, after the sale. The answers of those sold and of those
// replaying them are final once the orders are written (finish). Final
// says Left is the product's stock as the sale left it, known under its
// row lock (afterWrite), for the stock cache, in version Read.
type Sale struct {
	Answers     []Answer
	Orders      []model.Order
	Sold        []int
	FirstOf     map[int]int
	Left, Total int64
	Units       map[string]int64
	Final       bool
	Read        stockcache.Version
}

// afterWrite sets what d leaves of stock, the stock read under the row
// lock: the rule's own figure, unless the sale trusted a stock read
// before (trusted), which another holder may have written since; the
// orders then say what the stock really became.
func (d *Sale) afterWrite(stock int64, trusted bool) {
	if trusted {
		after := stock - d.Total
		for i := range d.Orders {
			d.Orders[i].RemainingStock += after - d.Left
		}
		d.Left = after
	}
	d.Final = true
}

// finish gives the purchases sold their orders, final now, their IDs
// included, and those replaying them theirs.
func (d *Sale) finish() {
	for k, i := range d.Sold {
		d.Answers[i] = Answer{R: Receipt{Order: d.Orders[k]}}
	}
	for i, first := range d.FirstOf {
		d.Answers[i] = Answer{R: Receipt{Order: d.Answers[first].R.Order, Replayed: true}}
	}
}

// writes says, per purchase, whether its answer is an order d writes: it
// was sold, or it replays one sold in the batch.
func (d *Sale) writes() []bool {
	w := make([]bool, len(d.Answers))
	for _, i := range d.Sold {
		w[i] = true
	}
	for i := range d.FirstOf {
		w[i] = true
	}
	return w
}

// soldUsers are the users d sells to, each once, in line order.
func (d *Sale) soldUsers(ps []Purchase) []string {
	var users []string
	seen := map[string]bool{}
	for _, i := range d.Sold {
		if u := ps[i].UserID; !seen[u] {
			seen[u] = true
			users = append(users, u)
		}
	}
	return users
}
