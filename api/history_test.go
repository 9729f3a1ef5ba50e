package api

import (
	"encoding/json"
	"testing"
)

// TestAppendJSON: the hand-written encoding is encoding/json's of the two
// shapes UnmarshalJSON reads, byte for byte, for strings that need escapes
// too.
func TestAppendJSON(t *testing.T) {
	stock, left, id := int64(500), int64(0), int64(7)
	for _, s := range []string{"", "u-7", "Req-aB", `a"b\c`, "<&>", "tab\there", "\x00\x1f", "😀 é",
		"\xff invalid", "\u2028"} {
		for _, l := range []HistoryLine{
			{Product: 1, UserID: s, RequestID: s, Quantity: 2, StartNS: -5, EndNS: 1 << 62, Status: 201,
				RemainingStock: &left, OrderID: &id},
			{Product: 3, UserID: "u", RequestID: "", Quantity: 1, StartNS: 1, EndNS: 2, Code: s, Status: 503},
		} {
			want, err := json.Marshal(historyPurchase{Product: l.Product, UserID: l.UserID, RequestID: l.RequestID,
				Quantity: l.Quantity, StartNS: l.StartNS, EndNS: l.EndNS, Status: l.Status, Code: l.Code,
				RemainingStock: l.RemainingStock, OrderID: l.OrderID})
			if err != nil {
				t.Fatal(err)
			}
			if got := l.AppendJSON(nil); string(got) != string(want) {
				t.Errorf("AppendJSON(%q) = %s; want %s", s, got, want)
			}
		}
	}
	want, _ := json.Marshal(historyStock{Product: 1, Stock: 500, TimeNS: 9})
	if got := (HistoryLine{Product: 1, Stock: &stock, TimeNS: 9}).AppendJSON(nil); string(got) != string(want) {
		t.Errorf("AppendJSON(a stock line) = %s; want %s", got, want)
	}
}

// TestCancelLine: a cancel line is written in the contract's shape,
// encoding/json's byte for byte, and reads back as itself; a purchase may
// say "op": "purchase"; any other op is refused.
func TestCancelLine(t *testing.T) {
	id := int64(7)
	l := HistoryLine{Op: OpCancel, Product: 1, OrderID: &id, Quantity: 2, StartNS: 10, EndNS: 20, Status: 409, Code: "order_paid"}
	want, err := json.Marshal(historyCancel{Op: OpCancel, Product: 1, OrderID: 7, Quantity: 2, StartNS: 10, EndNS: 20, Status: 409, Code: "order_paid"})
	if err != nil {
		t.Fatal(err)
	}
	got := l.AppendJSON(nil)
	if string(got) != string(want) {
		t.Errorf("AppendJSON(a cancel) = %s; want %s", got, want)
	}
	var back HistoryLine
	if err := json.Unmarshal(got, &back); err != nil || !back.Cancel() || back.OrderID == nil || *back.OrderID != 7 ||
		back.Quantity != 2 || back.Status != 409 || back.Code != "order_paid" || back.EndNS != 20 {
		t.Errorf("a cancel line reads back as %+v, %v; want %+v", back, err, l)
	}
	var p HistoryLine
	if err := json.Unmarshal([]byte(`{"op":"purchase","product":1,"user_id":"u","request_id":"r","quantity":1,"start_ns":1,"end_ns":2,"status":409,"code":"sold_out"}`), &p); err != nil || p.Cancel() || p.UserID != "u" {
		t.Errorf("a purchase line with op purchase reads as %+v, %v; want the purchase", p, err)
	}
	for _, bad := range []string{
		`{"op":"refund","product":1,"user_id":"u","request_id":"r","quantity":1,"start_ns":1,"end_ns":2,"status":200,"code":""}`,
		`{"op":"cancel","product":1,"order_id":7,"quantity":1,"start_ns":1,"end_ns":2,"status":200,"code":"","user_id":"u"}`,
	} {
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("Unmarshal(%s) = nil error; want one", bad)
		}
	}
}
