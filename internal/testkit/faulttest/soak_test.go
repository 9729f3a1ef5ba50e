package faulttest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/history"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/sqlproxy"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service/reserve"
)

// The fault soak (make soak): buyers write a history against two instances
// on real processes while a schedule drawn from a seed breaks things, then
// the history is checked for linearizability and against the orders table.
// It runs only when SOAK_DURATION is set; SOAK_SEED replays a schedule.

// Soak settings.
const (
	soakBuyers    = 48
	soakInstances = 2
	// soakHot is the stock of the product most buyers want: it sells out
	// within seconds, so that most of the soak answers sold_out around it.
	soakHot = 400
)

// soakStocks are the stocks of the products on sale: one sells out at
// once, one within the soak, one never.
func soakStocks() []int64 { return []int64{soakHot, 20_000, 1_000_000} }

// TestSoak is the fault soak. See the comment above.
func TestSoak(t *testing.T) {
	dur := os.Getenv("SOAK_DURATION")
	if dur == "" {
		t.Skip("the fault soak runs with SOAK_DURATION set (make soak)")
	}
	length, err := time.ParseDuration(dur)
	if err != nil || length <= 0 {
		t.Fatalf("SOAK_DURATION=%q: want a positive Go duration such as 2m", dur)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SOAK_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED=%q: want an unsigned integer", s)
		}
	}
	t.Logf("soak: SOAK_SEED=%d SOAK_DURATION=%v (the same seed replays the same schedule)", seed, length)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))

	s := newSoak(t)
	sched := schedule(rng, length, len(s.nodes))
	for _, f := range sched {
		t.Logf("soak: at %6.2fs %s", f.at.Seconds(), f)
	}
	s.run(length, sched, rng.Uint64())
	s.verdict()
}

// soak is the world of one soak: the database behind its proxy, the Redis
// nodes, the instances and the history.
type soak struct {
	t     *testing.T
	db    *testenv.MariaDB
	proxy *sqlproxy.Proxy
	// direct is the database's DSN, not through the proxy.
	direct   string
	nodes    []*testenv.Redis
	products []int64
	// reserveNode is the Redis of reserve (appendfsync always), and
	// reserved the product sold under reserve alone.
	reserveNode *testenv.Redis
	reserved    int64
	// An order's life, on two instances of their own (never killed or
	// stopped): cancelling sells the product cancels, whose buyers cancel
	// half their orders at once (its orders wait an hour for their
	// payment, so that none expires: the history holds every return);
	// expiring sells the product expires, whose orders nobody pays and
	// which expire after soakExpiry, their units sold again (its lines are
	// kept apart, in expiryHist: expiries are not in a history).
	cancelling, expiring *apptest.Program
	cancels, expires     int64
	expiryHist           []history.Line

	mu        sync.Mutex
	instances []*apptest.Program // by slot; a killed one is replaced
	hist      []history.Line
}

func newSoak(t *testing.T) *soak {
	db := testenv.StartMariaDB(t)
	proxy, via := testenv.Proxy(t, db.DSN)
	s := &soak{t: t, db: db, proxy: proxy, direct: testenv.DatabaseDSN(t, db.DSN, "seckill"),
		reserveNode: testenv.StartRedisAOF(t)}
	// The buyers' orders are paid at once (no payment timeout): nothing
	// comes back behind the history's back.
	first := start(t, map[string]string{"SECKILL_MYSQL_DSN": testenv.DatabaseDSN(t, via, "seckill"),
		"SECKILL_RESERVE_REDIS": s.reserveNode.Addr, "SECKILL_PAYMENT_TIMEOUT": "0"})
	s.instances = append(s.instances, first)
	for len(s.instances) < soakInstances {
		s.instances = append(s.instances, first.Another(t))
	}
	// Their reserve writers write on a Redis of their own: the reserve
	// product's orders are written by the buyers' instances alone, paid.
	own := first.Nodes[0].Addr
	s.cancelling = first.AnotherWith(t, map[string]string{"SECKILL_PAYMENT_TIMEOUT": "1h", "SECKILL_RESERVE_REDIS": own})
	s.expiring = first.AnotherWith(t, map[string]string{"SECKILL_PAYMENT_TIMEOUT": soakExpiry.String(), "SECKILL_RESERVE_REDIS": own})
	s.nodes = first.Nodes
	for _, stock := range append(soakStocks(), soakReserved, soakLifeStock) {
		id := first.Create(t, testenv.RandomName("soak-"), stock)
		s.products = append(s.products, id)
		s.hist = append(s.hist, history.Line{Product: id, Stock: &stock, TimeNS: time.Now().UnixNano()})
	}
	n := len(s.products)
	s.products, s.reserved, s.cancels = s.products[:n-2], s.products[n-2], s.products[n-1]
	s.expires = first.Create(t, testenv.RandomName("soak-"), soakLifeStock)
	return s
}

// soakReserved is the stock of the product sold under reserve: it sells
// out within the soak.
const soakReserved = 3000

// An order's life in the soak: the stock of each of its two products, its
// buyers (each on both), and the payment timeout of the product whose
// orders expire.
const (
	soakLifeStock  = 100
	soakLifeBuyers = 4
	soakExpiry     = 2 * time.Second
)

// allProducts are the soak's products, the one under reserve last.
func (s *soak) allProducts() []int64 { return append(slices.Clone(s.products), s.reserved) }

// instance returns slot i's instance.
func (s *soak) instance(i int) *apptest.Program {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.instances[i]
}

// record adds a line to the history.
func (s *soak) record(l history.Line) {
	s.mu.Lock()
	s.hist = append(s.hist, l)
	s.mu.Unlock()
}

// run sends the buyers for length while the schedule's faults happen, then
// heals everything.
func (s *soak) run(length time.Duration, sched []fault, buyerSeed uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), length)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	for b := range soakBuyers {
		rng := rand.New(rand.NewPCG(buyerSeed, uint64(b)))
		wg.Go(func() {
			for ctx.Err() == nil {
				s.buyOnce(rng, next.Add(1))
			}
		})
	}
	for b := range soakLifeBuyers {
		rng := rand.New(rand.NewPCG(buyerSeed, uint64(soakBuyers+b)))
		wg.Go(func() {
			for ctx.Err() == nil {
				s.lifeOnce(rng, next.Add(1))
				sleepUntil(ctx, time.Now().Add(50*time.Millisecond))
			}
		})
	}
	start := time.Now()
	for _, f := range sched {
		if !sleepUntil(ctx, start.Add(f.at)) {
			break
		}
		if err := s.inject(ctx, f); err != nil {
			s.t.Errorf("soak: %s: %v", f, err)
		}
	}
	<-ctx.Done()
	wg.Wait()
	s.heal()
}

// sleepUntil waits until at or ctx's end; it says whether at came first.
func sleepUntil(ctx context.Context, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// buyOnce makes purchase n: a quarter of the time the product sold under
// reserve; else a product (the hot one half the time) under a safe
// strategy; one or two units, an instance, a request ID of its own.
func (s *soak) buyOnce(rng *rand.Rand, n int64) {
	if rng.IntN(4) == 0 {
		// The product of its own sold under reserve.
		p := client.Purchase{UserID: fmt.Sprintf("u-%d", n), Quantity: int64(1 + rng.IntN(2)), RequestID: fmt.Sprintf("soak-%d", n)}
		s.buy(s.instance(int(n%soakInstances)), s.reserved, p, client.Override{Strategy: "reserve"})
		return
	}
	product := s.products[0]
	if rng.IntN(2) == 1 {
		product = s.products[1+rng.IntN(len(s.products)-1)]
	}
	quantity := int64(1 + rng.IntN(2))
	strategy := []string{"redlock", "token", "pessimistic", "optimistic"}[rng.IntN(4)]
	p := client.Purchase{UserID: fmt.Sprintf("u-%d", n), Quantity: quantity, RequestID: fmt.Sprintf("soak-%d", n)}
	s.buy(s.instance(int(n%soakInstances)), product, p, client.Override{Strategy: strategy})
}

// lifeOnce makes purchase n of each product of an order's life: of
// cancels, cancelled at once half the time; of expires, left unpaid.
func (s *soak) lifeOnce(rng *rand.Rand, n int64) {
	strategy := []string{"redlock", "token", "pessimistic", "optimistic"}[rng.IntN(4)]
	p := client.Purchase{UserID: fmt.Sprintf("u-%d", n), Quantity: int64(1 + rng.IntN(2)), RequestID: fmt.Sprintf("soak-%d", n)}
	l := s.buy(s.cancelling, s.cancels, p, client.Override{Strategy: strategy})
	if l.Status == http.StatusCreated && rng.IntN(2) == 0 {
		s.record(cancel(s.cancelling, l))
	}
	p.RequestID = fmt.Sprintf("soak-%d-e", n)
	e := send(s.expiring, s.expires, p, client.Override{Strategy: strategy})
	s.mu.Lock()
	s.expiryHist = append(s.expiryHist, e)
	s.mu.Unlock()
}

// cancel cancels the order of purchase l through in, as its buyer, and
// says what it got, as a line of the history.
func cancel(in *apptest.Program, l history.Line) history.Line {
	c := history.Line{Op: "cancel", Product: l.Product, OrderID: l.OrderID, Quantity: l.Quantity, StartNS: time.Now().UnixNano()}
	_, err := in.Client().Cancel(context.Background(), *l.OrderID, l.UserID)
	c.EndNS = time.Now().UnixNano()
	var e *client.Error
	switch {
	case err == nil:
		c.Status = http.StatusOK
	case errors.As(err, &e):
		c.Status, c.Code = e.Status, e.Code
	}
	return c
}

// buy makes a purchase through in and records it.
func (s *soak) buy(in *apptest.Program, product int64, p client.Purchase, o client.Override) history.Line {
	l := send(in, product, p, o)
	s.record(l)
	return l
}

// send makes a purchase through in and says what it got, as a line of the
// history (status 0: no answer, the instance is dead, stopped or gone).
func send(in *apptest.Program, product int64, p client.Purchase, o client.Override) history.Line {
	l := history.Line{Product: product, UserID: p.UserID, RequestID: p.RequestID, Quantity: p.Quantity,
		StartNS: time.Now().UnixNano()}
	a := in.Buy(context.Background(), product, p, o)
	l.EndNS = a.At.UnixNano()
	l.Status, l.Code = a.Status, a.Code
	switch {
	case a.Outcome() == "ok" && a.Reservation != nil:
		l.RemainingStock = &a.Reservation.RemainingStock
	case a.Outcome() == "ok":
		l.RemainingStock, l.OrderID = &a.Order.RemainingStock, &a.Order.OrderID
	}
	return l
}

// faultKind is one kind of thing the soak breaks.
type faultKind int

const (
	killInstance      faultKind = iota // SIGKILL, then a new process in its slot
	stopInstance                       // SIGSTOP for a while, then SIGCONT
	restartRedis                       // a node restarted empty
	restartMariaDB                     // SIGKILL, then started again
	holdCommitReplies                  // COMMITs take; their replies wait
	loseCommitReplies                  // COMMITs take; their replies are lost, the connections cut
	holdReplies                        // every reply waits
	cutConnections                     // every connection to the database cut
	partition                          // no byte to or from the database
	killReserveRedis                   // reserve's Redis SIGKILLed, then started from its AOF
	faultKinds
)

func (k faultKind) String() string {
	switch k {
	case killInstance:
		return "kill instance"
	case stopInstance:
		return "stop instance"
	case restartRedis:
		return "restart redis node empty"
	case restartMariaDB:
		return "restart mariadb"
	case holdCommitReplies:
		return "hold commit replies"
	case loseCommitReplies:
		return "lose commit replies"
	case holdReplies:
		return "hold every reply"
	case cutConnections:
		return "cut db connections"
	case partition:
		return "partition db"
	case killReserveRedis:
		return "kill reserve's redis (appendfsync always)"
	}
	return "fault " + strconv.Itoa(int(k))
}

// fault is one event of the schedule.
type fault struct {
	at     time.Duration // from the start
	kind   faultKind
	target int           // the instance's slot or the Redis node
	lasts  time.Duration // how long it lasts, for those that last
}

func (f fault) String() string {
	s := f.kind.String()
	switch f.kind {
	case killInstance, stopInstance:
		s += " " + strconv.Itoa(f.target)
	case restartRedis:
		s += " " + strconv.Itoa(f.target)
	}
	if f.lasts > 0 {
		s += fmt.Sprintf(" for %v", f.lasts)
	}
	return s
}

// schedule draws the faults of a soak of length: one every 1 to 4 s after
// a calm first second, each lasting 0.5 to 3.5 s where it lasts, none
// overlapping, the last ended 2 s before the end.
func schedule(rng *rand.Rand, length time.Duration, nodes int) []fault {
	var out []fault
	at := time.Second
	for {
		f := fault{at: at, kind: faultKind(rng.IntN(int(faultKinds)))}
		switch f.kind {
		case killInstance, stopInstance:
			f.target = rng.IntN(soakInstances)
		case restartRedis:
			f.target = rng.IntN(nodes)
		}
		switch f.kind {
		case restartRedis, cutConnections:
		default:
			f.lasts = time.Duration(500+rng.IntN(3000)) * time.Millisecond
		}
		if f.at+f.lasts > length-2*time.Second {
			return withReserveKill(out)
		}
		out = append(out, f)
		at = f.at + f.lasts + time.Duration(1000+rng.IntN(3000))*time.Millisecond
	}
}

// withReserveKill makes the middle fault of a schedule that has no kill of
// reserve's Redis one (it lasts as long): every soak kills it at least
// once.
func withReserveKill(sched []fault) []fault {
	for _, f := range sched {
		if f.kind == killReserveRedis {
			return sched
		}
	}
	if len(sched) > 0 {
		m := &sched[len(sched)/2]
		m.kind, m.target = killReserveRedis, 0
		if m.lasts == 0 {
			m.lasts = 500 * time.Millisecond // it fits: the next fault starts 1 s after at least
		}
	}
	return sched
}

// inject makes fault f happen, and end when it lasts.
func (s *soak) inject(ctx context.Context, f fault) error {
	t := s.t
	switch f.kind {
	case killInstance:
		killed := s.instance(f.target)
		killed.Kill()
		sleepUntil(ctx, time.Now().Add(f.lasts))
		in := killed.Another(t)
		s.mu.Lock()
		s.instances[f.target] = in
		s.mu.Unlock()
	case stopInstance:
		in := s.instance(f.target)
		if err := in.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		sleepUntil(ctx, time.Now().Add(f.lasts))
		return in.Signal(syscall.SIGCONT)
	case restartRedis:
		s.nodes[f.target].Restart(t)
	case restartMariaDB:
		s.db.Kill()
		sleepUntil(ctx, time.Now().Add(f.lasts))
		s.db.Start(t)
	case holdCommitReplies, loseCommitReplies:
		s.proxy.HoldCommitReplies()
		sleepUntil(ctx, time.Now().Add(f.lasts))
		if f.kind == loseCommitReplies {
			s.proxy.DropHeldAndCut()
		}
		s.proxy.Pass()
	case holdReplies:
		s.proxy.HoldReplies()
		sleepUntil(ctx, time.Now().Add(f.lasts))
		s.proxy.Pass()
	case cutConnections:
		s.proxy.Cut()
	case partition:
		s.proxy.Partition()
		sleepUntil(ctx, time.Now().Add(f.lasts))
		s.proxy.Heal()
	case killReserveRedis:
		s.reserveNode.Stop()
		sleepUntil(ctx, time.Now().Add(f.lasts))
		s.reserveNode.Restart(t)
	}
	return nil
}

// heal ends whatever is still broken and waits until every instance is
// ready again: service resumes by itself.
func (s *soak) heal() {
	t := s.t
	s.proxy.Heal()
	s.proxy.Pass()
	for i := range soakInstances {
		in := s.instance(i)
		_ = in.Signal(syscall.SIGCONT) // not stopped, or gone: fine
		testenv.Eventually(t, 60*time.Second, fmt.Sprintf("instance %d ready after the last fault", i),
			func() bool { return readyz(in) == http.StatusOK })
	}
}

// indeterminate says a purchase line may or may not have taken its units:
// no answer, outcome_unknown, or a 5xx without a code.
func indeterminate(l history.Line) bool {
	return l.Status == 0 || l.Code == "outcome_unknown" || (l.Status >= 500 && l.Code == "")
}

// row is an order as the database holds it.
type row struct {
	id, product, quantity int64
}

// orders reads every order of the soak's products from the database
// itself, by request ID.
func (s *soak) orders() map[string]row {
	t := s.t
	db, err := sql.Open("mysql", s.direct)
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT id, product_id, quantity, request_id FROM orders")
	if err != nil {
		t.Fatalf("read the orders: %v", err)
	}
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		var r row
		var rid sql.NullString
		if err := rows.Scan(&r.id, &r.product, &r.quantity, &rid); err != nil {
			t.Fatalf("read the orders: %v", err)
		}
		if !rid.Valid {
			t.Errorf("order %d has no request ID: every purchase carries one", r.id)
			continue
		}
		out[rid.String] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read the orders: %v", err)
	}
	return out
}

// verdict replays every purchase whose outcome its buyer could not know,
// then holds the history against the checker and the orders table, and
// prints the counts per answer.
func (s *soak) verdict() {
	t := s.t
	s.keepPromises()
	before := s.orders()
	unsure := s.unsure()
	replayed := s.replay(unsure, before)
	s.keepPromises() // those the replays made

	s.mu.Lock()
	lines := slices.Clone(s.hist)
	s.mu.Unlock()
	after := s.orders()
	counts := s.checkAnswers(lines, after)
	s.checkNoForeignOrders(after)
	s.checkStockAtEnd(lines)
	s.checkOrderLife(after)

	path, res := s.checkHistory(lines)
	logCounts(t, counts)
	t.Logf("soak: %d of %d purchases of unknown outcome had made their order (their replays said so); %d orders in all",
		replayed, len(unsure), len(after))
	t.Logf("soak: through the proxy %d COMMITs, %d of their replies held or lost", s.proxy.CommitsSeen(), s.proxy.CommitRepliesHeld())
	t.Logf("soak: history %s: %s", path, res)
	if !res.Linearizable {
		t.Errorf("soak: the history is not linearizable: %s", res)
	}
}

// keepPromises waits until every 202 of the history is an order, asking
// GET /api/v1/purchases/{request_id} (60 s at the most for all): a promise
// failed, lost or still pending then fails the soak.
func (s *soak) keepPromises() {
	t := s.t
	s.mu.Lock()
	var promised []string
	for _, l := range s.hist {
		if l.Status == http.StatusAccepted {
			promised = append(promised, l.RequestID)
		}
	}
	s.mu.Unlock()
	c := s.instance(0).Client()
	deadline := time.Now().Add(60 * time.Second)
	kept := 0
	for _, rid := range promised {
		var st client.PurchaseState
		var err error
		for {
			st, err = c.PurchaseState(context.Background(), rid)
			if (err == nil && st.State != "pending") || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil || st.State != "ordered" {
			t.Errorf("soak: the promise %s: %+v, %v; want it ordered", rid, st, err)
			continue
		}
		kept++
	}
	t.Logf("soak: %d promises (202s) of reserve, %d kept", len(promised), kept)
	// And every reservation whose buyer got no answer is written too, so
	// that the orders table holds all there will be.
	store := reserve.New(testenv.Clients(t, []string{s.reserveNode.Addr})[0], s.instance(0).KeyPrefix())
	var left int64
	if !testenv.Until(60*time.Second, func() bool {
		var err error
		left, err = store.Tidy(context.Background())
		return err == nil && left == 0
	}) {
		t.Errorf("soak: %d reservations still not written after 60 s", left)
	}
}

// unsure returns the indexes in the history of the purchases whose outcome
// their buyers could not know.
func (s *soak) unsure() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var unsure []int
	for i, l := range s.hist {
		if l.Stock == nil && !l.Cancel() && indeterminate(l) {
			unsure = append(unsure, i)
		}
	}
	return unsure
}

// replay sends again, through slot 0's instance, each purchase at the
// history's indexes unsure, and checks that a replay of one whose order was
// in before answers with that order; it returns how many did.
//
// A replay of a purchase whose order exists answers with that order:
// it tells what the first attempt did (it took its units, leaving the
// order's remaining stock, before the replay's answer), and the history
// says so. A replay of one that wrote nothing is a purchase of its own.
func (s *soak) replay(unsure []int, before map[string]row) int {
	t := s.t
	replayed := 0
	for _, i := range unsure {
		s.mu.Lock()
		l := s.hist[i]
		s.mu.Unlock()
		r, had := before[l.RequestID]
		var o client.Override
		switch l.Product {
		case s.reserved:
			o.Strategy = "reserve"
		case s.cancels:
			o.Strategy = "redlock" // any safe one: the buyer's is not recorded
		}
		if !had {
			s.buy(s.instance(0), l.Product, client.Purchase{UserID: l.UserID, Quantity: l.Quantity, RequestID: l.RequestID}, o)
			continue
		}
		again := send(s.instance(0), l.Product, client.Purchase{UserID: l.UserID, Quantity: l.Quantity, RequestID: l.RequestID}, o)
		if again.Status/100 != 2 || again.OrderID == nil || *again.OrderID != r.id {
			t.Errorf("replay of %s (first answered %d %q) = %d %q; want its order %d", l.RequestID, l.Status, l.Code, again.Status, again.Code, r.id)
			continue
		}
		replayed++
		l.Status, l.Code, l.EndNS = 201, "", again.EndNS
		l.RemainingStock, l.OrderID = again.RemainingStock, again.OrderID
		s.mu.Lock()
		s.hist[i] = l
		s.mu.Unlock()
	}
	return replayed
}

// checkAnswers holds each purchase's answer against the orders table after:
// a 2xx has its order, an answer that says nothing was written has none.
// It returns the count of purchases per answer ("201", "409 sold_out").
func (s *soak) checkAnswers(lines []history.Line, after map[string]row) map[string]int {
	t := s.t
	counts := map[string]int{}
	for _, l := range lines {
		if l.Stock != nil {
			continue
		}
		if l.Cancel() {
			counts[fmt.Sprintf("%d %s (cancel)", l.Status, l.Code)]++
			continue
		}
		key := strconv.Itoa(l.Status)
		if l.Code != "" {
			key += " " + l.Code
		}
		counts[key]++
		r, has := after[l.RequestID]
		switch {
		case l.Status == http.StatusAccepted:
			if !has || r.product != l.Product || r.quantity != l.Quantity {
				t.Errorf("%s answered 202; the database has %+v (present %v): a promise not kept", l.RequestID, r, has)
			}
		case l.Status/100 == 2:
			if !has || l.OrderID == nil || r.id != *l.OrderID {
				t.Errorf("%s answered %d with order %v; the database has %+v (present %v)", l.RequestID, l.Status, l.OrderID, r, has)
			}
		case !indeterminate(l) && has:
			t.Errorf("%s answered %d %q, which says nothing was written; the database has its order %d", l.RequestID, l.Status, l.Code, r.id)
		}
	}
	return counts
}

// checkNoForeignOrders checks that every order in after carries a request
// ID a soak buyer sent.
func (s *soak) checkNoForeignOrders(after map[string]row) {
	for rid, r := range after {
		if !strings.HasPrefix(rid, "soak-") {
			s.t.Errorf("order %d has request ID %q, which no buyer sent", r.id, rid)
		}
	}
}

// checkStockAtEnd checks each product's audit, and that no purchase
// answered sold_out for a quantity still left at the end: sold_out says the
// stock was below the quantity, and with no reset it stays so to the end.
func (s *soak) checkStockAtEnd(lines []history.Line) {
	t := s.t
	for _, id := range s.allProducts() {
		a := s.instance(0).WantConsistent(t, id)
		for _, l := range lines {
			if l.Product == id && l.Code == "sold_out" && l.Quantity <= a.Stock {
				t.Errorf("%s (%d of product %d) answered sold_out; %d are left at the end", l.RequestID, l.Quantity, id, a.Stock)
				break
			}
		}
	}
}

// checkOrderLife checks the products of an order's life once the soak is
// over: each audit holds (every unit sold, in stock or returned, once);
// every cancel answered 200 left its order cancelled and every unpaid
// order of expires is expired within a second of its time; each purchase
// of expires answered 201 has its order, and one that said nothing was
// written has none.
func (s *soak) checkOrderLife(after map[string]row) {
	t := s.t
	// Every instance sweeps: the last orders' time passes, and a second.
	time.Sleep(soakExpiry + time.Second)
	c := s.instance(0).WantConsistent(t, s.cancels)
	e := s.instance(0).WantConsistent(t, s.expires)
	db, err := sql.Open("mysql", s.direct)
	if err != nil {
		t.Fatalf("open the database: %v", err)
	}
	defer db.Close()
	var late, expired int64
	err = db.QueryRow("SELECT COUNT(*), (SELECT COUNT(*) FROM orders WHERE product_id = ? AND status = 'expired') "+
		"FROM orders WHERE product_id = ? AND status = 'unpaid' AND expires_at < NOW(3) - INTERVAL 1 SECOND", s.expires, s.expires).
		Scan(&late, &expired)
	if err != nil {
		t.Fatalf("count the orders of expires: %v", err)
	}
	if late != 0 {
		t.Errorf("soak: %d unpaid orders of expires are past their time by more than a second", late)
	}
	s.mu.Lock()
	lines := slices.Clone(s.expiryHist)
	var cancelled []int64
	for _, l := range s.hist {
		if l.Cancel() && l.Status == http.StatusOK {
			cancelled = append(cancelled, *l.OrderID)
		}
	}
	s.mu.Unlock()
	for _, id := range cancelled {
		var status string
		if err := db.QueryRow("SELECT status FROM orders WHERE id = ?", id).Scan(&status); err != nil || status != "cancelled" {
			t.Errorf("soak: order %d was answered cancelled; the database has it %q (%v)", id, status, err)
		}
	}
	var sold int
	for _, l := range lines {
		r, has := after[l.RequestID]
		switch {
		case l.Status == http.StatusCreated:
			sold++
			if !has || l.OrderID == nil || r.id != *l.OrderID {
				t.Errorf("%s answered 201 with order %v; the database has %+v (present %v)", l.RequestID, l.OrderID, r, has)
			}
		case !indeterminate(l) && has:
			t.Errorf("%s answered %d %q, which says nothing was written; the database has its order %d", l.RequestID, l.Status, l.Code, r.id)
		}
	}
	if expired == 0 || e.UnitsReturned == 0 {
		t.Errorf("soak: no order of expires expired (%d sold, audit %+v)", sold, e)
	}
	t.Logf("soak: an order's life: %d cancels answered 200 (audit of cancels %+v); %d purchases of expires sold, %d orders expired (audit %+v)",
		len(cancelled), c, sold, expired, e)
}

// checkHistory writes the history to a file of its own in the temporary
// directory and runs the linearizability checker on it; it returns the
// file's path and the checker's result.
func (s *soak) checkHistory(lines []history.Line) (string, *history.Result) {
	t := s.t
	path := filepath.Join(os.TempDir(), fmt.Sprintf("seckill-soak-%d.jsonl", time.Now().UnixNano()))
	if err := history.WriteFile(path, lines); err != nil {
		t.Errorf("write the history: %v", err)
	}
	res, err := history.Check(lines)
	if err != nil {
		t.Fatalf("check the history: %v", err)
	}
	return path, res
}

// logCounts prints the count of purchases per answer, sorted by answer.
func logCounts(t *testing.T, counts map[string]int) {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("soak: %7d answered %s", counts[k], k)
	}
}
