package scenario

import (
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
)

// The lease overrun: a lease shorter than buyer A's work, and buyer B who
// asks once it has run out.
const (
	// overrunLease leaves Redlock's round room on a loaded machine: it
	// grants only with lease left over once every node has answered.
	overrunLease = time.Second
	// overrunWork is how long buyer A works inside the lock, slowly (the
	// watchdog renews the lease) or paused (a stop-the-world pause stops
	// the watchdog too, so the lease runs out).
	overrunWork = 3 * time.Second
	// overrunAfter is how long after A took the lock B asks: past A's
	// lease, well before A is done.
	overrunAfter = 1400 * time.Millisecond
)

func overrunScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "lease-overrun",
		Title: "THE LEASE OVERRUN: slow work, then a paused holder",
		Shows: "slow work past the lease: the watchdog saves it; a pause: only fencing does",
		Story: fmt.Sprintf("The lock's lease is %s. Buyer A, on instance 1, first works %s inside it "+
			"(slow work: the watchdog renews the lease of token and redlock, never setnx's), then, "+
			"on a new unit, is paused %s (a stop-the-world pause: the watchdog stops too). "+
			"%s after A took the lock, buyer B asks on instance 2. One unit is on sale each time, "+
			"under each Redis lock; the pause with fencing off, then on.",
			lab.DurWords(overrunLease), lab.DurWords(overrunWork), lab.DurWords(overrunWork), lab.DurWords(overrunAfter)),
		Run: runOverrun,
	}
}

func runOverrun(w *lab.World) (*lab.Result, error) {
	watchdog := true // renews slow work's lease; a pause stops it
	ins, err := w.StartInstances(2, lab.Setup{TTL: overrunLease, Watchdog: &watchdog})
	if err != nil {
		return nil, err
	}
	res := &lab.Result{Columns: []string{"LOCK", "A", "FENCING", "BUYER A", "B", "LEFT", "VERDICT"}}
	for _, round := range []overrunCase{{false, false}, {true, false}, {true, true}} {
		rows, expected, err := overrunRound(w, ins, round)
		if err != nil {
			return nil, err
		}
		for i, row := range rows {
			res.Add(row, expected[i])
		}
	}
	res.Notes = []string{"A watchdog renews the lease of a holder that works slowly, but not of one that " +
		"is paused: no lock alone survives a holder that outlives its lease; only the database can refuse " +
		"the late write (fencing)."}
	return res, nil
}

// overrunCase is a round of overrun: buyer A works slowly or is paused,
// with fencing or not.
type overrunCase struct {
	pause, fenced bool
}

// overrunRound plays a round under each lock, the three at once, each on
// its product: their rows, and whether each did what it should.
func overrunRound(w *lab.World, ins []*lab.Instance, round overrunCase) ([]lab.Row, []bool, error) {
	locks := []string{"setnx", "token", "redlock"}
	rows := make([]lab.Row, len(locks))
	expected := make([]bool, len(locks))
	var g errgroup.Group
	for i, lock := range locks {
		key := fmt.Sprintf("%s fencing=%s", lock, onOff(round.fenced))
		does := "works"
		if !round.pause {
			key = lock + " works"
		} else {
			does = "paused"
		}
		s, err := w.NewSeries(key, key, ins[0], 1)
		if err != nil {
			return nil, nil, err
		}
		g.Go(func() error {
			a, b, audit, err := playOverrun(w, s, ins, lock, key, does, round)
			if err != nil {
				return err
			}
			rows[i], expected[i] = overrunRow(lock, does, key, s, round.pause, round.fenced, a, b, audit)
			return nil
		})
	}
	return rows, expected, g.Wait()
}

// playOverrun plays overrun's story of s under lock: buyer A takes the
// lock on instance 1 and works slowly or is paused past its lease, and
// buyer B asks on instance 2. It returns A's and B's answers and the audit.
func playOverrun(w *lab.World, s *lab.Series, ins []*lab.Instance, lock, key, does string, round overrunCase) (lab.Answer, lab.Answer, client.Audit, error) {
	o := client.Override{Strategy: lock, Fencing: fencing(round.fenced)}
	w.Note("%s: buyer A takes the lock and %s", key, does)
	slow := o
	if round.pause {
		slow.Pause = overrunWork
	} else {
		slow.Hold = overrunWork
	}
	a, err := w.Holder(s, ins[0], slow)
	if err != nil {
		return lab.Answer{}, lab.Answer{}, client.Audit{}, err
	}
	if err := lab.Sleep(w.Context(), overrunAfter); err != nil {
		return lab.Answer{}, lab.Answer{}, client.Audit{}, err
	}
	w.Note("%s: A's lease was %s; buyer B asks", key, lab.DurWords(overrunLease))
	b := w.Buy(w.Context(), s, ins[1], o)
	aa := <-a
	audit, err := w.Finish(s)
	return aa, b, audit, err
}

// overrunRow says what happened to one lock. Slow work: the watchdog keeps
// token's and redlock's lease (B waits, finds the unit sold), setnx's runs
// out (both write). A pause: without fencing both write, with it A's late
// write is refused.
func overrunRow(lock, does, key string, s *lab.Series, pause, on bool, a, b lab.Answer, audit client.Audit) (lab.Row, bool) {
	row := lab.Row{Key: key, Series: s.ID, Flaw: !audit.Held(),
		Cells: []string{lock, does, onOff(on), a.String(), b.String(), fmt.Sprint(audit.Stock)}}
	fenced := a.Code == "lock_lost" && b.Created()
	kept := a.Created() && b.Code == "sold_out"
	switch {
	case row.Flaw:
		row.Verdict = "OVERSOLD: A wrote after B"
	case fenced:
		row.Verdict = "held: fencing refused A's late write"
	case kept:
		row.Verdict = "held: the watchdog kept A's lease"
	default:
		row.Verdict = "held: B did not get in"
	}
	switch {
	case !pause && lock == "setnx":
		return row, row.Flaw // never renewed: the classic recipe overruns
	case !pause:
		return row, kept
	case on:
		return row, !row.Flaw && fenced
	}
	return row, row.Flaw
}
