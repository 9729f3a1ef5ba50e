package load

import (
	"strings"
	"testing"
	"time"
)

// TestProgressShowsTheOversell: a strategy that sold 50 units of 25 has a
// stock of -25 on its progress line, as its audit will say, not 0.
func TestProgressShowsTheOversell(t *testing.T) {
	for _, tc := range []struct {
		created int64
		want    string
	}{
		{10, "; stock 15; end: after the sell-out"},
		{25, "; stock 0"},
		{50, "; stock -25 (oversold 25)"},
	} {
		p := &Plan{Purchase: true, Label: "none", Stock: 25, Quantity: 1, Requests: 100, Phases: []Phase{{}}}
		var counts live
		counts.counts[outCreated].Store(tc.created)
		counts.counts[outSoldOut].Store(3)
		_, line := p.status(2*time.Second, &counts, &pace{}, false)
		if !strings.Contains(line, tc.want) {
			t.Errorf("status after %d of 25 sold = %q; want it to contain %q", tc.created, line, tc.want)
		}
	}
}
