package demo

import (
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/loadtest/client"
)

// The lease overrun: a lease shorter than buyer A's work, and buyer B who
// asks once it has run out.
const (
	// overrunLease leaves Redlock's round room on a loaded machine: it
	// grants only with lease left over once every node has answered.
	overrunLease = time.Second
	// overrunPause is how long buyer A is paused inside the lock: a
	// stop-the-world pause stops the watchdog too, so the lease runs out.
	overrunPause = 3 * time.Second
	// overrunAfter is how long after A took the lock B asks: past A's
	// lease, well before A is done.
	overrunAfter = 1400 * time.Millisecond
)

func overrunScenario() Scenario {
	return Scenario{
		Name:  "lease-overrun",
		Title: "THE LEASE OVERRUN: a paused holder outlives its lock",
		Shows: "a holder paused past its lease: every Redis lock lets a second holder in",
		Story: fmt.Sprintf("The lock's lease is %s; buyer A is paused %s inside it, on instance 1 "+
			"(a stop-the-world pause: the watchdog that renews the lease stops too). "+
			"%s after A took the lock, buyer B asks on instance 2. One unit is on sale, "+
			"under each Redis lock with fencing off, then on.",
			durWords(overrunLease), durWords(overrunPause), durWords(overrunAfter)),
		run: runOverrun,
	}
}

func runOverrun(w *world) (*Result, error) {
	ins, err := w.startInstances(2, setup{ttl: overrunLease})
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: []string{"LOCK", "FENCING", "A (PAUSED)", "B", "LEFT", "VERDICT"}}
	for _, on := range []bool{false, true} {
		locks := []string{"setnx", "token", "redlock"}
		rows := make([]Row, len(locks))
		expected := make([]bool, len(locks))
		// The three locks of a round play at once, each on its product.
		var g errgroup.Group
		for i, lock := range locks {
			key := fmt.Sprintf("%s fencing=%s", lock, onOff(on))
			s, err := w.newSeries(key, key, ins[0], 1)
			if err != nil {
				return nil, err
			}
			g.Go(func() error {
				o := client.Override{Strategy: lock, Fencing: fencing(on)}
				w.note("%s: buyer A takes the lock and is paused", key)
				paused := o
				paused.Pause = overrunPause
				a, err := w.holder(s, ins[0], paused)
				if err != nil {
					return err
				}
				if err := sleep(w.ctx, overrunAfter); err != nil {
					return err
				}
				w.note("%s: A's lease has run out; buyer B asks", key)
				b := w.buy(w.ctx, s, ins[1], o)
				aa := <-a
				audit, err := w.finish(s)
				if err != nil {
					return err
				}
				rows[i], expected[i] = overrunRow(lock, key, s, on, aa, b, audit)
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		for i, row := range rows {
			res.add(row, expected[i])
		}
	}
	res.Notes = []string{"No lock alone survives a holder that outlives its lease: a watchdog renews the " +
		"lease of a holder that works slowly, but not of one that is paused; only the database can refuse " +
		"the late write (fencing)."}
	return res, nil
}

// overrunRow says what happened to one lock: without fencing the lesson
// is an oversell (both wrote), with it A's late write refused.
func overrunRow(lock, key string, s *series, on bool, a, b answer, audit client.Audit) (Row, bool) {
	row := Row{Key: key, Series: s.id, Flaw: !audit.Held(),
		Cells: []string{lock, onOff(on), a.String(), b.String(), fmt.Sprint(audit.Stock)}}
	fenced := a.code == "lock_lost" && b.created()
	switch {
	case row.Flaw:
		row.Verdict = "OVERSOLD: A wrote after B"
	case fenced:
		row.Verdict = "held: fencing refused A's late write"
	default:
		row.Verdict = "held: B did not get in"
	}
	if on {
		return row, !row.Flaw && fenced
	}
	return row, row.Flaw
}
