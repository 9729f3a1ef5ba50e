package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// The reset races: what an instance learnt of one sale (a generation of the
// product's stock) must never count in the next. Each test forces its
// interleaving with a hook point in the code.

// buyOK buys one unit of product as user with request ID rid and fails t
// unless it is sold.
func buyOK(t *testing.T, svc *service.Seckill, product int64, user, rid string) service.Receipt {
	t.Helper()
	p := service.Purchase{ProductID: product, UserID: user, Quantity: 1, RequestID: rid}
	r, err := svc.Purchase(context.Background(), p)
	if err != nil {
		t.Fatalf("Purchase(%s) = %v; want an order", show(p), err)
	}
	return r
}

// TestReplayAfterSecondSellOut: a sold-out product's request IDs are read
// (for replays), then, before they are kept, the stock is reset and sold out
// again. What was read belongs to the first sale: a replay of the second
// sale's request ID must still answer with its order, not sold_out.
func TestReplayAfterSecondSellOut(t *testing.T) {
	f := newFixture(t, nil)
	var (
		in       *instance
		once     sync.Once
		second   service.Receipt
		hookErrs []error
	)
	in = f.instance(settings{Hooks: service.Hooks{OrdersRead: func(product int64) {
		once.Do(func() {
			// Between the read of the first sale's orders and keeping them.
			if _, err := in.svc.SetStock(context.Background(), product, 1); err != nil {
				hookErrs = append(hookErrs, err)
				return
			}
			p := service.Purchase{ProductID: product, UserID: "u-2", Quantity: 1, RequestID: "r-2"}
			r, err := in.svc.Purchase(context.Background(), p)
			if err != nil {
				hookErrs = append(hookErrs, err)
			}
			second = r
		})
	}}})
	prod := in.product(t, 1)
	buyOK(t, in.svc, prod.ID, "u-1", "r-1")

	// A new request of the sold-out product: its request ID is looked up
	// among the product's orders, which loads them (and runs the hook).
	late := service.Purchase{ProductID: prod.ID, UserID: "u-3", Quantity: 1, RequestID: "r-3"}
	if _, err := in.svc.Purchase(context.Background(), late); !errors.Is(err, failure.ErrSoldOut) {
		t.Fatalf("Purchase(%s) = %v; want %v", show(late), err, failure.ErrSoldOut)
	}
	if err := errors.Join(hookErrs...); err != nil {
		t.Fatalf("the reset and second sale inside the hook: %v", err)
	}
	if second.Order.ID == 0 {
		t.Fatal("the hook did not run: the sold-out answer did not load the product's orders")
	}

	replay := service.Purchase{ProductID: prod.ID, UserID: "u-2", Quantity: 1, RequestID: "r-2"}
	r, err := in.svc.Purchase(context.Background(), replay)
	if err != nil || !r.Replayed || r.Order.ID != second.Order.ID {
		t.Errorf("Purchase(%s) = %+v, %v; want the second sale's order %d, replayed", show(replay), r, err, second.Order.ID)
	}
}

// TestStaleResetAnnouncementIgnored: an announcement of an older reset that
// arrives after a newer one (reordered, or delayed on one node) must not
// mark the new sale sold out.
func TestStaleResetAnnouncementIgnored(t *testing.T) {
	f := newFixture(t, nil)
	heard := make(chan int64, 64)
	in := f.instance(settings{Hooks: service.Hooks{ResetHeard: func(_, gen int64) { heard <- gen }}})
	prod := in.product(t, 5)
	ctx := context.Background()
	// The instance listens on every node before anything is announced: a
	// message published before a subscription is lost, by Redis' design.
	for i, c := range f.clients {
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("the instance subscribed on node %d", i), func() bool {
			n, err := c.PubSubNumSub(ctx, f.prefix+"stock").Result()
			return err == nil && n[f.prefix+"stock"] >= 1
		})
	}
	if _, err := in.svc.SetStock(ctx, prod.ID, 0); err != nil {
		t.Fatalf("SetStock(0) = %v", err)
	}
	newer, err := in.svc.SetStock(ctx, prod.ID, 3)
	if err != nil {
		t.Fatalf("SetStock(3) = %v", err)
	}
	if newer.Generation != prod.Generation+2 {
		t.Fatalf("generation after two resets = %d; want %d", newer.Generation, prod.Generation+2)
	}
	// The first reset's announcement, again, after the second: on node 0,
	// behind both real ones.
	stale := service.ResetMessage(prod.ID, 0, prod.Generation+1)
	if err := f.clients[0].Publish(ctx, f.prefix+"stock", stale).Err(); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	// Two resets on each node, then the stale copy.
	want := 2*len(f.clients) + 1
	deadline := time.After(10 * time.Second)
	for range want {
		select {
		case <-heard:
		case <-deadline:
			t.Fatalf("fewer than %d reset announcements heard in 10s", want)
		}
	}
	r := buyOK(t, in.svc, prod.ID, "u-1", "r-1")
	if r.Order.RemainingStock != 2 {
		t.Errorf("remaining stock = %d; want 2", r.Order.RemainingStock)
	}
}

// TestWriteReportedAfterReset: a purchase that sells the last unit commits,
// then, before it tells the memory the stock it left (0), the stock is
// reset. Its report belongs to the old sale and must not mark the new one
// sold out.
func TestWriteReportedAfterReset(t *testing.T) {
	f := newFixture(t, nil)
	var (
		in      *instance
		once    sync.Once
		hookErr error
	)
	in = f.instance(settings{Hooks: service.Hooks{Committed: func(product int64) {
		once.Do(func() { _, hookErr = in.svc.SetStock(context.Background(), product, 5) })
	}}})
	prod := in.product(t, 1)
	buyOK(t, in.svc, prod.ID, "u-1", "r-1")
	if hookErr != nil {
		t.Fatalf("SetStock in the hook: %v", hookErr)
	}
	r := buyOK(t, in.svc, prod.ID, "u-2", "r-2")
	if r.Order.RemainingStock != 4 {
		t.Errorf("remaining stock = %d; want 4", r.Order.RemainingStock)
	}
}

// TestRefreshReopensWithoutAnnouncement: a reset whose announcement never
// arrives (written straight into the database, as by another instance
// whose message was lost) reopens a product this instance remembers sold
// out, once the refresher reads it again.
func TestRefreshReopensWithoutAnnouncement(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	in := f.instance(settings{Strategy: "optimistic"})
	prod := in.product(t, 1)
	n := 0
	buy := func() error {
		n++
		_, err := in.svc.Purchase(t.Context(), service.Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-%d", n), Quantity: 1})
		return err
	}
	if err := buy(); err != nil {
		t.Fatalf("the first purchase = %v; want nil", err)
	}
	if err := buy(); !errors.Is(err, failure.ErrSoldOut) {
		t.Fatalf("the second purchase = %v; want %v", err, failure.ErrSoldOut)
	}
	err := f.db.Transaction(func(tx *gorm.DB) error {
		for _, q := range []string{
			"UPDATE products SET stock = 3, initial_stock = 3, generation = generation + 1, fence = fence + 1 WHERE id = ?",
			"DELETE FROM orders WHERE product_id = ?",
			"DELETE FROM user_units WHERE product_id = ?",
		} {
			if err := tx.Exec(q, prod.ID).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reset product %d in the database: %v", prod.ID, err)
	}
	testenv.Eventually(t, 10*time.Second, "a purchase after the reset to go through", func() bool { return buy() == nil })
	in.wantAudit(t, consistentAudit(prod.ID, 3, 1))
}
