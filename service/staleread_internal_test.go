package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/stockcache"
)

// TestStaleSaleLowersNoNewVersion plays what a Galera Cluster allows and
// one server does not: a return of units on another node has announced a
// new version of the stock (Reopen) and not yet committed, and its row
// lock, only that node's, does not hold back a sale here, which reads the
// stock as it was before the return and sells nothing. That sale must not
// tell the cache "none left" in the new version: once the return commits,
// its units must be on sale, not answered sold_out until the next version.
// Both forms of the sale store.
func TestStaleSaleLowersNoNewVersion(t *testing.T) {
	for _, form := range []string{"mysql", "portable"} {
		t.Run(form, func(t *testing.T) {
			ctx := context.Background()
			s, _ := newOnMySQL(t, testenv.MySQL(t), Config{}, form == "portable")
			prod, err := s.CreateProduct(ctx, "stale read", 0)
			if err != nil {
				t.Fatalf("CreateProduct: %v", err)
			}
			v := stockcache.Of(prod)
			s.cache.Saw(prod.ID, 0, v)
			returned := stockcache.Version{Gen: v.Gen, Returns: v.Returns + 1}
			s.cache.Reopen(prod.ID, returned) // announced, not committed

			st, _ := LookupStrategy("pessimistic")
			p := Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "r-1", Strategy: st.Name}
			as, err := st.way.hold(s, ctx, st, hold{ps: []Purchase{p}, arrived: []time.Time{time.Now()}})
			if err != nil || len(as) != 1 || !(as[0].SoldOut || errors.Is(as[0].Err, failure.ErrSoldOut)) {
				t.Fatalf("hold = %+v, %v; want sold out from the stock read before the return", as, err)
			}
			s.cache.Saw(prod.ID, 2, returned) // the return commits: 2 units back
			if stock, out := s.cache.SoldOut(prod.ID, 1); out {
				t.Errorf("the cache answers sold out with %d left in the return's version; want the 2 units it returned on sale", stock)
			}
		})
	}
}
