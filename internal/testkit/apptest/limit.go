package apptest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/client"
)

// LimitRun is a per-user limit under fire: Users buyers each send Tries
// purchases of one unit at once, spread over the instances in turn, each
// buyer's tries going through Strategies in turn, with Hold as hold_ms for
// the lock strategies (token, redlock) and Batch as batch.
type LimitRun struct {
	Users, Tries int
	Strategies   []string
	Hold         time.Duration
	Batch        int
}

// Name says what the run mixes, for a subtest.
func (r LimitRun) Name() string {
	name := strings.Join(r.Strategies, "+")
	if r.Hold > 0 {
		name += fmt.Sprintf(" hold=%v", r.Hold)
	}
	if r.Batch > 0 {
		name += fmt.Sprintf(" batch=%d", r.Batch)
	}
	return name
}

// CheckPerUserLimit plays run against a product of its own with stock to
// spare, on instances that run with a per-user limit of one unit (the
// default), and fails t unless every user holds exactly one unit, counted
// from the database's orders and its users' units: one 201 per user, every
// other answer 409 limit_exceeded, and the audit consistent.
func CheckPerUserLimit(t *testing.T, ins []*Instance, run LimitRun) {
	t.Helper()
	ctx := t.Context()
	a := ins[0]
	stock := int64(run.Users * run.Tries * 2)
	id := a.Create(t, "limit "+run.Name(), stock)
	answers := make([]Answer, run.Users*run.Tries)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		user := fmt.Sprintf("u-%d", i%run.Users)
		try := i / run.Users
		o := client.Override{Strategy: run.Strategies[(i+try)%len(run.Strategies)], Batch: run.Batch}
		if o.Strategy == "token" || o.Strategy == "redlock" {
			o.Hold = run.Hold
		}
		in := ins[try%len(ins)]
		wg.Go(func() {
			<-start
			answers[i] = in.Buy(ctx, id, client.Purchase{UserID: user, Quantity: 1}, o)
		})
	}
	close(start)
	wg.Wait()
	sold := map[string]int{}
	for _, an := range answers {
		switch an.Outcome() {
		case "ok":
			sold[an.Purchase.UserID]++
		case "limit_exceeded":
		default:
			t.Errorf("purchase by %s = %v; want 201 or 409 limit_exceeded", an.Purchase.UserID, an.Err)
		}
	}
	ordered, held := unitsPerUser(t, a, id)
	for u := range run.Users {
		user := fmt.Sprintf("u-%d", u)
		if sold[user] != 1 || ordered[user] != 1 || held[user] != 1 {
			t.Errorf("%s: %d purchases answered 201, orders of %d units, %d units counted; want 1 each",
				user, sold[user], ordered[user], held[user])
		}
	}
	if len(ordered) != run.Users {
		t.Errorf("orders for %d users; want %d", len(ordered), run.Users)
	}
	au := a.Audit(t, id)
	if n := int64(run.Users); !au.Held() || au.Orders != n || au.UnitsSold != n || au.Stock != stock-n {
		t.Errorf("audit %+v; want %d orders of one unit, %d left", au, n, stock-n)
	}
}

// unitsPerUser reads, from the instance's database, the units each user's
// orders of product id hold and the units the per-user limit counts.
func unitsPerUser(t *testing.T, in *Instance, id int64) (ordered, held map[string]int64) {
	t.Helper()
	db := in.Stores.DB.WithContext(t.Context())
	type row struct {
		UserID string
		Units  int64
	}
	var rows []row
	if err := db.Raw("SELECT user_id, SUM(quantity) AS units FROM orders WHERE product_id = ? GROUP BY user_id", id).Scan(&rows).Error; err != nil {
		t.Fatalf("count the units of each user's orders: %v", err)
	}
	ordered = map[string]int64{}
	for _, r := range rows {
		ordered[r.UserID] = r.Units
	}
	rows = nil
	if err := db.Raw("SELECT user_id, units FROM user_units WHERE product_id = ?", id).Scan(&rows).Error; err != nil {
		t.Fatalf("read the units the limit counts: %v", err)
	}
	held = map[string]int64{}
	for _, r := range rows {
		held[r.UserID] = r.Units
	}
	return ordered, held
}

// LimitRuns are the runs a store is held to: every safe strategy alone,
// redlock one purchase per hold, all four mixed with work inside the Redis
// locks (a rolling change of SECKILL_LOCK), and token and redlock mixed one
// purchase per hold (their fence claims collide on every purchase).
func LimitRuns() []LimitRun {
	safe := SafeStrategies()
	var runs []LimitRun
	for _, st := range safe {
		runs = append(runs, LimitRun{Users: 10, Tries: 8, Strategies: []string{st}})
	}
	return append(runs,
		LimitRun{Users: 10, Tries: 8, Strategies: []string{"redlock"}, Batch: 1},
		LimitRun{Users: 10, Tries: 8, Strategies: safe, Hold: 20 * time.Millisecond},
		LimitRun{Users: 10, Tries: 8, Strategies: []string{"token", "redlock"}, Hold: 10 * time.Millisecond, Batch: 1})
}
