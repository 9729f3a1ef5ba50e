package service_test

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// TestRedlockNodesDown runs redlock on three redis-server processes of the
// test's own: with one node down it still sells exactly its stock and is
// ready; with two down a purchase answers failure.ErrUnavailable (an outage, not
// contention: not failure.ErrLockTimeout) and writes nothing, and Ready names
// redis; once the nodes are back it sells again.
func TestRedlockNodesDown(t *testing.T) {
	t.Parallel()
	nodes, addrs := testenv.StartRedisNodes(t, 3)
	f := newFixture(t, addrs)
	in := f.instance(settings{Strategy: "redlock", Fencing: true, TTL: 3 * time.Second, Wait: time.Second})
	ctx := t.Context()
	if err := in.svc.Ready(ctx); err != nil {
		t.Fatalf("Ready() with every node up = %v; want nil", err)
	}

	nodes[2].Stop()
	t.Run("one down sells exactly its stock", func(t *testing.T) {
		// A wait of its own, long enough that no buyer times out.
		in := f.instance(settings{Strategy: "redlock", Fencing: true, TTL: 3 * time.Second})
		const stock, buyersN = 5, 20
		prod := in.product(t, stock)
		sold := 0
		for _, res := range purchaseAll(ctx, buyers(in.svc, prod.ID, "", buyersN, 0)) {
			switch {
			case res.err == nil:
				sold++
			case !errors.Is(res.err, failure.ErrSoldOut):
				t.Errorf("Purchase(%s) = %v; want nil or %v", show(res.p), res.err, failure.ErrSoldOut)
			}
		}
		if sold != stock {
			t.Errorf("%d of %d purchases succeeded; want %d", sold, buyersN, stock)
		}
		in.wantAudit(t, consistentAudit(prod.ID, stock, stock))
	})
	if err := in.svc.Ready(ctx); err != nil {
		t.Errorf("Ready() with one of three nodes down = %v; want nil", err)
	}

	nodes[1].Stop()
	prod := in.product(t, 3)
	p := service.Purchase{ProductID: prod.ID, UserID: "u-1", Quantity: 1}
	if _, err := in.svc.Purchase(ctx, p); !errors.Is(err, failure.ErrUnavailable) || errors.Is(err, failure.ErrLockTimeout) {
		t.Errorf("Purchase(%s) with two of three nodes down = %v; want %v", show(p), err, failure.ErrUnavailable)
	}
	in.wantAudit(t, consistentAudit(prod.ID, 3, 0))
	if got, err := in.svc.Product(ctx, prod.ID); err != nil || got.Fence != prod.Fence {
		t.Errorf("Product(%d) = fence %d, %v; want fence %d (no token claimed without the lock)", prod.ID, got.Fence, err, prod.Fence)
	}
	err := in.svc.Ready(ctx)
	var dep *service.DependencyError
	if !errors.As(err, &dep) || dep.Dependency != "redis" {
		t.Errorf("Ready() with two of three nodes down = %v; want a *service.DependencyError for redis", err)
	}

	nodes[1].Restart(t)
	nodes[2].Restart(t)
	if err := in.svc.Ready(ctx); err != nil {
		t.Errorf("Ready() with the nodes back = %v; want nil", err)
	}
	if _, err := in.svc.Purchase(ctx, p); err != nil {
		t.Errorf("Purchase(%s) with the nodes back = %v; want nil", show(p), err)
	}
	in.wantAudit(t, consistentAudit(prod.ID, 3, 1))
}
