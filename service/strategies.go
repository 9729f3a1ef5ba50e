package service

import "github.com/seckill/seckill/config"

// Strategy describes one way of guarding the stock.
type Strategy struct {
	Name        string
	Description string
	// Safe says the strategy keeps the stock invariant under any number of
	// concurrent buyers and instances, as deployed here.
	Safe bool
}

// Strategies returns every strategy, described honestly, in the order of
// the articles.
func (s *Seckill) Strategies() []Strategy {
	pessimistic := "MySQL row lock: SELECT ... FOR UPDATE, check, decrement and order in one transaction. Correct."
	if s.cfg.EmbeddedSQL {
		pessimistic = "One transaction: read, check, decrement, order. SQLite drops FOR UPDATE; it is correct here only because the embedded store serialises every write on one connection."
	}
	all := map[string]Strategy{
		"none":        {Description: "No lock: read the stock, check it, then stock = stock - q as separate statements. Oversells under concurrency: stock goes negative."},
		"local":       {Description: "An in-process lock per product. Correct with one instance; oversells as soon as two instances share the database."},
		"setnx":       {Description: "The classic recipe: SETNX with the expiry time in the value, GET + GETSET to take over an expired lock. Trusts every client's clock, and its unlock can delete another holder's lock."},
		"token":       {Description: "SET key <random token> NX PX ttl on one Redis node, released by a Lua compare-and-delete. Correct on one node while nothing overruns the lease.", Safe: true},
		"redlock":     {Description: "Redlock (redsync) over every node of SECKILL_REDIS_ADDRS: held when a majority grants it within the lease. Correct while a majority is up and nothing overruns the lease.", Safe: true},
		"pessimistic": {Description: pessimistic, Safe: true},
		"optimistic":  {Description: "No lock: one conditional UPDATE ... SET stock = stock - q WHERE id = ? AND stock >= q. Correct.", Safe: true},
	}
	out := make([]Strategy, 0, len(all))
	for _, name := range config.Strategies() {
		st := all[name]
		st.Name = name
		out = append(out, st)
	}
	return out
}

// fenced says the strategy takes a Redis lock whose writes can be fenced.
func fenced(strategy string) bool {
	return strategy == "setnx" || strategy == "token" || strategy == "redlock"
}
