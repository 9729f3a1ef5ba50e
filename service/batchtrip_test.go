package service_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
)

// TestBatchInThreeTrips: a fenced hold on MySQL sells its batch in three
// round trips, and each purchase gets the answer it would have got one by
// one (the reference), with the order as the database wrote it: its ID,
// user, quantity and the stock it left. One hold moves the fence on once,
// and the users' units are what they bought. A later batch in which a
// request ID was used by an order already written is sold in three trips
// too (its replay answered from the order read in the first), with the
// same answers as one by one.
func TestBatchInThreeTrips(t *testing.T) {
	t.Parallel()
	const stock, limit = 20, 2
	var mu sync.Mutex
	inTrips := 0
	in := newFixture(t, nil).instance(settings{PerUserLimit: limit, Fencing: true, Hooks: service.Hooks{
		BatchTrips: func(int64) { mu.Lock(); inTrips++; mu.Unlock() },
	}})
	trips := func() int { mu.Lock(); defer mu.Unlock(); return inTrips }
	prod := in.product(t, stock)
	first := batchPurchases(prod.ID)
	p := func(user string, q int64, rid string) service.Purchase {
		return service.Purchase{ProductID: prod.ID, UserID: user, Quantity: q, RequestID: rid}
	}
	second := []service.Purchase{p("v1", 1, "r-x"), p("u1", 1, "r-a"), p("v2", 2, "r-y"), p("u4", 2, "r-c")}
	want := expected(stock, limit, append(append([]service.Purchase{}, first...), second...))
	made := map[int64]bool{}
	before := readWritten(t, in.db, prod.ID)
	got, receipts := sellInLine(t, in, first, made)
	wantAnswers(t, first, got, want[:len(first)])
	if n := trips(); n != 1 {
		t.Fatalf("the first batch: %d holds sold in three trips; want 1", n)
	}
	after := readWritten(t, in.db, prod.ID)
	if after.Fence != before.Fence+1 {
		t.Errorf("fence %d after one hold from %d; want %d", after.Fence, before.Fence, before.Fence+1)
	}
	wantOrdersWritten(t, in, first, got, receipts)
	got, receipts = sellInLine(t, in, second, made)
	wantAnswers(t, second, got, want[len(first):])
	if n := trips(); n != 2 {
		t.Errorf("the second batch, replaying an order written before: %d holds sold in three trips in all; want 2", n)
	}
	wantOrdersWritten(t, in, second, got, receipts)
	units := map[string]int64{}
	sold := int64(0)
	for i, ps := range append(append([]service.Purchase{}, first...), second...) {
		if strings.HasPrefix(want[i], "ok ") {
			units[ps.UserID] += ps.Quantity
			sold += ps.Quantity
		}
	}
	end := readWritten(t, in.db, prod.ID)
	for user, n := range units {
		if end.Units[user] != n {
			t.Errorf("user %s holds %d units; want %d", user, end.Units[user], n)
		}
	}
	if end.Stock != stock-sold {
		t.Errorf("stock %d; want %d", end.Stock, stock-sold)
	}
}

// sellInLine sells ps, gathered in line behind the product's lock, in one
// hold of in (redlock), and returns their answers and receipts.
func sellInLine(t *testing.T, in *instance, ps []service.Purchase, made map[int64]bool) ([]string, []service.Receipt) {
	t.Helper()
	attempts := make([]attempt, len(ps))
	for i, p := range ps {
		attempts[i] = attempt{svc: in.svc, p: p}
	}
	release := blockLine(t, in, "redlock", ps[0].ProductID)
	wait := enqueueReceipts(t, in.db, attempts, "redlock", made)
	release()
	return wait()
}

// wantAnswers fails t where a purchase's answer is not the reference's.
func wantAnswers(t *testing.T, ps []service.Purchase, got, want []string) {
	t.Helper()
	for i := range ps {
		if got[i] != want[i] {
			t.Errorf("Purchase(%s) = %s; one by one: %s", show(ps[i]), got[i], want[i])
		}
	}
}

// wantOrdersWritten fails t unless every new order a purchase was answered
// with is in the database as the answer says.
func wantOrdersWritten(t *testing.T, in *instance, ps []service.Purchase, got []string, receipts []service.Receipt) {
	t.Helper()
	for i, r := range receipts {
		if !strings.HasPrefix(got[i], "ok ") {
			continue
		}
		var o model.Order
		if err := in.db.Take(&o, r.Order.ID).Error; err != nil {
			t.Errorf("Purchase(%s) answered order %d: %v", show(ps[i]), r.Order.ID, err)
			continue
		}
		rid := ""
		if o.RequestID != nil {
			rid = string(*o.RequestID)
		}
		if string(o.UserID) != ps[i].UserID || o.Quantity != ps[i].Quantity || o.RemainingStock != r.Order.RemainingStock ||
			(ps[i].RequestID != "" && rid != ps[i].RequestID) {
			t.Errorf("Purchase(%s) answered %+v; the database has %+v", show(ps[i]), r.Order, o)
		}
	}
}
