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
