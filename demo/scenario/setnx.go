package scenario

import (
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
)

// setnx's scenarios: instance 2's clock runs a minute ahead of instance
// 1's. The lease is long enough that nothing overruns it unless a story
// says so.
const (
	clockLease = 2 * time.Second
	clockAhead = time.Minute
	// clockWork is buyer A's work inside the lock: within the lease.
	clockWork = 1500 * time.Millisecond
	// unlockLease is setnx's lease in setnx-unlock: longer than both
	// buyers' work, so that nothing but A's unlock can let C in, with room
	// for a loaded machine (at 4 s, A's hold once outlasted it in CI, and
	// A's unlock, judging its lease run out, spared B's lock).
	unlockLease = 8 * time.Second
	// unlockWorkA is buyer A's work under setnx in setnx-unlock: within
	// the lease, so that A's unlock still believes it holds, and long
	// enough for B to take the lock over meanwhile.
	unlockWorkA = 1500 * time.Millisecond
	// unlockWorkB is buyer B's work under setnx in setnx-unlock: B still
	// holds long after A has finished.
	unlockWorkB = 3 * time.Second
	// unlockTokenPauseA is how long buyer A is paused under token in
	// setnx-unlock: past the lease, so that B can take the lock over at
	// all (a pause stops the watchdog that would renew it).
	unlockTokenPauseA = 3 * time.Second
	// unlockTokenAfter is when B asks under token: past A's lease.
	unlockTokenAfter = clockLease + 400*time.Millisecond
	// unlockTokenWorkB is B's work under token: within its own lease, and
	// past the end of A's work.
	unlockTokenWorkB = 1200 * time.Millisecond
)

func clockScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "setnx-clock",
		Title: "SETNX AND A CLOCK THAT RUNS AHEAD: two holders of one lock",
		Shows: "a client whose clock runs ahead takes setnx's live lock; token reads no clock",
		Story: fmt.Sprintf("The classic SETNX recipe stores the lock's expiry time in the key and "+
			"every client compares it with its own clock. Instance 2's clock runs %s ahead. "+
			"Buyer A takes the lock on instance 1 and works %s (the lease is %s); buyer B "+
			"then asks on instance 2. One unit is on sale.", lab.DurWords(clockAhead), lab.DurWords(clockWork),
			lab.DurWords(clockLease)),
		Run: runClock,
	}
}

// skewed starts two instances with lease: instance 2's setnx lock reads a
// clock a minute ahead.
func skewed(w *lab.World, lease time.Duration) (*lab.Instance, *lab.Instance, error) {
	ahead := &lab.Clock{}
	ahead.Jump(clockAhead)
	one, err := w.StartInstances(1, lab.Setup{TTL: lease})
	if err != nil {
		return nil, nil, err
	}
	two, err := w.StartInstances(1, lab.Setup{TTL: lease, Clock: ahead})
	if err != nil {
		return nil, nil, err
	}
	return one[0], two[0], nil
}

func runClock(w *lab.World) (*lab.Result, error) {
	one, two, err := skewed(w, clockLease)
	if err != nil {
		return nil, err
	}
	res := &lab.Result{Columns: []string{"LOCK", "FENCING", "BUYER A", "BUYER B (CLOCK AHEAD)", "LEFT", "VERDICT"}}
	for _, r := range []lockCase{{"setnx", false}, {"setnx", true}, {"token", false}} {
		key := r.key()
		s, err := w.NewSeries(key, key, one, 1)
		if err != nil {
			return nil, err
		}
		o := client.Override{Strategy: r.lock, Fencing: fencing(r.fencing)}
		w.Note("%s: buyer A takes the lock on instance 1", key)
		a, err := w.Holder(s, one, working(o, clockWork))
		if err != nil {
			return nil, err
		}
		w.Note("%s: buyer B asks on instance 2, whose clock runs ahead", key)
		b := w.Buy(w.Context(), s, two, o)
		aa := <-a
		audit, err := w.Finish(s)
		if err != nil {
			return nil, err
		}
		both := b.Took > 0 && beside(b, aa)
		row := lab.Row{Key: key, Series: s.ID, Flaw: !audit.Held(),
			Cells: []string{r.lock, onOff(r.fencing), aa.String(), b.String(), fmt.Sprint(audit.Stock)}}
		row.Verdict = holders{"B took A's live lock", "fencing refused A's write", "B waited for A"}.verdict(audit, both)
		res.Add(row, r.expected(row.Flaw, both))
	}
	res.Notes = []string{
		"setnx: B's clock said A's expiry had passed, so B's GETSET took the lock A still held.",
		"token: Redis expires the key; no client clock is read, and B waits for A's release.",
	}
	return res, nil
}

func unlockScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "setnx-unlock",
		Title: "AN UNLOCK THAT DELETES ANOTHER HOLDER'S LOCK",
		Shows: "setnx's plain DEL frees a lock it no longer owns; token's compare-and-delete does not",
		Story: fmt.Sprintf("Buyer B takes buyer A's lock over while A still works: under setnx "+
			"because B's clock runs %s ahead (A works %s of its %s lease), under token because A is "+
			"paused %s (its watchdog too), past its %s lease. Then A finishes and unlocks, and buyer C "+
			"arrives while B still works. Two units are on sale.", lab.DurWords(clockAhead), lab.DurWords(unlockWorkA),
			lab.DurWords(unlockLease), lab.DurWords(unlockTokenPauseA), lab.DurWords(clockLease)),
		Run: runUnlock,
	}
}

func runUnlock(w *lab.World) (*lab.Result, error) {
	setnxOne, setnxTwo, err := skewed(w, unlockLease)
	if err != nil {
		return nil, err
	}
	tokenOne, tokenTwo, err := skewed(w, clockLease)
	if err != nil {
		return nil, err
	}
	res := &lab.Result{Columns: []string{"LOCK", "FENCING", "A", "B", "C", "LEFT", "VERDICT"}}
	for _, r := range []lockCase{{"setnx", false}, {"setnx", true}, {"token", false}} {
		one, two := setnxOne, setnxTwo
		if r.lock == "token" {
			one, two = tokenOne, tokenTwo
		}
		row, expected, err := unlockRow(w, r, one, two)
		if err != nil {
			return nil, err
		}
		res.Add(row, expected)
	}
	res.Notes = []string{
		"setnx: A's unlock checks its own expiry by its own clock, then DELs the key whoever holds it.",
		"token: the Lua compare-and-delete removes the key only while it holds A's token.",
	}
	return res, nil
}

// lockCase is a row of setnx's scenarios: a lock, with fencing or not.
type lockCase struct {
	lock    string
	fencing bool
}

// key names the row.
func (r lockCase) key() string { return fmt.Sprintf("%s fencing=%s", r.lock, onOff(r.fencing)) }

// expected says a round went as the lesson says, from whether the stock
// was oversold (flaw) and a second buyer held the lock beside the first
// (both): token keeps the second out, setnx lets it in, and with fencing
// the stock holds all the same.
func (r lockCase) expected(flaw, both bool) bool {
	switch {
	case r.lock == "token":
		return !flaw && !both
	case r.fencing:
		return !flaw && both
	}
	return flaw && both
}

// unlockRow plays setnx-unlock under r on instances one and two (two's
// clock ahead) and judges it: the row, and whether the lock did what it
// should (setnx without fencing oversells, with fencing refuses a write,
// token keeps C out).
func unlockRow(w *lab.World, r lockCase, one, two *lab.Instance) (lab.Row, bool, error) {
	key := r.key()
	s, err := w.NewSeries(key, key, one, 2)
	if err != nil {
		return lab.Row{}, false, err
	}
	aa, bb, c, err := playUnlock(w, s, r, one, two)
	if err != nil {
		return lab.Row{}, false, err
	}
	audit, err := w.Finish(s)
	if err != nil {
		return lab.Row{}, false, err
	}
	cIn := beside(c, bb)
	row := lab.Row{Key: key, Series: s.ID, Flaw: !audit.Held(),
		Cells: []string{r.lock, onOff(r.fencing), aa.Short(), bb.Short(), c.Short(), fmt.Sprint(audit.Stock)}}
	row.Verdict = holders{"A deleted B's lock, C got in", "C got in, fencing refused " + refused(aa, bb, c),
		"A's unlock spared B's lock"}.verdict(audit, cIn)
	return row, r.expected(row.Flaw, cIn), nil
}

// playUnlock plays setnx-unlock's story of s under r: buyer A takes the
// lock on one, B takes it over on two, A finishes and unlocks, and C
// arrives on one while B still works. It returns A's, B's and C's answers.
func playUnlock(w *lab.World, s *lab.Series, r lockCase, one, two *lab.Instance) (aa, bb, c lab.Answer, err error) {
	key := r.key()
	o := client.Override{Strategy: r.lock, Fencing: fencing(r.fencing)}
	// Under token, A is paused: a slow holder's watchdog would renew
	// its lease, a paused one's cannot.
	aOver, bOver := working(o, unlockWorkA), working(o, unlockWorkB)
	if r.lock == "token" {
		aOver, bOver = o, working(o, unlockTokenWorkB)
		aOver.Pause = unlockTokenPauseA
	}
	w.Note("%s: buyer A takes the lock on instance 1", key)
	a, err := w.Holder(s, one, aOver)
	if err != nil {
		return aa, bb, c, err
	}
	if r.lock == "token" {
		w.Note("%s: A's lease runs out while A is paused", key)
		if err := lab.Sleep(w.Context(), unlockTokenAfter); err != nil {
			return aa, bb, c, err
		}
	}
	w.Note("%s: buyer B takes the lock over on instance 2", key)
	b, err := w.Holder(s, two, bOver)
	if err != nil {
		return aa, bb, c, err
	}
	aa = <-a
	w.Note("%s: A has finished and unlocked; buyer C arrives", key)
	c = w.Buy(w.Context(), s, one, o)
	bb = <-b
	return aa, bb, c, nil
}

// refused names the buyers among A, B and C whose write fencing refused:
// "B", "A and B".
func refused(as ...lab.Answer) string {
	var names []string
	for i, a := range as {
		if a.Code == "lock_lost" {
			names = append(names, string(rune('A'+i)))
		}
	}
	if len(names) == 0 {
		return "nobody"
	}
	return strings.Join(names, " and ")
}

// answeredBefore says a's answer came before b's.
func answeredBefore(a, b lab.Answer) bool { return a.Sent.Add(a.Took).Before(b.Sent.Add(b.Took)) }

// beside says b held the lock beside a: b answered first, and it sold or
// was fenced off (lock_lost).
func beside(b, a lab.Answer) bool {
	return answeredBefore(b, a) && (b.Created() || b.Code == "lock_lost")
}

// holders are a story's words for how it went when a later buyer may have
// held the lock beside an earlier one: how the two holders oversold, how
// the stock held with two (fencing refused a write), how it held with one.
type holders struct{ oversold, fenced, alone string }

// verdict says how the story went, from the audit and whether the later
// buyer held the lock beside the earlier one (both).
func (h holders) verdict(audit client.Audit, both bool) string {
	switch {
	case !audit.Held() && both:
		return "OVERSOLD: " + h.oversold
	case !audit.Held():
		return fmt.Sprintf("OVERSOLD by %d", audit.OversoldUnits)
	case both:
		return "held: " + h.fenced
	}
	return "held: " + h.alone
}

// working is o with work inside the lock (hold_ms).
func working(o client.Override, work time.Duration) client.Override {
	o.Hold = work
	return o
}
