package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// HistoryLine is one line of a history, as the driver's -history writes it
// and -check reads it (any client may write one): a stock line (Stock set:
// the product's stock at TimeNS, with no purchase of it in flight), a
// purchase, or a return (Op OpCancel: a buyer's cancel of an order). Its
// JSON is one of the three shapes the contract gives.
type HistoryLine struct {
	// Op is "" for a stock line or a purchase (which may say
	// OpPurchase), OpCancel for a cancel.
	Op      string
	Product int64
	// Stock and TimeNS make a stock line.
	Stock  *int64
	TimeNS int64
	// A purchase: who asked for how many, when it was sent and when its
	// answer was read (nanoseconds since the Unix epoch), the status (0:
	// no answer came) and the error code; RemainingStock on 200, 201 and
	// 202 (a reservation under reserve: its units taken, its order written
	// later), OrderID on 200 and 201 only. A cancel has its order's
	// OrderID and Quantity, its times, status and code.
	UserID         string
	RequestID      string
	Quantity       int64
	StartNS, EndNS int64
	Status         int
	Code           string
	RemainingStock *int64
	OrderID        *int64
}

// The ops of a history line.
const (
	OpPurchase = "purchase"
	OpCancel   = "cancel"
)

// historyStock, historyPurchase and historyCancel are the three shapes of
// a line.
type historyStock struct {
	Product int64 `json:"product"`
	Stock   int64 `json:"stock"`
	TimeNS  int64 `json:"time_ns"`
}

type historyCancel struct {
	Op       string `json:"op"`
	Product  int64  `json:"product"`
	OrderID  int64  `json:"order_id"`
	Quantity int64  `json:"quantity"`
	StartNS  int64  `json:"start_ns"`
	EndNS    int64  `json:"end_ns"`
	Status   int    `json:"status"`
	Code     string `json:"code"`
}

type historyPurchase struct {
	Op             string `json:"op,omitempty"`
	Product        int64  `json:"product"`
	UserID         string `json:"user_id"`
	RequestID      string `json:"request_id"`
	Quantity       int64  `json:"quantity"`
	StartNS        int64  `json:"start_ns"`
	EndNS          int64  `json:"end_ns"`
	Status         int    `json:"status"`
	Code           string `json:"code"`
	RemainingStock *int64 `json:"remaining_stock,omitempty"`
	OrderID        *int64 `json:"order_id,omitempty"`
}

// MarshalJSON writes the line in the contract's shape.
func (l HistoryLine) MarshalJSON() ([]byte, error) { return l.AppendJSON(nil), nil }

// UnmarshalJSON reads any of the shapes: a line with a "stock" key is a
// stock line, one whose "op" is "cancel" a cancel, any other a purchase
// ("op" absent or "purchase"). An unknown key or op is an error.
func (l *HistoryLine) UnmarshalJSON(data []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return err
	}
	if _, ok := keys["stock"]; ok {
		var s historyStock
		if err := strictUnmarshal(data, &s); err != nil {
			return err
		}
		*l = HistoryLine{Product: s.Product, Stock: &s.Stock, TimeNS: s.TimeNS}
		return nil
	}
	if op, ok := keys["op"]; ok && string(bytes.TrimSpace(op)) == `"`+OpCancel+`"` {
		var c historyCancel
		if err := strictUnmarshal(data, &c); err != nil {
			return err
		}
		*l = HistoryLine{Op: OpCancel, Product: c.Product, OrderID: &c.OrderID, Quantity: c.Quantity,
			StartNS: c.StartNS, EndNS: c.EndNS, Status: c.Status, Code: c.Code}
		return nil
	}
	var p historyPurchase
	if err := strictUnmarshal(data, &p); err != nil {
		return err
	}
	if p.Op != "" && p.Op != OpPurchase {
		return fmt.Errorf("op %q is neither purchase nor cancel", p.Op)
	}
	*l = HistoryLine{Product: p.Product, UserID: p.UserID, RequestID: p.RequestID, Quantity: p.Quantity,
		StartNS: p.StartNS, EndNS: p.EndNS, Status: p.Status, Code: p.Code,
		RemainingStock: p.RemainingStock, OrderID: p.OrderID}
	return nil
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Cancel says the line is a cancel.
func (l HistoryLine) Cancel() bool { return l.Op == OpCancel }

// Succeeded says the purchase took its units: 200, 201, or 202 (a
// reservation under reserve, whose order is written later); of a cancel,
// that it was answered 200 (its order is cancelled: its units came back,
// unless an earlier cancel of the order returned them).
func (l HistoryLine) Succeeded() bool { return l.Status == 200 || l.Status == 201 || l.Status == 202 }

// Ordered says the answer carried an order: 200 or 201 (a 202 carries a
// reservation, without an order ID).
func (l HistoryLine) Ordered() bool { return l.Status == 200 || l.Status == 201 }

// Indeterminate says the purchase may or may not have taken its units: no
// answer, outcome_unknown, or a 5xx without a code.
func (l HistoryLine) Indeterminate() bool {
	return l.Status == 0 || l.Code == "outcome_unknown" || (l.Status >= 500 && l.Code == "")
}

// SoldOut says the purchase was answered sold_out.
func (l HistoryLine) SoldOut() bool { return l.Status == 409 && l.Code == "sold_out" }

// AppendJSON appends the line in the contract's shape, key for key as
// encoding/json writes it, without reflection: the driver's workers write
// one line per answer.
func (l HistoryLine) AppendJSON(b []byte) []byte {
	if l.Cancel() {
		b = append(b, `{"op":"cancel","product":`...)
		b = strconv.AppendInt(b, l.Product, 10)
		b = append(b, `,"order_id":`...)
		if l.OrderID != nil {
			b = strconv.AppendInt(b, *l.OrderID, 10)
		} else {
			b = append(b, '0')
		}
		return append(l.appendAnswer(b), '}')
	}
	b = append(b, `{"product":`...)
	b = strconv.AppendInt(b, l.Product, 10)
	if l.Stock != nil {
		b = append(b, `,"stock":`...)
		b = strconv.AppendInt(b, *l.Stock, 10)
		b = append(b, `,"time_ns":`...)
		b = strconv.AppendInt(b, l.TimeNS, 10)
		return append(b, '}')
	}
	b = append(b, `,"user_id":`...)
	b = appendString(b, l.UserID)
	b = append(b, `,"request_id":`...)
	b = appendString(b, l.RequestID)
	b = l.appendAnswer(b)
	if l.RemainingStock != nil {
		b = append(b, `,"remaining_stock":`...)
		b = strconv.AppendInt(b, *l.RemainingStock, 10)
	}
	if l.OrderID != nil {
		b = append(b, `,"order_id":`...)
		b = strconv.AppendInt(b, *l.OrderID, 10)
	}
	return append(b, '}')
}

// appendAnswer appends what a purchase and a cancel share: the quantity,
// the times and the answer.
func (l HistoryLine) appendAnswer(b []byte) []byte {
	b = append(b, `,"quantity":`...)
	b = strconv.AppendInt(b, l.Quantity, 10)
	b = append(b, `,"start_ns":`...)
	b = strconv.AppendInt(b, l.StartNS, 10)
	b = append(b, `,"end_ns":`...)
	b = strconv.AppendInt(b, l.EndNS, 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(l.Status), 10)
	b = append(b, `,"code":`...)
	return appendString(b, l.Code)
}

// appendString appends s as a JSON string: as it is when it is printable
// ASCII that needs no escape, else as encoding/json escapes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
