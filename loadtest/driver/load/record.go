package load

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/history"
	"github.com/seckill/seckill/loadtest/report"
)

// Recorder keeps the history of a run (-history): every purchase as it is
// answered, written to the history file at once and kept for the run's own
// check.
type Recorder struct {
	w      *history.Writer
	prefix string // of the request and user IDs: prefix + index
	mu     sync.Mutex
	// blocks hold the lines so far, lineBlock a block: recording never
	// copies what was recorded before (a growing slice would, under mu).
	blocks [][]history.Line
}

// NewRecorder is the recorder of a run whose request and user IDs are
// prefix and the request's index, writing its lines to w.
func NewRecorder(w *history.Writer, prefix string) *Recorder {
	return &Recorder{w: w, prefix: prefix}
}

// lineBlock is the number of lines a block of a recorder holds.
const lineBlock = 4096

// add keeps l for the run's check.
func (r *Recorder) add(l history.Line) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.blocks); n == 0 || len(r.blocks[n-1]) == lineBlock {
		r.blocks = append(r.blocks, make([]history.Line, 0, lineBlock))
	}
	last := &r.blocks[len(r.blocks)-1]
	*last = append(*last, l)
}

// Stock records a product's stock at the time of the call: no purchase
// of it is in flight.
func (r *Recorder) Stock(product, stock int64) error {
	l := history.Line{Product: product, Stock: &stock, TimeNS: time.Now().UnixNano()}
	r.add(l)
	return r.w.Write(l)
}

// purchase records purchase i of quantity of product, sent at start and
// answered a (with body, the answer's, read only here) at end.
func (r *Recorder) purchase(i int, product, quantity int64, start, end time.Time, a answer, body []byte) {
	id := r.prefix + strconv.Itoa(i)
	l := history.Line{Product: product, UserID: id, RequestID: id, Quantity: quantity,
		StartNS: start.UnixNano(), EndNS: end.UnixNano(), Status: a.status, Code: a.errCode}
	switch {
	case a.status == http.StatusAccepted:
		// A reservation (reserve): what it left, and no order yet.
		if left, ok := reservationFigures(body); ok {
			l.RemainingStock = &left
		} else {
			l.Status, l.Code = 0, "" // an answer that does not parse says nothing
		}
	case a.status/100 == 2:
		if order, left, ok := orderFigures(body); ok {
			l.OrderID, l.RemainingStock = &order, &left
		} else {
			l.Status, l.Code = 0, ""
		}
	}
	r.add(l)
	// A write error stays in the writer: the run reports it at the end.
	_ = r.w.Write(l)
}

// cancel records the cancel of order id of product, of quantity units,
// sent at start and answered status (0: no answer) and code at end.
func (r *Recorder) cancel(product, id, quantity int64, start, end time.Time, status int, code string) {
	l := history.Line{Op: api.OpCancel, Product: product, OrderID: &id, Quantity: quantity,
		StartNS: start.UnixNano(), EndNS: end.UnixNano(), Status: status, Code: code}
	r.add(l)
	_ = r.w.Write(l) // a write error stays in the writer: the run reports it at the end
}

// orderFigures reads order_id and remaining_stock from an order's body:
// a scan for the two keys as the service writes them (workers are hot),
// else a full decode; false when either is missing.
func orderFigures(body []byte) (orderID, remaining int64, ok bool) {
	orderID, okID := intField(body, `"order_id":`)
	remaining, okLeft := intField(body, `"remaining_stock":`)
	if okID && okLeft {
		return orderID, remaining, true
	}
	var o struct {
		OrderID        *int64 `json:"order_id"`
		RemainingStock *int64 `json:"remaining_stock"`
	}
	if json.Unmarshal(body, &o) != nil || o.OrderID == nil || o.RemainingStock == nil {
		return 0, 0, false
	}
	return *o.OrderID, *o.RemainingStock, true
}

// reservationFigures reads remaining_stock from a reservation's body (a
// 202 under reserve): a scan for the key as the service writes it, else a
// full decode; false when it is missing.
func reservationFigures(body []byte) (remaining int64, ok bool) {
	if remaining, ok := intField(body, `"remaining_stock":`); ok {
		return remaining, true
	}
	var r struct {
		RemainingStock *int64 `json:"remaining_stock"`
	}
	if json.Unmarshal(body, &r) != nil || r.RemainingStock == nil {
		return 0, false
	}
	return *r.RemainingStock, true
}

// intField reads the integer after key (quoted, with its colon, no space)
// where key is a key of body's object (it follows '{' or ','); false when
// it is not found so.
func intField(body []byte, key string) (int64, bool) {
	i := bytes.Index(body, []byte(key))
	if i <= 0 || body[i-1] != '{' && body[i-1] != ',' {
		return 0, false
	}
	rest := body[i+len(key):]
	end := 0
	if end < len(rest) && rest[end] == '-' {
		end++
	}
	for end < len(rest) && '0' <= rest[end] && rest[end] <= '9' {
		end++
	}
	if end == len(rest) || rest[end] != ',' && rest[end] != '}' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return n, err == nil
}

// Verdict checks the run's history.
func (r *Recorder) Verdict() *report.HistoryVerdict {
	r.mu.Lock()
	lines := slices.Concat(r.blocks...)
	r.mu.Unlock()
	res, err := history.Check(lines)
	if err != nil {
		return &report.HistoryVerdict{Error: err.Error()}
	}
	return &report.HistoryVerdict{Checked: true, Linearizable: res.Linearizable, Violation: res.Violation,
		UndersoldAnswers: res.Undersold, Purchases: res.Purchases}
}
