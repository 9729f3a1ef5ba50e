package reserve

import "testing"

// TestRecord: a record reads back as it was written, pending or refused,
// whatever its user holds; a malformed one is an error.
func TestRecord(t *testing.T) {
	for _, r := range []Record{
		{Quantity: 2, Left: 8, User: "u|1"},
		{Quantity: 1, Left: 0, User: "a|b|c", Code: "limit_exceeded"},
		{Quantity: 100, Left: -3, User: "ü"},
	} {
		got, err := parseRecord(r.String())
		if err != nil || got != r {
			t.Errorf("parseRecord(%q) = %+v, %v; want %+v", r.String(), got, err, r)
		}
	}
	for _, bad := range []string{"", "x|1|2|u", "p|1|2", "p|one|2|u", "f|1|2||u", "f|1|2"} {
		if r, err := parseRecord(bad); err == nil {
			t.Errorf("parseRecord(%q) = %+v; want an error", bad, r)
		}
	}
}
