package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// TestLockKindsDoNotBlockEachOther: a setnx holder that died mid-hold
// leaves its key without expiry, by the classic recipe. token and redlock
// keep keys of their own and sell the product all the same, within a
// short wait; their writes stay exact through the shared fence.
func TestLockKindsDoNotBlockEachOther(t *testing.T) {
	f := newFixture(t, nil)
	in := f.instance(settings{Strategy: "setnx", Fencing: true, Wait: 2 * time.Second})
	prod := in.product(t, 10)
	// The setnx holder that died: its lock taken and never given back.
	if _, err := in.lockers["setnx"].Lock(context.Background(), in.lockKey("setnx", prod.ID)); err != nil {
		t.Fatalf("setnx Lock = %v", err)
	}
	for i, strategy := range []string{"token", "redlock"} {
		p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprint("u-", i), Quantity: 1, Strategy: strategy}
		if _, err := in.svc.Purchase(context.Background(), p); err != nil {
			t.Errorf("Purchase(%s) with a dead setnx holder = %v; want an order", show(p), err)
		}
	}
	p := service.Purchase{ProductID: prod.ID, UserID: "u-setnx", Quantity: 1, Strategy: "setnx"}
	if _, err := in.svc.Purchase(context.Background(), p); !errors.Is(err, failure.ErrLockTimeout) {
		t.Errorf("Purchase(%s) = %v; want %v: setnx itself still waits on its dead holder", show(p), err, failure.ErrLockTimeout)
	}
	in.wantAudit(t, consistentAudit(prod.ID, 10, 2))
}
