package service

import (
	"fmt"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/sale"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/stockcache"
)

// A sale's answers, as the sale rule (package sale) decides them: the
// stores read what the rule needs under the product's row lock and call
// decide, write what it sold, and finish the answers.

// decided is a sale as the rule decided it: an answer per purchase, and
// what it sells. orders[k] is the order of purchase sold[k]; purchase i
// replays purchase firstOf[i] of the same sale (same request ID); total is
// the units sold, left the stock they leave and units the units of the
// users sold to, after the sale. The answers of those sold and of those
// replaying them are final once the orders are written (finish). final
// says left is the product's stock as the sale left it, known under its
// row lock (afterWrite), for the stock cache, in version read.
type decided struct {
	answers     []answer
	orders      []model.Order
	sold        []int
	firstOf     map[int]int
	left, total int64
	units       map[string]int64
	final       bool
	read        stockcache.Version
}

// afterWrite sets what d leaves of stock, the stock read under the row
// lock: the rule's own figure, unless the sale trusted a stock read
// before (trusted), which another holder may have written since; the
// orders then say what the stock really became.
func (d *decided) afterWrite(stock int64, trusted bool) {
	if trusted {
		after := stock - d.total
		for i := range d.orders {
			d.orders[i].RemainingStock += after - d.left
		}
		d.left = after
	}
	d.final = true
}

// decide asks the sale rule (package sale) to answer the purchases in line
// order, against stock, the orders already made with their request IDs
// (used) and the units each user holds, and answers those it does not
// sell: a replay, a refusal. A purchase whose own lock wait ran out before
// the hold got the row lock (expired[i]) answers lock_timeout and is left
// out.
func (s *Seckill) decide(st Strategy, ps []Purchase, expired []bool, stock int64, used map[string]model.Order, units map[string]int64) decided {
	id := ps[0].ProductID
	state := sale.State{Product: id, Stock: stock, Limit: s.cfg.PerUserLimit, Units: units}
	if len(used) > 0 {
		state.Used = make(map[string]sale.Prior, len(used))
		for rid, o := range used {
			state.Used[rid] = sale.Prior{Product: o.ProductID, User: string(o.UserID), Quantity: o.Quantity}
		}
	}
	d := decided{answers: make([]answer, len(ps))}
	rule := make([]sale.Purchase, 0, len(ps))
	in := make([]int, 0, len(ps)) // in[k] is rule[k]'s index in ps
	for i, p := range ps {
		if expired != nil && expired[i] {
			d.answers[i].err = failure.ErrLockTimeout.Because(fmt.Errorf("row lock of product %d: its wait ran out", id))
			continue
		}
		rule = append(rule, sale.Purchase{RequestID: p.RequestID, User: p.UserID, Quantity: p.Quantity})
		in = append(in, i)
	}
	out := sale.Decide(state, rule)
	d.left, d.total, d.units = out.Left, out.Sold, out.Units
	for k, v := range out.Decisions {
		i := in[k]
		switch v.Verdict {
		case sale.Sold:
			d.orders = append(d.orders, newOrder(ps[i], st.Name, v.Left))
			d.sold = append(d.sold, i)
		case sale.ReplayOf:
			if d.firstOf == nil {
				d.firstOf = map[int]int{}
			}
			d.firstOf[i] = in[v.Of]
		default:
			d.answers[i].r, d.answers[i].err = s.refusal(ps[i], v, used[ps[i].RequestID])
		}
	}
	return d
}

// finish gives the purchases sold their orders, final now, their IDs
// included, and those replaying them theirs.
func (d *decided) finish() {
	for k, i := range d.sold {
		d.answers[i] = answer{r: Receipt{Order: d.orders[k]}}
	}
	for i, first := range d.firstOf {
		d.answers[i] = answer{r: Receipt{Order: d.answers[first].r.Order, Replayed: true}}
	}
}

// writes says, per purchase, whether its answer is an order d writes: it
// was sold, or it replays one sold in the batch.
func (d *decided) writes() []bool {
	w := make([]bool, len(d.answers))
	for _, i := range d.sold {
		w[i] = true
	}
	for i := range d.firstOf {
		w[i] = true
	}
	return w
}

// soldUsers are the users d sells to, each once, in line order.
func (d *decided) soldUsers(ps []Purchase) []string {
	var users []string
	seen := map[string]bool{}
	for _, i := range d.sold {
		if u := ps[i].UserID; !seen[u] {
			seen[u] = true
			users = append(users, u)
		}
	}
	return users
}

// refusal is the answer to a purchase the sale rule did not sell (d): a
// replay of prior, the order its request ID made, or an error.
func (s *Seckill) refusal(p Purchase, d sale.Decision, prior model.Order) (Receipt, error) {
	switch d.Verdict {
	case sale.Replay:
		return Receipt{Order: prior, Replayed: true}, nil
	case sale.SoldOut:
		return Receipt{}, soldOut(p.ProductID, d.Left)
	case sale.OverLimit:
		return Receipt{}, failure.Errorf(failure.CodeLimitExceeded, "user %s has %d of product %d, the limit is %d", p.UserID, d.Units, p.ProductID, s.cfg.PerUserLimit)
	case sale.Reused:
		return Receipt{}, requestIDReused(p)
	}
	return Receipt{}, fmt.Errorf("purchase of product %d: the sale rule answered %v", p.ProductID, d.Verdict)
}
