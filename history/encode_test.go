package history

import (
	"encoding/json"
	"testing"
)

// stockJSON and purchaseJSON are the contract's two shapes of a line, as
// encoding/json writes them.
type stockJSON struct {
	Product int64 `json:"product"`
	Stock   int64 `json:"stock"`
	TimeNS  int64 `json:"time_ns"`
}

type purchaseJSON struct {
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

// TestAppendJSON: the hand-written encoding is encoding/json's, byte for
// byte, for both shapes and for strings that need escapes.
func TestAppendJSON(t *testing.T) {
	stock, left, id := int64(500), int64(0), int64(7)
	for _, s := range []string{"", "u-7", "Req-aB", `a"b\c`, "<&>", "tab\there", "\x00\x1f", "😀 é",
		"\xff invalid", "\u2028"} {
		for _, l := range []Line{
			{Product: 1, UserID: s, RequestID: s, Quantity: 2, StartNS: -5, EndNS: 1 << 62, Status: 201,
				RemainingStock: &left, OrderID: &id},
			{Product: 3, UserID: "u", RequestID: "", Quantity: 1, StartNS: 1, EndNS: 2, Code: s, Status: 503},
		} {
			want, err := json.Marshal(purchaseJSON{Product: l.Product, UserID: l.UserID, RequestID: l.RequestID,
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
	want, _ := json.Marshal(stockJSON{Product: 1, Stock: 500, TimeNS: 9})
	if got := (Line{Product: 1, Stock: &stock, TimeNS: 9}).AppendJSON(nil); string(got) != string(want) {
		t.Errorf("AppendJSON(a stock line) = %s; want %s", got, want)
	}
}

// BenchmarkWrite writes purchase lines as the driver's workers do.
func BenchmarkWrite(b *testing.B) {
	w := NewWriter(discard{})
	left, id := int64(4242), int64(123456)
	l := Line{Product: 1, UserID: "lt0123abcd-0-4711", RequestID: "lt0123abcd-0-4711", Quantity: 1,
		StartNS: 1764000000000000000, EndNS: 1764000000012345678, Status: 201, RemainingStock: &left, OrderID: &id}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(l); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
