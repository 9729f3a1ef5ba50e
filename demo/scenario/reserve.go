package scenario

import (
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
	"github.com/seckill/seckill/store"
)

// The reserve scenario: the industry's path beside Redlock, then the
// reserve Redis restarted under promises not yet written.
const (
	// reserveStretch is how long each strategy sells in the rate race.
	reserveStretch = 1500 * time.Millisecond
	// reserveBuyers buy at once in the rate race.
	reserveBuyers = 32
	// reserveStock is more than the race can sell.
	reserveStock = 100_000
	// promisedStock is the product of the restarts; promised of its
	// units are reserved (and not written) before the restart, then
	// lateBuyers try for the rest.
	promisedStock = 20
	promised      = 10
	lateBuyers    = 25
)

func reserveScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "reserve",
		Title: "RESERVE: NO LOCK, A REDIS COUNTER, THE ORDERS WRITTEN BEHIND",
		Shows: "reserve beside redlock, and the promises a Redis restart loses without an fsync'd AOF",
		Story: fmt.Sprintf("%d buyers on two instances buy for %s under redlock, then under reserve: a "+
			"Lua script takes the unit from a counter in Redis and answers 202, and the writers write "+
			"the orders behind it. Then %d units of %d are reserved while no writer runs, and the "+
			"reserve Redis is killed and started again: without persistence, then with appendfsync "+
			"always. A writer starts, and %d more buyers come.",
			reserveBuyers, lab.DurWords(reserveStretch), promised, promisedStock, lateBuyers),
		Faults: true,
		Run:    runReserve,
	}
}

func runReserve(w *lab.World) (*lab.Result, error) {
	ins, err := w.StartInstances(2, lab.Setup{})
	if err != nil {
		return nil, err
	}
	res := &lab.Result{Columns: []string{"RUN", "SOLD/S", "202s", "KEPT", "LOST", "SOLD", "LEFT", "VERDICT"}}
	var unread int64
	for _, st := range []string{"redlock", "reserve"} {
		row, cutOff, ok, err := reserveRace(w, ins, st)
		if err != nil {
			return nil, err
		}
		res.Add(row, ok)
		unread += cutOff
	}
	res.Notes = []string{"A 202 is a promise: the order is written moments later, exactly once, whichever " +
		"instance's writer takes it. It survives an instance or the database going down; it does not " +
		"survive a Redis that forgets what it acknowledged. The service then derives the counter again " +
		"from the database, and never oversells."}
	if unread > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("reserve sold %d more than the 202s counted: the buyers "+
			"cut off at the end of the %s had their reservations made and written, their answers unread.",
			unread, lab.DurWords(reserveStretch)))
	}

	empty, err := store.StartMiniRedisNodes(1)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	w.OnClose(empty.Close)
	row, ok, err := reserveRestart(w, "reserve, no persistence", empty.Addrs()[0],
		func() error { return empty.Restart(0) }, false)
	if err != nil {
		return nil, err
	}
	res.Add(row, ok)

	aof, err := lab.StartRedisServer(w.Context())
	switch {
	case errors.Is(err, exec.ErrNotFound):
		res.Notes = append(res.Notes, "The embedded Redis cannot persist, and no redis-server is installed "+
			"(apt-get install redis-server): the appendfsync always run is left out.")
		return res, nil
	case err != nil:
		return nil, err
	}
	w.OnClose(aof.Stop)
	row, ok, err = reserveRestart(w, "reserve, appendfsync always", aof.Addr, aof.Restart, true)
	if err != nil {
		return nil, err
	}
	res.Add(row, ok)
	return res, nil
}

// reserveRace sells one product under strategy for reserveStretch on
// ins, then waits for the orders: the row, how many orders outnumber the
// 202s seen (buyers cut off at the end), and whether it held.
func reserveRace(w *lab.World, ins []*lab.Instance, strategy string) (lab.Row, int64, bool, error) {
	s, err := w.NewSeries(strategy, strategy, ins[0], reserveStock)
	if err != nil {
		return lab.Row{}, 0, false, err
	}
	w.Note("%s: %d buyers for %s", strategy, reserveBuyers, lab.DurWords(reserveStretch))
	as := w.Stream(w.Context(), s, ins, reserveStretch, reserveBuyers, 0, client.Override{Strategy: strategy})
	last := time.Now()
	audit, err := w.Finish(s)
	if err != nil {
		return lab.Row{}, 0, false, err
	}
	written := time.Since(last)
	made := lab.Count(as, "201") + lab.Count(as, "202")
	rate := float64(made) / reserveStretch.Seconds()
	row := lab.Row{Key: strategy, Series: s.ID,
		Cells: []string{strategy, fmt.Sprintf("%.0f", rate), "-", "-", "-", fmt.Sprint(audit.UnitsSold), fmt.Sprint(audit.Stock)}}
	fine, cutOff := "held", int64(0)
	if promises := int64(lab.Count(as, "202")); promises > 0 {
		// The buyers cut off at the end of the stretch hung up on their
		// answers: their reservations were made and are written too, so
		// the orders may outnumber the 202s seen, never the other way.
		kept := min(promises, audit.UnitsSold)
		row.Cells[2], row.Cells[3], row.Cells[4] = fmt.Sprint(promises), fmt.Sprint(kept), fmt.Sprint(promises-kept)
		row.Flaw = kept < promises
		cutOff = audit.UnitsSold - kept
		fine = fmt.Sprintf("held: orders in %s", ms(written))
	}
	row.Judge(audit, "promises not written", fine)
	return row, cutOff, !row.Flaw && made > 0, nil
}

// reserveRestart reserves promised units of a product of promisedStock on
// an instance with no writer, its reserve Redis at addr, restarts that
// Redis, then starts a writer and sends lateBuyers more: the row, and
// whether it went as the lesson says (keeps says every promise should be
// kept; without it, every one is lost and nothing is oversold).
func reserveRestart(w *lab.World, label, addr string, restart func() error, keeps bool) (lab.Row, bool, error) {
	seller, err := w.StartOwn(lab.Setup{Reserve: addr, NoWriter: true})
	if err != nil {
		return lab.Row{}, false, err
	}
	s, err := w.NewSeries(label, label, seller, promisedStock)
	if err != nil {
		return lab.Row{}, false, err
	}
	o := client.Override{Strategy: "reserve"}
	w.Note("%s: %d buyers, no writer running", label, promised)
	var before, after []string
	for range promised {
		if a := w.Buy(w.Context(), s, seller, o); a.RequestID != "" {
			before = append(before, a.RequestID)
		}
	}
	w.Note("%s: the reserve Redis is killed and started again", label)
	if err := restart(); err != nil {
		return lab.Row{}, false, err
	}
	if _, err := w.StartOwn(lab.Setup{Reserve: addr}); err != nil {
		return lab.Row{}, false, err
	}
	w.Note("%s: a writer runs; %d more buyers", label, lateBuyers)
	for range lateBuyers {
		if a := w.Buy(w.Context(), s, seller, o); a.RequestID != "" {
			after = append(after, a.RequestID)
		}
	}
	kept, lost, err := w.PromisesOf(seller, before)
	if err != nil {
		return lab.Row{}, false, err
	}
	if _, lostAfter, err := w.PromisesOf(seller, after); err != nil || lostAfter > 0 {
		return lab.Row{}, false, errors.Join(err, fmt.Errorf("scenario: %s: %d promises made after the restart lost", label, lostAfter))
	}
	s.SetBroken(lost)
	audit, err := w.Finish(s)
	if err != nil {
		return lab.Row{}, false, err
	}
	row := lab.Row{Key: label, Series: s.ID, Flaw: lost > 0,
		Cells: []string{label, "-", fmt.Sprint(len(before)), fmt.Sprint(kept), fmt.Sprint(lost), fmt.Sprint(audit.UnitsSold), fmt.Sprint(audit.Stock)}}
	row.Judge(audit, fmt.Sprintf("%d lost; none oversold", lost), "none lost")
	if keeps {
		return row, !row.Flaw && kept == promised && audit.Held(), nil
	}
	return row, lost == promised && audit.Held() && audit.Stock == 0, nil
}
