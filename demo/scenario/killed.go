package scenario

import (
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
)

// The instance that dies holding the lock: how long its product stays
// blocked, with the watchdog's short lease and without it.
const (
	// killWork is buyer A's work when its instance dies: longer than any
	// lease here, so that only the lease frees the product.
	killWork = 10 * time.Second
	// killShortLease is the default lease, enough with the watchdog
	// renewing it for any work.
	killShortLease = 2 * time.Second
	// killLongLease is a lease chosen, without a watchdog, for work of a
	// few seconds not to lose its lock: a dead holder blocks its product
	// until it runs out.
	killLongLease = 8 * time.Second
	// killAfter is how long A has held the lock when its instance dies:
	// past the short lease, so that only a renewed lease still holds then.
	killAfter = killShortLease + killShortLease/4
	// killRetry spaces out the buyers after the kill whose answer came at
	// once (a lock_timeout comes after a whole lock wait).
	killRetry = 50 * time.Millisecond
	// killLimit bounds the wait for the product to sell again.
	killLimit = 30 * time.Second
)

func killScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "killed-holder",
		Title: "AN INSTANCE DIES HOLDING THE LOCK: how long its product stays blocked",
		Shows: "an instance killed while it holds a lock: how long its product stays blocked",
		Story: fmt.Sprintf("Buyer A takes the Redlock lock on one instance and works; %s later that "+
			"instance dies (cut off from every store at once). Buyers on another instance ask for the "+
			"product again and again until one buys: BLOCKED is the time from the death to that sale. "+
			"With the watchdog the lease can be short (%s): it is renewed while A works, and nobody "+
			"renews it once A is dead. Without it, the lease is chosen for slow work not to lose its "+
			"lock (%s here), and a dead holder blocks the product until it runs out.",
			lab.DurWords(killAfter), lab.DurWords(killShortLease), lab.DurWords(killLongLease)),
		Faults: true,
		Run:    runKill,
	}
}

func runKill(w *lab.World) (*lab.Result, error) {
	res := &lab.Result{Columns: []string{"LEASE", "WATCHDOG", "BLOCKED", "BUYERS AFTER THE KILL", "VERDICT"}}
	for _, c := range []killCase{{killShortLease, true}, {killLongLease, false}} {
		k, err := playKill(w, c)
		if err != nil {
			return nil, err
		}
		res.Add(killRow(c, k))
	}
	res.Notes = []string{"A lease is how long a dead holder blocks its product. Without a watchdog it must " +
		"outlast the slowest work; with one it can be short, because only a live holder renews it."}
	return res, nil
}

// killCase is a row of kill: a lease, with a watchdog or not.
type killCase struct {
	lease    time.Duration
	watchdog bool
}

// key names the row.
func (c killCase) key() string { return "watchdog=" + onOff(c.watchdog) }

// killRun is what playKill saw.
type killRun struct {
	series  *lab.Series
	got     string        // what the buyers after the kill got, in order
	blocked time.Duration // from the kill until a buyer after it got a unit
	expires time.Duration // from the kill until A's lease ran out, unrenewed
	audit   client.Audit
}

// playKill plays kill under c: buyer A takes the lock on an instance that
// is killed while A works, and buyers on the survivor ask until one gets
// the unit.
func playKill(w *lab.World, c killCase) (killRun, error) {
	key := c.key()
	s := lab.Setup{TTL: c.lease, Watchdog: &c.watchdog}
	// The survivor first: the live stock is read from the first
	// instance started.
	ins, err := w.StartInstances(1, s)
	if err != nil {
		return killRun{}, err
	}
	survivor := ins[0]
	doomed, kill, err := w.StartKillable(s)
	if err != nil {
		return killRun{}, err
	}
	series, err := w.NewSeries(key, fmt.Sprintf("lease %s, %s", ms(c.lease), key), survivor, 10)
	if err != nil {
		return killRun{}, err
	}
	w.Note("%s: buyer A takes the lock on %s and works", key, doomed.Name)
	a, err := w.Holder(series, doomed, client.Override{Strategy: "redlock", Hold: killWork})
	if err != nil {
		return killRun{}, err
	}
	granted := time.Now()
	if err := lab.Sleep(w.Context(), killAfter); err != nil {
		return killRun{}, err
	}
	w.Note("%s: %s dies holding the lock", key, doomed.Name)
	if err := kill(); err != nil {
		return killRun{}, err
	}
	killed := time.Now()
	got, err := buyUntilSold(w, series, survivor)
	if err != nil {
		return killRun{}, fmt.Errorf("scenario: %s: %w", key, err)
	}
	blocked := time.Since(killed)
	<-a // A's purchase: cut off with its instance
	audit, err := w.Finish(series)
	if err != nil {
		return killRun{}, err
	}
	// A's lease began when it took the lock, a little before granted:
	// unrenewed, it runs out about a lease after that.
	expires := c.lease - killed.Sub(granted)
	return killRun{series: series, got: got, blocked: blocked, expires: expires, audit: audit}, nil
}

// killRow judges kill under c: the row, and whether the lease did what it
// should (with the watchdog, freed within about a lease though renewed
// past the first; without, blocked until the long lease ran out).
func killRow(c killCase, k killRun) (lab.Row, bool) {
	row := lab.Row{Key: c.key(), Series: k.series.ID,
		Cells: []string{fmt.Sprintf("%g s", c.lease.Seconds()), onOff(c.watchdog),
			fmt.Sprintf("%.1f s", k.blocked.Seconds()), k.got}}
	// The one unit sold is the survivor's: A never wrote.
	wrote := k.audit.Held() && k.audit.UnitsSold == 1
	if c.watchdog {
		row.Verdict = "freed within one lease"
		// Still blocked at the kill, past its first lease: renewed.
		return row, wrote && k.blocked >= c.lease/4 && k.blocked <= c.lease+time.Second
	}
	row.Flaw = true
	row.Verdict = "BLOCKED: a dead holder keeps its long lease"
	// Freed when the lease ran out, not before, nor when A's work
	// would have ended (if the kill had not cut it off).
	return row, wrote && k.blocked >= k.expires-time.Second && k.blocked <= k.expires+time.Second
}

// buyUntilSold has buyers on in ask for s's product one after another
// until one gets a unit, and says what they got in order, repeats counted:
// "503 lock_timeout, 201", "3 × 503 unavailable, 201".
func buyUntilSold(w *lab.World, s *lab.Series, in *lab.Instance) (string, error) {
	var (
		got   []string
		last  string
		times int
	)
	flush := func() {
		if times > 1 {
			got = append(got, fmt.Sprintf("%d × %s", times, last))
		} else if times == 1 {
			got = append(got, last)
		}
	}
	start := time.Now()
	for {
		b := w.Buy(w.Context(), s, in, client.Override{Strategy: "redlock"})
		if err := w.Context().Err(); err != nil {
			return "", err
		}
		if b.Created() {
			flush()
			return strings.Join(append(got, "201"), ", "), nil
		}
		if a := b.String(); a == last {
			times++
		} else {
			flush()
			last, times = a, 1
		}
		if time.Since(start) > killLimit {
			flush()
			return "", fmt.Errorf("nothing sold within %s of the kill: %s", killLimit, strings.Join(got, ", "))
		}
		if b.Code != "lock_timeout" {
			if err := lab.Sleep(w.Context(), killRetry); err != nil {
				return "", err
			}
		}
	}
}
