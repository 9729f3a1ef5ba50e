package service

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seckill/seckill/service/metrics"
	"github.com/seckill/seckill/service/salestore"
)

// Strategy is one way of guarding the stock: what it is called and what it
// says of itself (for /api/v1/strategies, the metrics' labels, the demo's
// rows), and its way to sell, which the purchase path asks rather than
// testing what kind of strategy it is. Everything that lists strategies
// reads them from StrategyTable.
type Strategy struct {
	Name string
	// Guard says in a few words what guards the stock, for a table read
	// from the back of a room.
	Guard string
	// Description says what the strategy does and when it fails.
	Description string
	// Safe says the strategy keeps the stock invariant under any number of
	// concurrent buyers and instances, as deployed here (with fencing on
	// for the Redis locks).
	Safe bool
	// OnEmbedded, when set, is the description on the embedded SQLite,
	// where the strategy holds for another reason.
	OnEmbedded string

	way way
}

// way is a strategy's way to sell, as functions and what they need
// (porcupine's models are values of functions in the same way).
type way struct {
	// sell sells one purchase, its request ID set, within ctx's deadline.
	sell func(s *Seckill, ctx context.Context, st Strategy, p Purchase) (Receipt, error)
	// hold, for a strategy whose buyers wait in line per product on each
	// instance (sellLined), sells one hold's batch, of up to SECKILL_BATCH
	// purchases.
	hold func(s *Seckill, ctx context.Context, st Strategy, h hold) ([]salestore.Answer, error)
	// locked says a line takes the strategy's lock of package locker, by
	// its name, before a hold; the others' lock is the database's.
	locked bool
	// fenced says fencing tokens guard its stock writes (SECKILL_FENCING).
	fenced bool
	// renewed says its lease is renewed while its holder works
	// (SECKILL_WATCHDOG).
	renewed bool
	// deferred says it answers 202 with a reservation and writes the order
	// behind (reserve): a purchase the stock cache finds sold out is still
	// its own to answer, since a replay of a reservation not written yet is
	// known to it, not to the database.
	deferred bool
}

// Lined says the strategy's buyers wait in line per product on each
// instance and are sold in batches under one hold.
func (st Strategy) Lined() bool { return st.way.hold != nil }

// Deferred says the strategy answers 202 with a reservation and writes
// the order behind (reserve).
func (st Strategy) Deferred() bool { return st.way.deferred }

// StrategyTable returns every strategy, in the order of the articles: no
// lock, in-process, the classic SETNX recipe, the token lock, Redlock, the
// two that leave it to MySQL, then the industry's lock-free path.
func StrategyTable() []Strategy {
	names := strategyOrder()
	all := make([]Strategy, len(names))
	for i, name := range names {
		all[i], _ = LookupStrategy(name)
	}
	return all
}

// strategyOrder names every strategy LookupStrategy knows, in
// StrategyTable's order.
func strategyOrder() [8]string {
	return [...]string{"none", "local", "setnx", "token", "redlock", "pessimistic", "optimistic", "reserve"}
}

// LookupStrategy returns the strategy called name. It runs on every
// purchase, so it makes that one strategy, not the whole table.
func LookupStrategy(name string) (Strategy, bool) {
	lined := way{sell: (*Seckill).sellLined, hold: (*Seckill).sellLocked, locked: true, fenced: true, renewed: true}
	switch name {
	case "none":
		return Strategy{Name: "none", Guard: "nothing: read, check, write", way: way{sell: (*Seckill).sellNone},
			Description: "No lock: read the stock, check it, then stock = stock - q as separate statements. Oversells under concurrency: stock goes negative."}, true
	case "local":
		return Strategy{Name: "local", Guard: "a mutex inside each instance", way: way{sell: lined.sell, hold: lined.hold, locked: true},
			Description: "An in-process lock per product. Correct with one instance; oversells as soon as two instances share the database."}, true
	case "setnx":
		return Strategy{Name: "setnx", Guard: "SETNX + GETSET, expiry in value", way: way{sell: lined.sell, hold: lined.hold, locked: true, fenced: true},
			Description: "The classic recipe: SETNX with the expiry time in the value, GET + GETSET to take over an expired lock. Trusts every client's clock, and its unlock can delete another holder's lock."}, true
	case "token":
		return Strategy{Name: "token", Guard: "SET NX PX + Lua compare-and-delete", Safe: true, way: lined,
			Description: "SET key <random token> NX PX ttl on one Redis node, released by a Lua compare-and-delete. Correct on one node while nothing overruns the lease; with fencing, the database refuses an overtaken holder's write."}, true
	case "redlock":
		return Strategy{Name: "redlock", Guard: "Redlock: a majority of Redis nodes", Safe: true, way: lined,
			Description: "Redlock (redsync) over every node of SECKILL_REDIS_ADDRS: held when a majority grants it within the lease. Correct while a majority is up and nothing overruns the lease; with fencing, the database refuses an overtaken holder's write."}, true
	case "pessimistic":
		return Strategy{Name: "pessimistic", Guard: "row lock: one transaction", Safe: true, way: way{sell: lined.sell, hold: (*Seckill).sellRowLocked},
			Description: "MySQL row lock: SELECT ... FOR UPDATE, check, decrement and order in one transaction. Correct.",
			OnEmbedded:  "One transaction: read, check, decrement, order. SQLite drops FOR UPDATE; it is correct here only because the embedded store serialises every write on one connection."}, true
	case "optimistic":
		return Strategy{Name: "optimistic", Guard: "UPDATE ... WHERE stock >= q", Safe: true, way: way{sell: (*Seckill).sellOptimistic},
			Description: "No lock: one conditional UPDATE ... SET stock = stock - q WHERE id = ? AND stock >= q. Correct."}, true
	case "reserve":
		return Strategy{Name: "reserve", Guard: "Lua on a Redis counter; 202", Safe: true, way: way{sell: (*Seckill).sellReserve, deferred: true},
			Description: "No lock: one Lua script on SECKILL_RESERVE_REDIS checks and takes the units from a stock counter kept there, counts the buyer's units, records the request and queues the reservation on a Redis stream, atomically; it answers 202 at once, and every instance's writer writes the orders to MySQL behind it, many to a transaction. Correct while that Redis keeps what it acknowledged."}, true
	}
	return Strategy{}, false
}

// StrategyNames returns the names of StrategyTable, in its order.
func StrategyNames() []string {
	var names []string
	for _, st := range StrategyTable() {
		names = append(names, st.Name)
	}
	return names
}

// Strategies returns StrategyTable as this instance runs it: on the
// embedded SQLite, a strategy's OnEmbedded description says what holds it
// there.
func (s *Seckill) Strategies() []Strategy {
	all := StrategyTable()
	for i := range all {
		if all[i].OnEmbedded != "" && s.cfg.EmbeddedSQL {
			all[i].Description = all[i].OnEmbedded
		}
	}
	return all
}

// NewMetrics makes the service's instruments, with the series of every
// strategy, and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *metrics.Metrics {
	var sts []metrics.Strategy
	for _, st := range StrategyTable() {
		sts = append(sts, metrics.Strategy{Name: st.Name, Lined: st.Lined()})
	}
	return metrics.New(reg, sts)
}
