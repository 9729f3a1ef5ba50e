package scenario

import (
	"fmt"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
)

// The order's life: a sale sells out, a third of its buyers never pay,
// their orders expire and the units sell again.
const (
	ordersStock   = 30
	ordersBuyers  = 60
	ordersTimeout = 2 * time.Second
	// ordersUnpaidEvery: one buyer in three of those who bought never
	// pays.
	ordersUnpaidEvery = 3
)

func ordersScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "orders",
		Title: "AN ORDER'S LIFE: UNPAID ORDERS EXPIRE, THEIR UNITS SELL AGAIN",
		Shows: "unpaid orders of a sold-out sale expire: their units come back and sell again, once",
		Story: fmt.Sprintf("Orders wait %s for their payment (SECKILL_PAYMENT_TIMEOUT). For redlock, then "+
			"reserve, %d buyers on two instances try for %d units; it sells out. Two buyers in three pay; "+
			"the third never does. Their orders expire, the units come back, and %d more buyers try.",
			lab.DurWords(ordersTimeout), ordersBuyers, ordersStock, ordersBuyers),
		Run: runOrders,
	}
}

func runOrders(w *lab.World) (*lab.Result, error) {
	ins, err := w.StartInstances(2, lab.Setup{PaymentTimeout: ordersTimeout})
	if err != nil {
		return nil, err
	}
	res := &lab.Result{Columns: []string{"STRATEGY", "SOLD", "PAID", "RETURNED", "RESOLD", "LEFT", "AUDIT", "VERDICT"}}
	for _, st := range []string{"redlock", "reserve"} {
		s, err := w.NewSeries("orders-"+st, st+", orders expire", ins[0], ordersStock)
		if err != nil {
			return nil, err
		}
		row, ok, err := orderLife(w, s, ins, st)
		if err != nil {
			return nil, err
		}
		res.Add(row, ok)
	}
	res.Notes = []string{"An unpaid order's units come back exactly once: one transaction under the " +
		"product's row lock marks it expired and puts them back, whichever instance sweeps; under reserve " +
		"they go back to the Redis counter too, through an outbox (docs/answers.md, docs/reserve.md)."}
	return res, nil
}

// orderLife sells s out under strategy, pays two orders in three, waits
// for the rest to expire and sells again: its row.
func orderLife(w *lab.World, s *lab.Series, ins []*lab.Instance, strategy string) (lab.Row, bool, error) {
	o := client.Override{Strategy: strategy}
	first, _, err := w.SellOut(s, ins, ordersBuyers, 16, o)
	if err != nil {
		return lab.Row{}, false, err
	}
	var sold, paid int64
	for i, a := range first {
		if !a.Created() {
			continue
		}
		sold++
		order := a.Order
		if a.RequestID != "" { // a reservation: its order, written since
			st, err := s.Seller.Client.PurchaseState(w.Context(), a.RequestID)
			if err != nil || st.Order == nil {
				return lab.Row{}, false, fmt.Errorf("scenario: the order of reservation %s: %+v, %w", a.RequestID, st, err)
			}
			order = *st.Order
		}
		if sold%ordersUnpaidEvery == 0 {
			continue // this buyer never pays: one in three of those who bought
		}
		if err := pay(w, ins[i%len(ins)], order); err != nil {
			return lab.Row{}, false, err
		}
		paid++
	}
	w.Note("%s: %d sold, %d paid; waiting %s for the rest to expire", s.Label, sold, paid, lab.DurWords(ordersTimeout))
	audit, err := w.WaitAudit(s, func(a client.Audit) bool { return a.UnitsReturned >= sold-paid }, ordersTimeout+10*time.Second)
	if err != nil {
		return lab.Row{}, false, err
	}
	returned := audit.UnitsReturned
	// Returned units are on sale on every instance within 1 s of their
	// return (the contract): under reserve they reach the Redis counter
	// after the database's COMMIT, and each instance hears of them.
	if err := lab.Sleep(w.Context(), time.Second); err != nil {
		return lab.Row{}, false, err
	}
	second := w.Crowd(w.Context(), s, ins, ordersBuyers, 16, o)
	var resold int64
	for _, a := range second {
		if a.Created() {
			resold++
		}
	}
	// Under reserve the resold orders are written moments after their 202s.
	if audit, err = w.FinishWhen(s, func(a client.Audit) bool { return a.UnitsSold >= paid+resold }, 10*time.Second); err != nil {
		return lab.Row{}, false, err
	}
	row := lab.Row{Key: strategy, Series: s.ID, Cells: []string{strategy, fmt.Sprint(sold), fmt.Sprint(paid),
		fmt.Sprint(returned), fmt.Sprint(resold), fmt.Sprint(audit.Stock), auditWords(audit)}}
	ok := audit.Held() && sold == ordersStock && returned == sold-paid && resold == returned && audit.Stock == 0 &&
		audit.UnitsSold == paid+resold
	row.Judge(audit, "UNITS LOST OR RETURNED TWICE", "every unit sold, returned and resold once")
	if !ok && audit.Held() {
		row.Flaw, row.Verdict = true, "UNITS LOST OR RETURNED TWICE"
	}
	return row, ok, nil
}

// pay pays order through in: by the payment provider's signed callback
// when the world runs with SECKILL_PAYMENT_SECRET (as a shop's provider
// pays), else as its buyer.
func pay(w *lab.World, in *lab.Instance, order client.Order) error {
	var err error
	if secret := w.PaymentSecret(); secret != "" {
		_, err = in.Client.PayByCallback(w.Context(), secret, fmt.Sprintf("pay-%d", order.OrderID), order.OrderID)
	} else {
		_, err = in.Client.Pay(w.Context(), order.OrderID, order.UserID)
	}
	if err != nil {
		return fmt.Errorf("scenario: pay order %d: %w", order.OrderID, err)
	}
	return nil
}

// auditWords is an audit in a cell: consistent or not.
func auditWords(a client.Audit) string {
	if a.Consistent {
		return "consistent"
	}
	return "INCONSISTENT"
}
