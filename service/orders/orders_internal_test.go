package orders

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/model"
)

// TestSleepEndsWithItsContext: a wait of an order's life (a cancel's
// fallback on the refreshers) ends when its caller's context does, not
// when its time is up (issue 47, bug 6): an hour's wait on a context that
// has ended returns at once, and the test would hang otherwise.
func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sleep(ctx, time.Hour)
}

// TestDue: an order is due when it is unpaid and its expiry has come, and
// only then.
func TestDue(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Second)
	for _, tc := range []struct {
		o    model.Order
		want bool
	}{
		{model.Order{Status: model.StatusUnpaid, ExpiresAt: &past}, true},
		{model.Order{Status: model.StatusUnpaid, ExpiresAt: &now}, true},
		{model.Order{Status: model.StatusUnpaid, ExpiresAt: &future}, false},
		{model.Order{Status: model.StatusUnpaid}, false},
		{model.Order{Status: model.StatusPaid, ExpiresAt: &past}, false},
		{model.Order{Status: model.StatusCancelled, ExpiresAt: &past}, false},
	} {
		if got := due(tc.o, now); got != tc.want {
			t.Errorf("due(%s, expires %v) = %v; want %v", tc.o.Status, tc.o.ExpiresAt, got, tc.want)
		}
	}
}
