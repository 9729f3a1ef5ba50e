package service

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/seckill/seckill/service/metrics"
)

// Strategy is one way of guarding the stock, and which of the service's
// mechanisms apply to it. Everything that lists strategies (the purchase
// path, /api/v1/strategies, the metrics' labels, the demo's rows) reads
// them from StrategyTable.
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
	// Locked says the strategy takes a lock of package locker, by its name.
	Locked bool
	// Fenced says fencing tokens guard its stock writes (SECKILL_FENCING).
	Fenced bool
	// Lined says its buyers wait in line per product on each instance and
	// are sold in batches of up to SECKILL_BATCH per hold.
	Lined bool
	// Watchdog says its lease is renewed while its holder works
	// (SECKILL_WATCHDOG).
	Watchdog bool
	// RowLock says a hold takes the product's row lock (SELECT ... FOR
	// UPDATE) for the whole batch: the database's lock is the strategy's.
	RowLock bool
	// Conditional says each purchase is one conditional UPDATE, with no
	// lock and no line.
	Conditional bool
	// Deferred says the strategy answers 202 with a reservation and writes
	// the order behind (reserve): a product sells under it alone, from the
	// first such purchase since its last reset.
	Deferred bool
	// OnEmbedded, when set, is the description on the embedded SQLite,
	// where the strategy holds for another reason.
	OnEmbedded string
}

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
	switch name {
	case "none":
		return Strategy{Name: "none", Guard: "nothing: read, check, write",
			Description: "No lock: read the stock, check it, then stock = stock - q as separate statements. Oversells under concurrency: stock goes negative."}, true
	case "local":
		return Strategy{Name: "local", Guard: "a mutex inside each instance", Locked: true, Lined: true,
			Description: "An in-process lock per product. Correct with one instance; oversells as soon as two instances share the database."}, true
	case "setnx":
		return Strategy{Name: "setnx", Guard: "SETNX + GETSET, expiry in value", Locked: true, Fenced: true, Lined: true,
			Description: "The classic recipe: SETNX with the expiry time in the value, GET + GETSET to take over an expired lock. Trusts every client's clock, and its unlock can delete another holder's lock."}, true
	case "token":
		return Strategy{Name: "token", Guard: "SET NX PX + Lua compare-and-delete", Safe: true, Locked: true, Fenced: true, Lined: true, Watchdog: true,
			Description: "SET key <random token> NX PX ttl on one Redis node, released by a Lua compare-and-delete. Correct on one node while nothing overruns the lease; with fencing, the database refuses an overtaken holder's write."}, true
	case "redlock":
		return Strategy{Name: "redlock", Guard: "Redlock: a majority of Redis nodes", Safe: true, Locked: true, Fenced: true, Lined: true, Watchdog: true,
			Description: "Redlock (redsync) over every node of SECKILL_REDIS_ADDRS: held when a majority grants it within the lease. Correct while a majority is up and nothing overruns the lease; with fencing, the database refuses an overtaken holder's write."}, true
	case "pessimistic":
		return Strategy{Name: "pessimistic", Guard: "row lock: one transaction", Safe: true, Lined: true, RowLock: true,
			Description: "MySQL row lock: SELECT ... FOR UPDATE, check, decrement and order in one transaction. Correct.",
			OnEmbedded:  "One transaction: read, check, decrement, order. SQLite drops FOR UPDATE; it is correct here only because the embedded store serialises every write on one connection."}, true
	case "optimistic":
		return Strategy{Name: "optimistic", Guard: "UPDATE ... WHERE stock >= q", Safe: true, Conditional: true,
			Description: "No lock: one conditional UPDATE ... SET stock = stock - q WHERE id = ? AND stock >= q. Correct."}, true
	case "reserve":
		return Strategy{Name: "reserve", Guard: "Lua on a Redis counter; 202", Safe: true, Deferred: true,
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
		sts = append(sts, metrics.Strategy{Name: st.Name, Lined: st.Lined})
	}
	return metrics.New(reg, sts)
}
