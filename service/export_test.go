package service

import (
	"context"

	"github.com/seckill/seckill/model"
)

// Test hooks: what the tests of package service_test may see inside.

// Waiting returns how many purchases of product wait in this instance's
// lines (not yet taken into a hold).
func (s *Seckill) Waiting(product int64) int {
	s.lines.mu.Lock()
	defer s.lines.mu.Unlock()
	n := 0
	for key, l := range s.lines.m {
		if key.product == product {
			n += len(l.waiting)
		}
	}
	return n
}

// BuyOneTrip is the two-round-trip transaction of one purchase with the
// fence claim folded in (a lock holder's): ok says it committed, !ok with a
// nil error that it rolled back and wrote nothing.
func (s *Seckill) BuyOneTrip(ctx context.Context, p Purchase) (model.Order, bool, error) {
	return s.buyOneTrip(ctx, p, fenceWrite{claim: true})
}
