package service

import (
	"fmt"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/sale"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/salestore"
)

// A sale's answers, as the sale rule (package sale) decides them: the
// stores read what the rule needs under the product's row lock and call
// decide, write what it sold, and finish the answers.

// decide asks the sale rule (package sale) to answer the purchases in line
// order, against stock, the orders already made with their request IDs
// (used) and the units each user holds, and answers those it does not
// sell: a replay, a refusal. A purchase whose own lock wait ran out before
// the hold got the row lock (expired[i]) answers lock_timeout and is left
// out.
func (s *Seckill) decide(st Strategy, ps []Purchase, expired []bool, stock int64, used map[string]model.Order, units map[string]int64) salestore.Sale {
	id := ps[0].ProductID
	state := sale.State{Product: id, Stock: stock, Limit: s.cfg.PerUserLimit, Units: units}
	if len(used) > 0 {
		state.Used = make(map[string]sale.Prior, len(used))
		for rid, o := range used {
			state.Used[rid] = sale.Prior{Product: o.ProductID, User: string(o.UserID), Quantity: o.Quantity}
		}
	}
	d := salestore.Sale{Answers: make([]salestore.Answer, len(ps))}
	rule := make([]sale.Purchase, 0, len(ps))
	in := make([]int, 0, len(ps)) // in[k] is rule[k]'s index in ps
	for i, p := range ps {
		if expired != nil && expired[i] {
			d.Answers[i].Err = failure.ErrLockTimeout.Because(fmt.Errorf("row lock of product %d: its wait ran out", id))
			continue
		}
		rule = append(rule, sale.Purchase{RequestID: p.RequestID, User: p.UserID, Quantity: p.Quantity})
		in = append(in, i)
	}
	out := sale.Decide(state, rule)
	d.Left, d.Total, d.Units = out.Left, out.Sold, out.Units
	for k, v := range out.Decisions {
		i := in[k]
		switch v.Verdict {
		case sale.Sold:
			d.Orders = append(d.Orders, salestore.NewOrder(ps[i], st.Name, v.Left))
			d.Sold = append(d.Sold, i)
		case sale.ReplayOf:
			if d.FirstOf == nil {
				d.FirstOf = map[int]int{}
			}
			d.FirstOf[i] = in[v.Of]
		default:
			d.Answers[i].R, d.Answers[i].Err = s.refusal(ps[i], v, used[ps[i].RequestID])
		}
	}
	return d
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
