package history

import "testing"

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
