package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/sqlproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// Every answer is true: a purchase whose COMMIT was sent and whose reply
// was lost (forced through a proxy between the service and MariaDB) is
// answered with its order, or outcome_unknown when the look-up cannot be
// made either; never unavailable for an order that was committed.

// proxied is a fixture whose database is reached through a fault proxy.
func proxied(t *testing.T) (*fixture, *sqlproxy.Proxy) {
	t.Helper()
	proxy, dsn := testenv.Proxy(t, testenv.MySQL(t))
	return newFixtureDSN(t, nil, dsn), proxy
}

// waitHeld waits until n COMMIT replies in all have been held.
func waitHeld(t *testing.T, proxy *sqlproxy.Proxy, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d COMMIT replies held", n), func() bool {
		return proxy.CommitRepliesHeld() >= n
	})
}

// TestLostCommitReply: the COMMIT of each path reaches the database and
// commits, and its reply is lost (held, then the connection cut). Each
// buyer must be answered with the order the database holds.
func TestLostCommitReply(t *testing.T) {
	f, proxy := proxied(t)
	in := f.instance(settings{DBTimeout: time.Second})
	prod := in.product(t, 100)
	ctx := context.Background()

	type answer struct {
		p   service.Purchase
		r   service.Receipt
		err error
	}
	buy := func(p service.Purchase, out chan<- answer) {
		r, err := in.svc.Purchase(ctx, p)
		out <- answer{p, r, err}
	}
	proxy.HoldCommitReplies()

	// 1. Step by step: a hold with work claims its fence at the grant and
	// writes in a transaction of several statements.
	first := make(chan answer, 1)
	go buy(service.Purchase{ProductID: prod.ID, UserID: "u-a", Quantity: 1, RequestID: "r-a", Work: 50 * time.Millisecond}, first)
	waitHeld(t, proxy, 1)
	// 2. The batch: buyers who queue behind that hold are sold together.
	batch := make(chan answer, 7)
	for i := range 7 {
		go buy(service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-b%d", i), Quantity: 1, RequestID: fmt.Sprintf("r-b%d", i)}, batch)
	}
	testenv.Eventually(t, 10*time.Second, "7 buyers in line", func() bool { return in.svc.Waiting(prod.ID) == 7 })
	proxy.DropHeldAndCut()
	waitHeld(t, proxy, 2) // the batch's COMMIT
	proxy.DropHeldAndCut()
	// 3. One trip: a hold of one purchase without work.
	last := make(chan answer, 1)
	var got []answer
	got = append(got, <-first)
	for range 7 {
		got = append(got, <-batch)
	}
	go buy(service.Purchase{ProductID: prod.ID, UserID: "u-c", Quantity: 1, RequestID: "r-c"}, last)
	waitHeld(t, proxy, 3)
	proxy.DropHeldAndCut()
	got = append(got, <-last)
	proxy.Pass()

	for _, a := range got {
		if a.err != nil {
			t.Errorf("Purchase(%s) = %v; want its order: its COMMIT took", show(a.p), a.err)
			continue
		}
		var o model.Order
		if err := f.db.Where("request_id = ?", a.p.RequestID).Take(&o).Error; err != nil || o.ID != a.r.Order.ID {
			t.Errorf("Purchase(%s) answered order %d; the database has %+v, %v", show(a.p), a.r.Order.ID, o, err)
		}
	}
	in.wantAudit(t, consistentAudit(prod.ID, 100, 9))
}

// TestOutcomeUnknown: a COMMIT reply is lost and the database then answers
// nothing, so the look-up cannot be made: the buyer is told
// outcome_unknown, and a replay of its request ID, once the database
// answers again, returns the order that was committed.
func TestOutcomeUnknown(t *testing.T) {
	f, proxy := proxied(t)
	in := f.instance(settings{DBTimeout: 500 * time.Millisecond})
	prod := in.product(t, 10)
	ctx := context.Background()
	proxy.HoldCommitReplies()
	p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1, RequestID: "r-1"}
	done := make(chan error, 1)
	go func() {
		_, err := in.svc.Purchase(ctx, p)
		done <- err
	}()
	waitHeld(t, proxy, 1)
	proxy.HoldReplies()
	proxy.DropHeldAndCut()
	err := <-done
	if !errors.Is(err, failure.ErrOutcomeUnknown) {
		t.Fatalf("Purchase(%s) = %v; want %v", show(p), err, failure.ErrOutcomeUnknown)
	}
	proxy.Pass()
	r, err := in.svc.Purchase(ctx, p)
	if err != nil || !r.Replayed || r.Order.RequestID == nil || string(*r.Order.RequestID) != "r-1" {
		t.Fatalf("replay Purchase(%s) = %+v, %v; want the committed order, replayed", show(p), r, err)
	}
	in.wantAudit(t, consistentAudit(prod.ID, 10, 1))
	if n := in.counter(t, "redlock", "outcome_unknown"); n != 1 {
		t.Errorf("seckill_purchases_total{outcome=outcome_unknown} = %v; want 1", n)
	}
}

// TestOutageIsNotALockTimeout: a buyer whose wait runs out while the line's
// leader reads an unknown product from a database that does not answer
// waited on the database, not on another holder: unavailable, never
// lock_timeout (which says only that others kept the lock).
func TestOutageIsNotALockTimeout(t *testing.T) {
	f, proxy := proxied(t)
	prod := f.instance(settings{}).product(t, 10)
	// Another instance: its stock cache has not seen the product.
	in := f.instance(settings{Wait: 200 * time.Millisecond, DBTimeout: 2 * time.Second})
	proxy.Partition()
	defer proxy.Heal()
	p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1}
	if _, err := in.svc.Purchase(context.Background(), p); failure.CodeOf(err) != failure.CodeUnavailable {
		t.Fatalf("Purchase(%s) with the database cut off = %v; want %s", show(p), err, failure.CodeUnavailable)
	}
}
