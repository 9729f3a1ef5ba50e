package driver

import "testing"

// TestCountsAgree: the orders an audit gained agree with the answers when
// they are the orders made, plus any number of those answered
// outcome_unknown (each may or may not have made one); never fewer, never
// more, and the units follow the orders.
func TestCountsAgree(t *testing.T) {
	for _, c := range []struct {
		orders, units, made, unknown, quantity int64
		want                                   bool
	}{
		{10, 10, 10, 0, 1, true},
		{11, 11, 10, 0, 1, false}, // an order nobody was told of
		{9, 9, 10, 0, 1, false},   // a 201 without its order
		{13, 13, 10, 3, 1, true},  // every unknown made one
		{10, 10, 10, 3, 1, true},  // none did
		{14, 14, 10, 3, 1, false}, // more than could have been made
		{9, 9, 10, 3, 1, false},   // unknowns do not excuse a missing order
		{10, 20, 10, 0, 2, true},
		{10, 19, 10, 0, 2, false},
	} {
		if got := countsAgree(c.orders, c.units, c.made, c.unknown, c.quantity); got != c.want {
			t.Errorf("countsAgree(orders %d, units %d, made %d, unknown %d, quantity %d) = %v; want %v",
				c.orders, c.units, c.made, c.unknown, c.quantity, got, c.want)
		}
	}
}
