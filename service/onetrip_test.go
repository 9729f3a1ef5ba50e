package service_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/store"
)

// written is what the database holds of a product: its stock and fence,
// its orders and the units each user holds.
type written struct {
	Stock, Fence, Orders int64
	Units                map[string]int64
}

func readWritten(t *testing.T, db *gorm.DB, id int64) written {
	t.Helper()
	var w written
	var p model.Product
	if err := db.Take(&p, id).Error; err != nil {
		t.Fatalf("read product %d: %v", id, err)
	}
	w.Stock, w.Fence = p.Stock, p.Fence
	if err := db.Model(&model.Order{}).Where("product_id = ?", id).Count(&w.Orders).Error; err != nil {
		t.Fatalf("count orders: %v", err)
	}
	var units []model.UserUnits
	if err := db.Where("product_id = ?", id).Find(&units).Error; err != nil {
		t.Fatalf("read user units: %v", err)
	}
	w.Units = map[string]int64{}
	for _, u := range units {
		w.Units[string(u.UserID)] = u.Units
	}
	return w
}

// TestOneTrip: a purchase the one multi-statement can sell commits with
// its order as the database wrote it (the stock it left, its ID); one it
// cannot (over the limit, a request ID used, sold out) rolls back and
// leaves nothing written, not even the fence moved, for the step-by-step
// transaction to answer.
func TestOneTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	in := f.instance(settings{PerUserLimit: 1, Fencing: true})
	ctx := context.Background()
	prod := in.product(t, 2)
	buy := func(user, rid string) (model.Order, bool) {
		t.Helper()
		p := service.Purchase{ProductID: prod.ID, UserID: user, Quantity: 1, RequestID: rid, Strategy: "redlock"}
		o, ok, err := in.svc.BuyOneTrip(ctx, p)
		if err != nil {
			t.Fatalf("BuyOneTrip(%s) = %v; want no error", show(p), err)
		}
		return o, ok
	}
	check := func(what string, want written) {
		t.Helper()
		got := readWritten(t, f.db, prod.ID)
		if got.Stock != want.Stock || got.Fence != want.Fence || got.Orders != want.Orders || len(got.Units) != len(want.Units) {
			t.Fatalf("after %s: %+v; want %+v", what, got, want)
		}
		for u, n := range want.Units {
			if got.Units[u] != n {
				t.Fatalf("after %s: units of %s = %d; want %d", what, u, got.Units[u], n)
			}
		}
	}
	start := readWritten(t, f.db, prod.ID)

	o, ok := buy("ann", "r-1")
	if !ok {
		t.Fatalf("ann's purchase rolled back; want it committed")
	}
	var stored model.Order
	if err := f.db.Take(&stored, o.ID).Error; err != nil {
		t.Fatalf("read order %d: %v", o.ID, err)
	}
	if o.RemainingStock != 1 || stored.RemainingStock != 1 || string(stored.UserID) != "ann" ||
		stored.RequestID == nil || string(*stored.RequestID) != "r-1" || stored.ProductID != prod.ID {
		t.Fatalf("ann's order = %+v, stored as %+v; want remaining stock 1, user ann, request r-1", o, stored)
	}
	after := written{Stock: 1, Fence: start.Fence + 1, Orders: 1, Units: map[string]int64{"ann": 1}}
	check("ann's purchase", after)

	if _, ok := buy("ann", "r-2"); ok {
		t.Fatalf("ann's second unit committed; want a rollback (limit 1)")
	}
	check("ann's second unit", after)
	if _, ok := buy("bob", "r-1"); ok {
		t.Fatalf("bob's purchase with ann's request ID committed; want a rollback")
	}
	check("bob's purchase with a used request ID", after)

	if _, ok := buy("bob", ""); !ok {
		t.Fatalf("bob's purchase rolled back; want it committed")
	}
	after = written{Stock: 0, Fence: start.Fence + 2, Orders: 2, Units: map[string]int64{"ann": 1, "bob": 1}}
	check("bob's purchase", after)
	if _, ok := buy("cat", "r-3"); ok {
		t.Fatalf("cat's purchase of a sold-out product committed; want a rollback")
	}
	check("cat's purchase when sold out", after)
	in.wantAudit(t, consistentAudit(prod.ID, 2, 2))
}

// TestOneTripNeedsMultiStatements: over a pool opened without
// multiStatements (a *gorm.DB a team opened itself), the service chooses
// the sale store's portable form at open: purchases still sell, statement
// by statement, and the one-trip path is not there.
func TestOneTripNeedsMultiStatements(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	cfg, err := mysql.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime, cfg.InterpolateParams, cfg.MultiStatements = true, true, false
	db, err := gorm.Open(gormmysql.Open(cfg.FormatDSN()), &gorm.Config{Logger: logger.Discard, TranslateError: true})
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	t.Cleanup(func() {
		if err := store.CloseSQL(db); err != nil {
			t.Errorf("close database: %v", err)
		}
	})
	if err := model.Migrate(context.Background(), db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	f.db = db
	in := f.instance(settings{PerUserLimit: 1, Fencing: true})
	if form := in.svc.SaleForm(); form != "portable" {
		t.Fatalf("the sale store's form over a pool without multiStatements = %s; want portable", form)
	}
	prod := in.product(t, 3)
	ctx := context.Background()
	for i, user := range []string{"ann", "bob"} {
		p := service.Purchase{ProductID: prod.ID, UserID: user, Quantity: 1, Strategy: "redlock"}
		r, err := in.svc.Purchase(ctx, p)
		if err != nil || r.Order.RemainingStock != int64(2-i) {
			t.Fatalf("Purchase(%s) = %+v, %v; want an order leaving %d", show(p), r, err, 2-i)
		}
	}
	before := readWritten(t, db, prod.ID)
	p := service.Purchase{ProductID: prod.ID, UserID: "cat", Quantity: 1, Strategy: "redlock"}
	if _, ok, err := in.svc.BuyOneTrip(ctx, p); ok || err != nil {
		t.Fatalf("BuyOneTrip(%s) = %v, %v; want nothing written (false, nil)", show(p), ok, err)
	}
	if got := readWritten(t, db, prod.ID); got.Stock != before.Stock || got.Orders != before.Orders || got.Fence != before.Fence {
		t.Fatalf("after the portable form's BuyOneTrip: %+v; want %+v", got, before)
	}
	in.wantAudit(t, consistentAudit(prod.ID, 3, 2))
}

// TestTripsShareACommit: one-trip purchases of different products that
// wait at the same moment are sent as one group, one COMMIT for all, each
// answered with its own order as the database wrote it. One among them
// that cannot go through (a sold-out product) rolls the group back and
// writes nothing; the others are sent again and commit. A request ID
// already used fails a statement in the middle of the group: then nobody's
// purchase is written, and each goes its own way.
func TestTripsShareACommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := &tripGate{}
	in := f.instance(settings{Fencing: true, Hooks: service.Hooks{TripGroup: g.hook}})
	ctx := context.Background()

	const n = 12
	var ps []service.Purchase
	for i := range n {
		ps = append(ps, service.Purchase{ProductID: in.product(t, 2).ID, UserID: fmt.Sprint("u", i), Quantity: 1,
			RequestID: fmt.Sprint("r-", i), Strategy: "redlock"})
	}
	empty := in.product(t, 0)
	ps = append(ps, service.Purchase{ProductID: empty.ID, UserID: "late", Quantity: 1, Strategy: "redlock"})
	got, groups := g.plugged(ctx, t, in, ps)
	wantSentTogether(t, groups)
	wantTripsCommitted(t, f.db, in, ps[:n], got[:n])
	if last := got[n]; last.ok || last.err != nil {
		t.Fatalf("BuyOneTrip of a sold-out product = %v, %v; want a rollback", last.ok, last.err)
	}
	if w := readWritten(t, f.db, empty.ID); w.Stock != 0 || w.Orders != 0 || w.Fence != 0 {
		t.Fatalf("the sold-out product after its group: %+v; want nothing written", w)
	}

	// The same products again, one of them with a request ID used above.
	for i := range ps[:n] {
		ps[i].RequestID = fmt.Sprint("again-", i)
	}
	ps[n] = service.Purchase{ProductID: ps[0].ProductID, UserID: "reuser", Quantity: 1, RequestID: "r-3", Strategy: "redlock"}
	before := make([]written, n)
	for i := range before {
		before[i] = readWritten(t, f.db, ps[i].ProductID)
	}
	got, groups = g.plugged(ctx, t, in, ps)
	wantSentTogether(t, groups)
	wantTripsAllOrNothing(t, f.db, ps[:n], got[:n], before)
	if got[n].ok {
		t.Fatalf("a purchase with a used request ID committed; want a rollback")
	}
}

// tripGate is TestTripsShareACommit's TripGroup hook: it records the size
// of every group a sender sends and, while its gate is set, holds the
// sender there.
type tripGate struct {
	mu      sync.Mutex
	sizes   []int
	gate    chan struct{} // while not nil, senders wait on it
	blocked int
}

// hook records a group's size and waits on the gate while there is one.
func (g *tripGate) hook(n int) {
	g.mu.Lock()
	g.sizes = append(g.sizes, n)
	gate := g.gate
	if gate != nil {
		g.blocked++
	}
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

// bought is what one BuyOneTrip returned.
type bought struct {
	o   model.Order
	ok  bool
	err error
}

// buyAll runs BuyOneTrip for each of ps at once and returns what each
// returned, in the order of ps.
func buyAll(ctx context.Context, in *instance, ps []service.Purchase) []bought {
	out := make([]bought, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { out[i].o, out[i].ok, out[i].err = in.svc.BuyOneTrip(ctx, p) })
	}
	wg.Wait()
	return out
}

// plugged runs ps while every sender is busy, so that they all wait at
// once and the senders gather them in as few groups as they can.
func (g *tripGate) plugged(ctx context.Context, t *testing.T, in *instance, ps []service.Purchase) ([]bought, []int) {
	t.Helper()
	g.mu.Lock()
	g.gate, g.blocked, g.sizes = make(chan struct{}), 0, nil
	g.mu.Unlock()
	plugs := make([]service.Purchase, service.TripSenders)
	for i := range plugs {
		plugs[i] = service.Purchase{ProductID: in.product(t, 1).ID, UserID: "plug", Quantity: 1, Strategy: "redlock"}
	}
	plugDone := make(chan []bought)
	go func() { plugDone <- buyAll(ctx, in, plugs) }()
	testenv.Eventually(t, 10*time.Second, "every sender busy", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.blocked == service.TripSenders
	})
	g.mu.Lock()
	gate := g.gate
	g.gate = nil
	g.mu.Unlock()
	done := make(chan []bought)
	go func() { done <- buyAll(ctx, in, ps) }()
	testenv.Eventually(t, 10*time.Second, "every purchase waiting for a sender", func() bool {
		return in.svc.TripsWaiting() == len(ps)
	})
	close(gate)
	for _, b := range <-plugDone {
		if !b.ok || b.err != nil {
			t.Fatalf("a purchase that kept a sender busy = %v, %v; want committed", b.ok, b.err)
		}
	}
	got := <-done
	g.mu.Lock()
	defer g.mu.Unlock()
	return got, append([]int(nil), g.sizes[service.TripSenders:]...)
}

// wantSentTogether checks that at least one group held more than one
// purchase.
func wantSentTogether(t *testing.T, groups []int) {
	t.Helper()
	if slices.Max(groups) < 2 {
		t.Fatalf("groups of %v purchases; want purchases waiting together sent together", groups)
	}
}

// wantTripsCommitted checks that each of ps committed (got) with its order
// as the database wrote it, one unit left of its product's two.
func wantTripsCommitted(t *testing.T, db *gorm.DB, in *instance, ps []service.Purchase, got []bought) {
	t.Helper()
	for i, b := range got {
		p := ps[i]
		if !b.ok || b.err != nil {
			t.Fatalf("BuyOneTrip(%s) = %v, %v; want committed", show(p), b.ok, b.err)
		}
		var stored model.Order
		if err := db.Take(&stored, b.o.ID).Error; err != nil {
			t.Fatalf("read order %d of %s: %v", b.o.ID, show(p), err)
		}
		if b.o.RemainingStock != 1 || stored.RemainingStock != 1 || stored.ProductID != p.ProductID || string(stored.UserID) != p.UserID {
			t.Fatalf("order of %s = %+v, stored as %+v; want its product and user, 1 left", show(p), b.o, stored)
		}
		in.wantAudit(t, consistentAudit(p.ProductID, 2, 1))
	}
}

// wantTripsAllOrNothing checks each of ps against what the database held
// before it (before): a purchase that committed sold its unit, with its
// order; one that did not (its group held the reused ID) wrote nothing.
func wantTripsAllOrNothing(t *testing.T, db *gorm.DB, ps []service.Purchase, got []bought, before []written) {
	t.Helper()
	for i := range before {
		w := readWritten(t, db, ps[i].ProductID)
		sold, orders := before[i].Stock-w.Stock, w.Orders-before[i].Orders
		if got[i].err != nil || (got[i].ok && (sold != 1 || orders != 1)) || (!got[i].ok && (sold != 0 || orders != 0)) {
			t.Fatalf("BuyOneTrip(%s) = %v, %v, then %d sold and %d orders; want its unit and order if committed, nothing if not",
				show(ps[i]), got[i].ok, got[i].err, sold, orders)
		}
	}
}
