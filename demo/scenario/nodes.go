package scenario

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
)

// The Redis node faults. Node 1 (index 0) is the one setnx and token live
// on; redlock uses all three.
const (
	// downStretch is each stretch of the node-down sale: all up, node 1
	// down, node 1 back.
	downStretch = 1500 * time.Millisecond
	// downBuyers buy each product at a time, each pausing downGap between
	// purchases: a steady trickle, not a flood of refusals.
	downBuyers = 4
	downGap    = 20 * time.Millisecond
	// downStock is more than the stretches can sell.
	downStock = 5000

	// restartLease is long enough that nothing overruns it: the second
	// holder of node-restart comes from the restart alone.
	restartLease = 5 * time.Second
	restartWork  = 2500 * time.Millisecond
)

func nodeDownScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "node-down",
		Title: "A REDIS NODE GOES DOWN: one node against a majority",
		Shows: "Redis node 1 stops: token stops selling, redlock goes on with 2 of 3 nodes",
		Story: fmt.Sprintf("Buyers buy under token (its one node: Redis node 1) and under redlock "+
			"(a majority of nodes 1, 2 and 3), on two instances, %s with every node up. Then node 1 "+
			"stops for %s; then it starts again, empty, for %s more.",
			lab.DurWords(downStretch), lab.DurWords(downStretch), lab.DurWords(downStretch)),
		Faults: true,
		Run:    runNodeDown,
	}
}

func runNodeDown(w *lab.World) (*lab.Result, error) {
	ins, err := w.StartInstances(2, lab.Setup{})
	if err != nil {
		return nil, err
	}
	locks := []string{"token", "redlock"}
	all := make([]*lab.Series, len(locks))
	for i, lock := range locks {
		if all[i], err = w.NewSeries(lock, lock, ins[0], downStock); err != nil {
			return nil, err
		}
	}
	up, down, back, err := playNodeDown(w, ins, locks, all)
	if err != nil {
		return nil, err
	}
	res := &lab.Result{Columns: []string{"LOCK", "NEEDS", "UP", "NODE 1 DOWN", "BACK", "503 WHILE DOWN", "VERDICT"}}
	for i, lock := range locks {
		audit, err := w.Finish(all[i])
		if err != nil {
			return nil, err
		}
		res.Add(nodeDownRow(lock, all[i], audit, up[i], down[i], back[i]))
	}
	res.Notes = []string{
		"UP, NODE 1 DOWN, BACK: units sold in each stretch. A node down costs the single-node locks " +
			"their service (503 unavailable, nothing half-written); Redlock sells on while a majority answers.",
	}
	return res, nil
}

// playNodeDown runs the buyers of each series of all (under the lock of
// the same index) on ins for a stretch with every node up, one with node 1
// stopped, and one with node 1 started again, empty: the answers of each
// stretch, series by series.
func playNodeDown(w *lab.World, ins []*lab.Instance, locks []string, all []*lab.Series) (up, down, back [][]lab.Answer, err error) {
	// stretch runs the buyers of every product for downStretch.
	stretch := func() [][]lab.Answer {
		out := make([][]lab.Answer, len(all))
		var wg sync.WaitGroup
		for i, s := range all {
			wg.Go(func() {
				out[i] = w.Stream(w.Context(), s, ins, downStretch, downBuyers, downGap, client.Override{Strategy: locks[i]})
			})
		}
		wg.Wait()
		return out
	}
	w.Note("every Redis node is up")
	up = stretch()
	w.Note("Redis node 1 stops")
	if err := w.Nodes().Stop(0); err != nil {
		return nil, nil, nil, err
	}
	down = stretch()
	w.Note("Redis node 1 starts again, empty")
	if err := w.Nodes().Start(0); err != nil {
		return nil, nil, nil, err
	}
	back = stretch()
	return up, down, back, w.Context().Err()
}

// nodeDownRow judges node-down under lock, from its series' audit and the
// answers of each stretch: the row, and whether the lock did what it
// should (token stops while its node is down, redlock goes on).
func nodeDownRow(lock string, s *lab.Series, audit client.Audit, up, down, back []lab.Answer) (lab.Row, bool) {
	needs := "node 1 alone"
	if lock == "redlock" {
		needs = "2 of 3 nodes"
	}
	sold := func(as []lab.Answer) int { return lab.Count(as, "201") }
	refused := lab.Count(down, "503 unavailable")
	row := lab.Row{Key: lock, Series: s.ID, Flaw: sold(down) == 0,
		Cells: []string{lock, needs, fmt.Sprint(sold(up)), fmt.Sprint(sold(down)),
			fmt.Sprint(sold(back)), fmt.Sprint(refused)}}
	row.Judge(audit, "stopped: its one node was down", "went on: 2 of 3 is a majority")
	// Both sold with every node up and again once node 1 was back.
	went := sold(up) > 0 && sold(back) > 0 && audit.Held()
	if lock == "token" {
		return row, went && row.Flaw && refused > 0
	}
	return row, went && !row.Flaw
}

func nodeRestartScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "node-restart",
		Title: "A REDIS NODE RESTARTS EMPTY UNDER REDLOCK: a second majority",
		Shows: "a node restarted without persistence lets Redlock grant a second majority",
		Story: fmt.Sprintf("Redis node 3 is down when buyer A takes the redlock on instance 1: A "+
			"holds it on nodes 1 and 2, a majority, and works %s (the lease is %s). Node 3 comes "+
			"back, and node 2 crashes and restarts empty (no persistence). Buyer B then asks on "+
			"instance 2. One unit is on sale, with fencing off, then on.",
			lab.DurWords(restartWork), lab.DurWords(restartLease)),
		Faults: true,
		Run:    runNodeRestart,
	}
}

func runNodeRestart(w *lab.World) (*lab.Result, error) {
	ins, err := w.StartInstances(2, lab.Setup{TTL: restartLease})
	if err != nil {
		return nil, err
	}
	res := &lab.Result{Columns: []string{"LOCK", "FENCING", "A (NODES 1, 2)", "B (ASKS LATER)", "LEFT", "VERDICT"}}
	for _, on := range []bool{false, true} {
		key := "redlock fencing=" + onOff(on)
		s, err := w.NewSeries(key, key, ins[0], 1)
		if err != nil {
			return nil, err
		}
		o := client.Override{Strategy: "redlock", Fencing: fencing(on)}
		w.Note("%s: node 3 is down; buyer A takes the lock on nodes 1 and 2", key)
		if err := w.Nodes().Stop(2); err != nil {
			return nil, err
		}
		a, err := w.Holder(s, ins[0], working(o, restartWork))
		if err != nil {
			return nil, errors.Join(err, w.Nodes().Start(2))
		}
		w.Note("%s: node 3 is back; node 2 restarts empty", key)
		if err := errors.Join(w.Nodes().Start(2), w.Nodes().Restart(1)); err != nil {
			return nil, err
		}
		w.Note("%s: buyer B asks on instance 2", key)
		b := w.Buy(w.Context(), s, ins[1], o)
		aa := <-a
		audit, err := w.Finish(s)
		if err != nil {
			return nil, err
		}
		res.Add(restartRow(key, s, on, aa, b, audit))
		if err := w.Settle(); err != nil {
			return nil, err
		}
	}
	res.Notes = []string{"Redlock counts on nodes that keep what they granted: a node that restarts " +
		"empty (no fsync'd AOF, no delayed restart) can hand the lock out again. Fencing keeps the " +
		"stock exact even then."}
	return res, nil
}

// restartRow judges node-restart with fencing on or off, from A's and B's
// answers and the audit: the row, and whether redlock did what it should
// (without fencing a second majority oversells, with fencing the stock
// holds).
func restartRow(key string, s *lab.Series, on bool, aa, b lab.Answer, audit client.Audit) (lab.Row, bool) {
	both := beside(b, aa)
	row := lab.Row{Key: key, Series: s.ID, Flaw: !audit.Held(),
		Cells: []string{"redlock", onOff(on), aa.String(), b.String(), fmt.Sprint(audit.Stock)}}
	row.Verdict = holders{"a second majority", "two holders, A fenced off", "B waited, one majority"}.verdict(audit, both)
	if on {
		return row, !row.Flaw
	}
	return row, row.Flaw && both
}
