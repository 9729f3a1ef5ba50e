package history

import (
	"encoding/json"
	"strconv"
)

// appendJSON appends the line in the contract's shape, key for key as
// encoding/json writes stockJSON and purchaseJSON, without reflection: the
// driver's workers write one line per answer.
func (l Line) appendJSON(b []byte) []byte {
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
	b = append(b, `,"quantity":`...)
	b = strconv.AppendInt(b, l.Quantity, 10)
	b = append(b, `,"start_ns":`...)
	b = strconv.AppendInt(b, l.StartNS, 10)
	b = append(b, `,"end_ns":`...)
	b = strconv.AppendInt(b, l.EndNS, 10)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(l.Status), 10)
	b = append(b, `,"code":`...)
	b = appendString(b, l.Code)
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
