package driver

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/loadtest/history"
)

// recorder keeps the history of a run (-history): every purchase as it is
// answered, written to the history file at once and kept for the run's own
// check.
type recorder struct {
	w       *history.Writer
	product int64
	prefix  string // of the request and user IDs: prefix + index
	mu      sync.Mutex
	lines   []history.Line
}

// stock records the product's stock at the time of the call: no purchase
// of it is in flight.
func (r *recorder) stock(stock int64) error {
	l := history.Line{Product: r.product, Stock: &stock, TimeNS: time.Now().UnixNano()}
	r.mu.Lock()
	r.lines = append(r.lines, l)
	r.mu.Unlock()
	return r.w.Write(l)
}

// purchase records purchase i of quantity, sent at start and answered a
// (with body, the answer's, read only here) at end.
func (r *recorder) purchase(i int, quantity int64, start, end time.Time, a answer, body []byte) {
	id := r.prefix + strconv.Itoa(i)
	l := history.Line{Product: r.product, UserID: id, RequestID: id, Quantity: quantity,
		StartNS: start.UnixNano(), EndNS: end.UnixNano(), Status: a.status, Code: a.errCode}
	if a.status/100 == 2 {
		var o struct {
			OrderID        int64 `json:"order_id"`
			RemainingStock int64 `json:"remaining_stock"`
		}
		if json.NewDecoder(bytes.NewReader(body)).Decode(&o) == nil {
			l.OrderID, l.RemainingStock = &o.OrderID, &o.RemainingStock
		} else {
			l.Status, l.Code = 0, "" // an answer that does not parse says nothing
		}
	}
	r.mu.Lock()
	r.lines = append(r.lines, l)
	r.mu.Unlock()
	// A write error stays in the writer: the run reports it at the end.
	_ = r.w.Write(l)
}

// HistoryVerdict is the check of a run's history (-history).
type HistoryVerdict struct {
	// Checked says the check could decide; Error says why not.
	Checked bool   `json:"checked"`
	Error   string `json:"error,omitempty"`
	// Linearizable: every answer fits one stock counter (package history).
	Linearizable bool `json:"linearizable"`
	// Violation is the first one, for a person.
	Violation string `json:"violation,omitempty"`
	// UndersoldAnswers counts the sold_out answers given while stock surely
	// remained.
	UndersoldAnswers int `json:"undersold_answers"`
	Purchases        int `json:"purchases"`
}

// verdict checks the run's history.
func (r *recorder) verdict() *HistoryVerdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, err := history.Check(r.lines)
	if err != nil {
		return &HistoryVerdict{Error: err.Error()}
	}
	return &HistoryVerdict{Checked: true, Linearizable: res.Linearizable, Violation: res.Violation,
		UndersoldAnswers: res.Undersold, Purchases: res.Purchases}
}
