package service_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/store"
)

// TestReserveOnCluster: reserve on a real Redis Cluster (three masters,
// each with a replica): two instances sell three products whose keys are
// in three buckets, so in slots of different masters; every unit is
// reserved once, every reservation written once by the writers reading
// every bucket's stream, and a cancel gives its unit back to the counter.
func TestReserveOnCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.StartRedisCluster(t, 3, 1)
	rdb := store.OpenReserveRedis(cl.Addrs(), true)
	t.Cleanup(func() {
		if err := rdb.Close(); err != nil {
			t.Errorf("close the cluster client: %v", err)
		}
	})
	f := newFixture(t, nil)
	var ins []*instance
	for _, name := range []string{"a", "b"} {
		s := reserveSettings(name, false)
		s.ReserveRedis, s.PaymentTimeout = rdb, time.Minute
		ins = append(ins, f.instance(s))
	}
	const stock, buyers = 20, 50
	var products []int64
	var ps []service.Purchase
	for range 3 {
		p := ins[0].product(t, stock)
		products = append(products, p.ID)
		for i := range buyers {
			ps = append(ps, service.Purchase{ProductID: p.ID, UserID: fmt.Sprint("u-", i), Quantity: 1, RequestID: fmt.Sprintf("r-%d-%d", p.ID, i)})
		}
	}
	rs, errs := buyAcross(ins, ps)
	reserved := map[int64]int{}
	for i, r := range rs {
		switch {
		case errs[i] == nil && r.Reservation != nil:
			reserved[ps[i].ProductID]++
		case errors.Is(errs[i], service.ErrSoldOut):
		default:
			t.Errorf("Purchase(%s) = %+v, %v; want a reservation or sold_out", show(ps[i]), r, errs[i])
		}
	}
	for _, id := range products {
		if reserved[id] != stock {
			t.Errorf("product %d: %d reservations; want %d", id, reserved[id], stock)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	var n int64
	for n < 3*stock && time.Now().Before(deadline) {
		if err := f.db.Model(&model.Order{}).Where("product_id IN ?", products).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range products {
		ins[1].wantAudit(t, consistentAudit(id, stock, stock))
	}
	first := 0 // a purchase of products[0] that was reserved
	for rs[first].Reservation == nil {
		first++
	}
	a, err := ins[1].svc.PurchaseOf(t.Context(), ps[first].RequestID)
	if err != nil || a.Order == nil {
		t.Fatalf("PurchaseOf(%s) = %+v, %v; want its order", ps[first].RequestID, a, err)
	}
	if _, err := ins[0].svc.Cancel(t.Context(), a.Order.ID, string(a.Order.UserID)); err != nil {
		t.Fatalf("Cancel(%d) = %v", a.Order.ID, err)
	}
	snap, err := reserve.New(rdb, f.prefix).Check(t.Context(), products[0], 0, nil)
	if err != nil || snap.Stock != 1 {
		t.Errorf("the counter on the cluster after a cancel = %+v, %v; want 1", snap, err)
	}
}
