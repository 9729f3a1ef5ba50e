package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/reserve"
	"gorm.io/gorm"
)

// returns is how many orders' units an instance put back, by reason.
func (in *instance) returns(t testing.TB, reason string) float64 {
	t.Helper()
	return in.metrics(t).Sum("seckill_order_returns_total", "reason", reason)
}

// sell makes n purchases of one unit of product through in, each by a user
// of its own (prefix-i), and returns their orders.
func sell(t *testing.T, in *instance, product int64, prefix string, n int) []model.Order {
	t.Helper()
	orders := make([]model.Order, n)
	for i := range orders {
		r, err := in.svc.Purchase(context.Background(), service.Purchase{ProductID: product,
			UserID: fmt.Sprintf("%s-%d", prefix, i), Quantity: 1})
		if err != nil {
			t.Fatalf("purchase %d of product %d: %v", i, product, err)
		}
		orders[i] = r.Order
	}
	return orders
}

// TestConcurrentCancels: every order cancelled eight times at once, on two
// instances, gives its unit back once; every cancel answers the cancelled
// order.
func TestConcurrentCancels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	s := settings{PerUserLimit: 1, PaymentTimeout: time.Minute}
	a, b := f.instance(s), f.instance(s)
	p := a.product(t, 10)
	orders := sell(t, a, p.ID, "u", 6)
	var wg sync.WaitGroup
	errs := make(chan error, len(orders)*8)
	for _, o := range orders {
		for i := range 8 {
			in := a
			if i%2 == 1 {
				in = b
			}
			wg.Go(func() {
				got, err := in.svc.Cancel(context.Background(), o.ID, string(o.UserID))
				if err == nil && got.Status != model.StatusCancelled {
					err = fmt.Errorf("order %d is %s", o.ID, got.Status)
				}
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Cancel = %v; want the order, cancelled", err)
		}
	}
	want := service.Audit{ProductID: p.ID, InitialStock: 10, Stock: 10, Orders: 6, UnitsReturned: 6, Consistent: true}
	a.wantAudit(t, want)
	if got := a.returns(t, "cancel") + b.returns(t, "cancel"); got != 6 {
		t.Errorf("seckill_order_returns_total{reason=cancel} on both instances = %v; want 6", got)
	}
}

// TestPaymentRacesItsEnd: a payment racing a cancel, and one racing the
// expiry on two instances: exactly one of them wins each order, and the
// stock is what the paid orders left.
func TestPaymentRacesItsEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const timeout = 400 * time.Millisecond
	s := settings{PaymentTimeout: timeout}
	a, b := f.instance(s), f.instance(s)
	ctx := context.Background()

	t.Run("cancel", func(t *testing.T) {
		p := a.product(t, 20)
		orders := sell(t, a, p.ID, "c", 20)
		var wg sync.WaitGroup
		payErrs, cancelErrs := make([]error, len(orders)), make([]error, len(orders))
		for i, o := range orders {
			wg.Go(func() { _, payErrs[i] = a.svc.Pay(ctx, o.ID, string(o.UserID)) })
			wg.Go(func() { _, cancelErrs[i] = b.svc.Cancel(ctx, o.ID, string(o.UserID)) })
		}
		wg.Wait()
		var paid int64
		for i := range orders {
			switch {
			case payErrs[i] == nil && failure.CodeOf(cancelErrs[i]) == failure.CodeOrderPaid:
				paid++
			case cancelErrs[i] == nil && failure.CodeOf(payErrs[i]) == failure.CodeOrderClosed:
			default:
				t.Errorf("order %d: Pay = %v, Cancel = %v; want exactly one to win", orders[i].ID, payErrs[i], cancelErrs[i])
			}
		}
		a.wantAudit(t, service.Audit{ProductID: p.ID, InitialStock: 20, Stock: 20 - paid, Orders: 20,
			UnitsSold: paid, UnitsReturned: 20 - paid, Consistent: true})
	})

	t.Run("expiry", func(t *testing.T) {
		p := a.product(t, 20)
		orders := sell(t, a, p.ID, "e", 20)
		// Pay them around their expiry, some just before, some just
		// after, while both instances sweep.
		var wg sync.WaitGroup
		payErrs := make([]error, len(orders))
		for i, o := range orders {
			wg.Go(func() {
				time.Sleep(time.Until(o.ExpiresAt.Add(time.Duration(i-len(orders)/2) * 3 * time.Millisecond)))
				_, payErrs[i] = b.svc.Pay(ctx, o.ID, string(o.UserID))
			})
		}
		wg.Wait()
		var paid int64
		for i, o := range orders {
			got, err := a.svc.Order(ctx, o.ID, "", true)
			switch {
			case err != nil:
				t.Fatalf("Order(%d) = %v", o.ID, err)
			case payErrs[i] == nil && got.Status == model.StatusPaid:
				paid++
			case failure.CodeOf(payErrs[i]) == failure.CodeOrderClosed && got.Status == model.StatusExpired:
			default:
				t.Errorf("order %d: Pay = %v, and it is %s; want paid, or expired and order_closed", o.ID, payErrs[i], got.Status)
			}
		}
		t.Logf("%d of %d orders paid before their expiry", paid, len(orders))
		a.wantAudit(t, service.Audit{ProductID: p.ID, InitialStock: 20, Stock: 20 - paid, Orders: 20,
			UnitsSold: paid, UnitsReturned: 20 - paid, Consistent: true})
	})
}

// TestExpirySharedByThree: three instances sweep the same due orders of
// three products; every order expires once, and every unit is back.
func TestExpirySharedByThree(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	s := settings{PerUserLimit: 1, PaymentTimeout: 300 * time.Millisecond}
	ins := []*instance{f.instance(s), f.instance(s), f.instance(s)}
	var products []model.Product
	for i := range 3 {
		p := ins[i].product(t, 40)
		products = append(products, p)
		sell(t, ins[i], p.ID, "x", 40)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, p := range products {
		for ins[0].audit(t, p.ID).UnitsReturned < 40 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		ins[0].wantAudit(t, service.Audit{ProductID: p.ID, InitialStock: 40, Stock: 40, Orders: 40, UnitsReturned: 40, Consistent: true})
	}
	var expired float64
	for _, in := range ins {
		expired += in.returns(t, "expiry")
	}
	if expired != 120 {
		t.Errorf("seckill_order_returns_total{reason=expiry} on three instances = %v; want 120", expired)
	}
	// Their buyers may buy again: the per-user limit counts live orders.
	if r, err := ins[1].svc.Purchase(context.Background(), service.Purchase{ProductID: products[0].ID, UserID: "x-0", Quantity: 1}); err != nil {
		t.Errorf("a buyer whose order expired buys again = %+v, %v; want an order", r, err)
	}
}

// TestCancelsDuringSale: buyers cancel while a sale runs on two instances,
// under a lock and under the row lock: nothing is oversold, no unit is
// lost or counted twice, the per-user limit holds among live orders, and
// units cancelled after the product sold out sell again on both
// instances.
func TestCancelsDuringSale(t *testing.T) {
	eachStrategy(t, []string{"redlock", "pessimistic"}, func(t *testing.T, strategy string) {
		f := newFixture(t, nil)
		s := settings{Strategy: strategy, PerUserLimit: 1, PaymentTimeout: time.Minute, Fencing: true}
		a, b := f.instance(s), f.instance(s)
		const stock, buyers = 30, 120
		p := a.product(t, stock)
		ctx := context.Background()
		sold := make(chan model.Order, buyers)
		var wg sync.WaitGroup
		for i := range buyers {
			in := a
			if i%2 == 1 {
				in = b
			}
			wg.Go(func() {
				// Each buyer buys twice: a cancelled order frees its limit.
				for range 2 {
					r, err := in.svc.Purchase(ctx, service.Purchase{ProductID: p.ID, UserID: fmt.Sprintf("b-%d", i), Quantity: 1})
					if err == nil {
						sold <- r.Order
					} else if !errors.Is(err, failure.ErrSoldOut) && !errors.Is(err, failure.ErrLimitExceeded) {
						t.Errorf("purchase: %v", err)
					}
				}
			})
		}
		var cancelled int64
		cancels := make(chan struct{})
		go func() {
			defer close(cancels)
			n := 0
			for o := range sold {
				if n++; n%3 != 0 {
					continue
				}
				in := a
				if n%2 == 0 {
					in = b
				}
				if _, err := in.svc.Cancel(ctx, o.ID, string(o.UserID)); err != nil {
					t.Errorf("Cancel(%d) = %v", o.ID, err)
					continue
				}
				cancelled++
			}
		}()
		wg.Wait()
		close(sold)
		<-cancels
		au := a.audit(t, p.ID)
		if !au.Consistent || au.OversoldUnits != 0 || au.UnitsReturned != cancelled || au.UnitsSold+au.UnitsReturned != au.Orders {
			t.Errorf("audit = %+v after %d cancels; want consistent, every cancelled unit returned once", au, cancelled)
		}
		var live []model.Order
		if err := f.db.Where("product_id = ? AND status IN ?", p.ID, []string{model.StatusUnpaid, model.StatusPaid}).Find(&live).Error; err != nil {
			t.Fatal(err)
		}
		users := map[string]bool{}
		for _, o := range live {
			if users[string(o.UserID)] {
				t.Errorf("user %s holds two live orders past the limit of 1", o.UserID)
			}
			users[string(o.UserID)] = true
		}
		// What the last cancels gave back sells out.
		for i := 0; ; i++ {
			r, err := a.svc.Purchase(ctx, service.Purchase{ProductID: p.ID, UserID: fmt.Sprintf("rest-%d", i), Quantity: 1})
			if errors.Is(err, failure.ErrSoldOut) {
				break
			}
			if err != nil || i > stock {
				t.Fatalf("selling the rest: %+v, %v", r, err)
			}
			live = append(live, r.Order)
		}
		// Sold out on both: once a cancel is answered, the other instance
		// sells its unit (it heard of the return before the answer).
		if _, err := b.svc.Purchase(ctx, service.Purchase{ProductID: p.ID, UserID: "late", Quantity: 1}); !errors.Is(err, failure.ErrSoldOut) {
			t.Fatalf("a purchase before the cancel = %v; want sold_out", err)
		}
		o := live[0]
		if _, err := a.svc.Cancel(ctx, o.ID, string(o.UserID)); err != nil {
			t.Fatalf("Cancel(%d) = %v", o.ID, err)
		}
		if _, err := b.svc.Purchase(ctx, service.Purchase{ProductID: p.ID, UserID: "late", Quantity: 1}); err != nil {
			t.Errorf("a purchase of the returned unit on the other instance, after the cancel's answer = %v; want an order", err)
		}
		if au := a.audit(t, p.ID); !au.Consistent {
			t.Errorf("final audit = %+v; want consistent", au)
		}
	})
}

// TestReserveReturns: under reserve, a cancel puts the units back in the
// counter in Redis and the buyer's count there, once; an instance that
// dies between the database's COMMIT and Redis (a hook stops it there)
// loses nothing: another instance's sweep finishes the return from the
// outbox, once, and a reconcile meanwhile does not count its units twice,
// nor does a counter Redis lost and the database derived again; unpaid
// reserve orders expire and give their units back too.
func TestReserveReturns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	s := reserveSettings("a", false)
	s.PaymentTimeout = time.Minute
	crashed := s
	crashed.Consumer, crashed.NoWriter = "", true
	crashed.Hooks = service.Hooks{Returned: func(int64) bool { return true }}
	a, dying := f.instance(s), f.instance(crashed)
	store := reserve.New(f.clients[0], f.prefix)
	prod := a.product(t, 4)
	buy := func(in *instance, user string) {
		t.Helper()
		p := service.Purchase{ProductID: prod.ID, UserID: user, Quantity: 1, RequestID: "r-" + user + fmt.Sprint(time.Now().UnixNano())}
		if r, err := in.svc.Purchase(ctx, p); err != nil || r.Reservation == nil {
			t.Fatalf("Purchase(%s) = %+v, %v; want a reservation", show(p), r, err)
		}
	}
	// snapshot is the counter, and the units the counter must hold: the
	// database's stock less the reservations still waiting.
	counter := func() (got, want int64) {
		t.Helper()
		snap, err := store.Check(ctx, prod.ID, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var waiting int64
		for _, q := range snap.Waiting {
			waiting += q
		}
		return snap.Stock, a.audit(t, prod.ID).Stock - waiting
	}
	orderOf := func(user string) model.Order {
		t.Helper()
		var o model.Order
		if err := f.db.Where("product_id = ? AND user_id = ? AND status = ?", prod.ID, user, model.StatusUnpaid).Take(&o).Error; err != nil {
			t.Fatalf("the unpaid order of %s: %v", user, err)
		}
		return o
	}
	for _, u := range []string{"u-1", "u-2", "u-3", "u-4"} {
		buy(a, u)
	}
	waitOrders(t, f, prod.ID, 4)
	if o := orderOf("u-1"); o.ExpiresAt == nil || o.Strategy != "reserve" {
		t.Fatalf("a reserve order = %+v; want unpaid with its expiry", o)
	}

	// A cancel: the unit is back in the counter, and u-1 may buy again.
	if _, err := a.svc.Cancel(ctx, orderOf("u-1").ID, "u-1"); err != nil {
		t.Fatalf("Cancel = %v", err)
	}
	if got, want := counter(); got != 1 || want != 1 {
		t.Errorf("the counter after a cancel = %d (it must be %d); want 1", got, want)
	}
	buy(a, "u-1")
	waitOrders(t, f, prod.ID, 5)

	// A crash between the stores: the database has the unit, Redis not yet.
	if _, err := dying.svc.Cancel(ctx, orderOf("u-2").ID, "u-2"); err != nil {
		t.Fatalf("Cancel on the dying instance = %v", err)
	}
	if got, want := counter(); got != 0 || want != 1 {
		t.Errorf("the counter right after the crash = %d (the database says %d); want 0, the return on its way", got, want)
	}
	// A reconcile meanwhile leaves it: the outbox says the unit is coming.
	if delta, _, err := a.svc.Reconcile(ctx, prod.ID); err != nil || delta != 0 {
		t.Errorf("Reconcile with a return on its way = moved %d, %v; want 0", delta, err)
	}
	// The sweep of the living instance finishes it, once.
	deadline := time.Now().Add(15 * time.Second)
	for got, _ := counter(); got != 1 && time.Now().Before(deadline); got, _ = counter() {
		time.Sleep(100 * time.Millisecond)
	}
	if got, want := counter(); got != 1 || want != 1 {
		t.Errorf("the counter once the sweep finished the return = %d (it must be %d); want 1", got, want)
	}
	var left int64
	if err := f.db.Model(&model.ReserveReturn{}).Where("product_id = ?", prod.ID).Count(&left).Error; err != nil || left != 0 {
		t.Errorf("returns left on the outbox = %d, %v; want none", left, err)
	}
	buy(a, "u-2")
	waitOrders(t, f, prod.ID, 6)

	// A crash again, and then Redis loses the counter: derived again from
	// the database, which has the unit, it is not given twice.
	if _, err := dying.svc.Cancel(ctx, orderOf("u-3").ID, "u-3"); err != nil {
		t.Fatalf("Cancel on the dying instance = %v", err)
	}
	if err := f.clients[0].Del(ctx, store.KeysOf(prod.ID).Counter).Err(); err != nil {
		t.Fatal(err)
	}
	buy(a, "u-3") // loads the counter under the row lock: 1 left, taken now
	waitOrders(t, f, prod.ID, 7)
	time.Sleep(3 * time.Second) // past the outbox's grace: the sweep has been by
	if got, want := counter(); got != 0 || want != 0 {
		t.Errorf("the counter after the loss and the sweep = %d (it must be %d); want 0", got, want)
	}
	if _, err := a.svc.Purchase(ctx, service.Purchase{ProductID: prod.ID, UserID: "late", Quantity: 1}); !errors.Is(err, failure.ErrSoldOut) {
		t.Errorf("a purchase of a sold-out product = %v; want sold_out", err)
	}
	au := a.audit(t, prod.ID)
	if !au.Consistent || au.UnitsReturned != 3 || au.UnitsSold != 4 || au.Stock != 0 {
		t.Errorf("audit = %+v; want consistent, 4 sold, 3 returned, none left", au)
	}
}

// TestReserveExpiry: unpaid reserve orders expire and their units go back
// to the counter in Redis.
func TestReserveExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t, nil)
	s := reserveSettings("a", false)
	s.PaymentTimeout = 300 * time.Millisecond
	a := f.instance(s)
	store := reserve.New(f.clients[0], f.prefix)
	prod := a.product(t, 3)
	for i := range 3 {
		p := service.Purchase{ProductID: prod.ID, UserID: fmt.Sprint("u-", i), Quantity: 1}
		if r, err := a.svc.Purchase(ctx, p); err != nil || r.Reservation == nil {
			t.Fatalf("Purchase(%s) = %+v, %v; want a reservation", show(p), r, err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for a.audit(t, prod.ID).UnitsReturned < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if au := a.audit(t, prod.ID); !au.Consistent || au.UnitsReturned != 3 || au.Stock != 3 {
		t.Fatalf("audit = %+v; want 3 units returned, 3 in stock", au)
	}
	// The counter gets the units right after each return's COMMIT.
	var snap reserve.Snapshot
	testenv.Until(10*time.Second, func() bool {
		var err error
		snap, err = store.Check(ctx, prod.ID, 0, nil)
		return err == nil && snap.Stock == 3
	})
	if snap.Stock != 3 {
		t.Errorf("the counter after the expiries = %+v; want 3", snap)
	}
	var r service.Receipt
	var err error
	testenv.Until(5*time.Second, func() bool {
		r, err = a.svc.Purchase(ctx, service.Purchase{ProductID: prod.ID, UserID: "u-0", Quantity: 1})
		return err == nil
	})
	if err != nil || r.Reservation == nil {
		t.Errorf("the buyer of an expired order buys again = %+v, %v; want a reservation", r, err)
	}
}

// TestCancelAnnouncesOutsideTheRowLock: while a cancel waits for the
// instances to hear that its units come back, the product's row is free,
// so a sale of the product does not wait behind the cancel's Redis calls.
// A listener on the channel that never answers holds the cancel in that
// wait for as long as it lets it.
func TestCancelAnnouncesOutsideTheRowLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	in := f.instance(settings{PaymentTimeout: time.Minute})
	p := in.product(t, 5)
	o := sell(t, in, p.ID, "u", 1)[0]

	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	mute := f.clients[0].Subscribe(ctx, f.prefix+"stock")
	defer mute.Close()
	if _, err := mute.Receive(ctx); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := in.svc.Cancel(ctx, o.ID, string(o.UserID))
		done <- err
	}()
	msg, err := mute.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("the cancel's announcement: %v", err)
	}
	// The cancel waits on this listener now: the row must be free.
	err = in.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return tx.Exec("SELECT id FROM products WHERE id = ? FOR UPDATE NOWAIT", p.ID).Error
	})
	if err != nil {
		t.Errorf("lock product %d while its cancel announces %q: %v; want its row free", p.ID, msg.Payload, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	in.wantAudit(t, service.Audit{ProductID: p.ID, InitialStock: 5, Stock: 5, Orders: 1, UnitsReturned: 1, Consistent: true})
}
