package scenario

import (
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
	"github.com/seckill/seckill/history"
)

// The answers checked: the same sale under none and redlock, every answer
// recorded with when it was asked and answered, then checked against one
// stock counter. An oversold sale cannot be told apart from a correct one
// by any one answer; the history of them all shows it.
const (
	linearStock       = 20
	linearBuyers      = 120
	linearConcurrency = 24
	linearHold        = 20 * time.Millisecond
)

func linearScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "history",
		Title: "EVERY ANSWER TRUE: the buyers' answers checked against one stock counter",
		Shows: "none's answers fit no single stock counter (not linearizable); redlock's do",
		Story: fmt.Sprintf("%d buyers (%d at a time, over two instances) buy %d units under none, then "+
			"under redlock, with %s of work inside the critical section. Every answer is written down "+
			"with when it was asked and when it came. Then a checker looks for one order of the "+
			"purchases, within those times, in which a single stock counter gives every answer that "+
			"was given (linearizability, as loadtest -check does).",
			linearBuyers, linearConcurrency, linearStock, lab.DurWords(linearHold)),
		Run: runLinear,
	}
}

func runLinear(w *lab.World) (*lab.Result, error) {
	ins, err := w.StartInstances(2, lab.Setup{})
	if err != nil {
		return nil, err
	}
	res := &lab.Result{Columns: []string{"STRATEGY", "SOLD", "LEFT", "HISTORY", "VERDICT"}}
	for _, strategy := range []string{"none", "redlock"} {
		s, err := w.NewSeries("history-"+strategy, strategy, ins[0], linearStock)
		if err != nil {
			return nil, err
		}
		began := time.Now()
		as, audit, err := w.SellOut(s, ins, linearBuyers, linearConcurrency, client.Override{Strategy: strategy, Hold: linearHold})
		if err != nil {
			return nil, err
		}
		verdict, err := history.Check(historyOf(s.Product, linearStock, began, as))
		if err != nil {
			return nil, fmt.Errorf("scenario: check the history of %s: %w", strategy, err)
		}
		row := lab.Row{Key: strategy, Series: s.ID, Flaw: !verdict.Linearizable,
			Cells: []string{strategy, fmt.Sprint(audit.UnitsSold), fmt.Sprint(audit.Stock), "linearizable"}}
		switch {
		case row.Flaw:
			row.Cells[3] = "NOT linearizable"
			row.Verdict = fmt.Sprintf("no order of the answers fits one counter (oversold by %d)", audit.OversoldUnits)
			first, _, _ := strings.Cut(verdict.Violation, "\n")
			res.Notes = append(res.Notes, strategy+": "+first)
		default:
			row.Verdict = "every answer fits one stock counter"
		}
		res.Add(row, row.Flaw == (strategy == "none"))
	}
	res.Notes = append(res.Notes, "An audit sees oversell at the end; the history check sees any answer "+
		"that no correct execution could have given, oversold or not (a sold_out while units were "+
		"left, two buyers told the same remaining stock), and names the purchases involved.")
	return res, nil
}

// historyOf is the history of a crowd's answers: the stock at began, when
// no purchase was in flight, then each purchase.
func historyOf(product, stock int64, began time.Time, as []lab.Answer) []history.Line {
	lines := []history.Line{{Product: product, Stock: &stock, TimeNS: began.UnixNano()}}
	for i, a := range as {
		l := history.Line{Product: product, UserID: fmt.Sprint("buyer #", i+1), RequestID: fmt.Sprint("#", i+1),
			Quantity: 1, StartNS: a.Sent.UnixNano(), EndNS: a.Sent.Add(a.Took).UnixNano(), Status: a.Status, Code: a.Code}
		if a.Created() {
			left, id := a.Order.RemainingStock, a.Order.OrderID
			l.UserID = a.Order.UserID
			l.RemainingStock, l.OrderID = &left, &id
		}
		lines = append(lines, l)
	}
	return lines
}
