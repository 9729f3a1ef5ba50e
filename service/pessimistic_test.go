package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
)

// TestPessimisticBatchKeepsEachDeadline: under batching, pessimistic's wait
// for the product's row lock is each purchase's own. Buyers A and B queue
// (1.2 s apart) behind a purchase that waits on a row lock held outside;
// when it gives up, A and B are sold in one hold, whose row lock comes
// after A's wait ran out but well within B's: A answers lock_timeout, B
// gets its order.
func TestPessimisticBatchKeepsEachDeadline(t *testing.T) {
	const wait = 2 * time.Second
	f := newFixture(t, nil)
	in := f.instance(settings{Strategy: "pessimistic", Wait: wait})
	prod := in.product(t, 10)
	tx := f.db.Begin()
	if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&model.Product{}, prod.ID).Error; err != nil {
		t.Fatalf("lock the row: %v", err)
	}
	defer tx.Rollback()

	buy := func(user string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := in.svc.Purchase(context.Background(), service.Purchase{ProductID: prod.ID, UserID: user, Quantity: 1})
			done <- err
		}()
		return done
	}
	x := buy("x") // the hold that gives up
	testenv.Eventually(t, 10*time.Second, "x's hold waiting on the row", func() bool {
		select {
		case err := <-x:
			t.Fatalf("x's Purchase = %v before the test saw it wait on the row (for %v at most)", err, wait)
		default:
		}
		return lockingReads(t, f.db) == 1
	})
	// The sleeps below are the scenario, each from a point the test saw:
	// A comes 300 ms after x began to wait, so that A is still in line
	// when x gives up; B 1.2 s after A.
	time.Sleep(300 * time.Millisecond)
	aSent := time.Now()
	a := buy("a")
	time.Sleep(1200 * time.Millisecond)
	b := buy("b")
	testenv.Eventually(t, 10*time.Second, "a and b in line", func() bool { return in.svc.Waiting(prod.ID) == 2 || len(x) == 1 })
	// Past A's wait (it began no earlier than aSent), 0.9 s before B's ends.
	time.Sleep(time.Until(aSent.Add(wait + 300*time.Millisecond)))
	if err := tx.Rollback().Error; err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]chan error{"x": x, "a": a} {
		if err := <-c; !errors.Is(err, service.ErrLockTimeout) {
			t.Errorf("%s's Purchase = %v; want %v", name, err, service.ErrLockTimeout)
		}
	}
	if err := <-b; err != nil {
		t.Errorf("b's Purchase = %v; want an order: its own wait had time left", err)
	}
	in.wantAudit(t, consistentAudit(prod.ID, 10, 1))
}
