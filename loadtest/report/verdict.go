package report

import "fmt"

// Failures says why the run should exit non-zero: a strategy marked safe
// broke the stock invariant (over a catalogue, each product that broke it
// is named) or left a history that is not linearizable, a history could
// not be checked, a promise (a 202) was not kept, whatever the strategy,
// the audit disagrees with the driver's count of 201s and kept promises
// or could not be read, an instance went down, or no request got through.
// It is empty when all went well.
func (r *Report) Failures() []string {
	var out []string
	for _, res := range r.Results {
		out = append(out, res.failures()...)
	}
	return out
}

// name is how the failures call the result's strategy.
func (r Result) name() string {
	if r.Strategy == "" {
		return "default strategy"
	}
	return r.Strategy
}

// failures are the reasons this result fails the run.
func (r Result) failures() []string {
	var out []string
	name := r.name()
	if r.Requests > 0 && r.Outcomes[OutcomeTransport] == r.Requests {
		msg := fmt.Sprintf("%s: no request got through (%d transport errors)", name, r.Requests)
		if len(r.Samples) > 0 {
			msg += ", e.g. " + r.Samples[0]
		}
		out = append(out, msg)
	}
	for _, in := range r.Instances {
		if in.Down {
			out = append(out, fmt.Sprintf("%s: instance %s went down during the run (%d of its %d requests got no answer): %s",
				name, in.URL, in.Transport, in.Requests, in.Error))
		}
	}
	if p := r.Promises; p != nil && p.Broken() > 0 {
		were := "were"
		if p.Broken() == 1 {
			were = "was"
		}
		msg := fmt.Sprintf("%s: %d of its %d promises (202s) %s not kept: %d failed (refused by the database), %d lost (purchase_not_found), %d still pending when the drain of %s ran out",
			name, p.Broken(), p.Made, were, p.Failed, p.Lost, p.Pending, p.DrainLimit)
		if len(p.Samples) > 0 {
			msg += "; e.g. " + p.Samples[0]
		}
		out = append(out, msg)
	}
	if r.AuditError != "" {
		out = append(out, fmt.Sprintf("%s: the audit after the run failed: %s", name, r.AuditError))
	}
	if !r.Audited {
		return out
	}
	if !r.CountsAgree {
		msg := fmt.Sprintf("%s: counts disagree: the audit gained %d orders (%d units) during the run, the driver saw %d 201s",
			name, r.RunOrders, r.RunUnits, r.Successes+r.warmSuccesses())
		if p := r.Promises; p != nil {
			created := r.Successes + r.warmSuccesses() - p.Made
			msg = fmt.Sprintf("%s: counts disagree: the audit gained %d orders (%d units) during the run, the driver saw %d 201s and %d promises kept",
				name, r.RunOrders, r.RunUnits, created, p.Kept)
			if late := r.RunOrders - int64(created+p.Kept); p.Pending > 0 && late > 0 && late <= int64(p.Pending) {
				// Most likely not a count gone wrong: the audit, read after
				// the drain ended, found promises written after it.
				msg += fmt.Sprintf("; the %d it did not see kept are as many as %d of the %d promises still pending "+
					"when the drain of %s ran out, which became orders after it if so (a longer -drain sees them kept)",
					late, late, p.Pending, p.DrainLimit)
			}
		}
		if n := r.Outcomes[OutcomeTransport]; n > 0 {
			msg += fmt.Sprintf(" (and %d requests without an answer)", n)
		}
		if n := r.Codes["503 outcome_unknown"]; n > 0 {
			msg += fmt.Sprintf(" (and %d answers outcome_unknown, each of which may have made one)", n)
		}
		out = append(out, msg)
	}
	if h := r.History; h != nil && !h.Checked {
		out = append(out, fmt.Sprintf("%s: its history could not be checked: %s", name, h.Error))
	}
	if h := r.History; h != nil && h.Checked && r.Safe && !h.Linearizable {
		out = append(out, fmt.Sprintf("%s (marked safe): its history is not linearizable: %s", name, h.Violation))
	}
	if r.Safe && !r.Audit.Held() {
		out = append(out, fmt.Sprintf("%s (marked safe) broke the stock invariant: initial stock %d, final stock %d, units sold %d, oversold %d, consistent %t",
			name, r.Audit.InitialStock, r.Audit.Stock, r.Audit.UnitsSold, r.Audit.OversoldUnits, r.Audit.Consistent))
	}
	if r.Safe && r.Catalogue != nil {
		for _, b := range r.Catalogue.Broken {
			out = append(out, name+": "+b.String())
		}
	}
	return out
}

func (r Result) warmSuccesses() int {
	if r.Warmup == nil {
		return 0
	}
	return r.Warmup.Successes
}

func (r Result) instanceDown() bool {
	for _, in := range r.Instances {
		if in.Down {
			return true
		}
	}
	return false
}

// Judge sums the result up in a few words, for Verdict: "held", "oversold,
// as expected", "BROKEN: ..." and the like, with the dropped requests if
// any. It reads every figure but Verdict, so the driver calls it once the
// audit and the history check are in.
func (r Result) Judge() string {
	v := "held"
	switch {
	case r.Requests > 0 && r.Outcomes[OutcomeTransport] == r.Requests:
		v = "BROKEN: no answer"
	case r.instanceDown():
		v = "BROKEN: instance down"
	case r.Raw:
		v = "ok"
	case r.AuditError != "":
		v = "BROKEN: audit failed"
	case !r.Audited:
		v = "not audited"
	case r.Promises != nil && r.Promises.Broken() > 0:
		v = "BROKEN: " + plural(r.Promises.Broken(), "promise") + " not kept"
	case !r.CountsAgree:
		v = "BROKEN: counts disagree"
	case r.Safe && r.Audit.OversoldUnits > 0:
		v = fmt.Sprintf("BROKEN: oversold %d", r.Audit.OversoldUnits)
	case r.Safe && !r.Audit.Consistent:
		v = "BROKEN: audit inconsistent"
	case r.Safe && r.History != nil && r.History.Checked && !r.History.Linearizable:
		v = "BROKEN: not linearizable"
	case r.Audit.OversoldUnits > 0:
		v = "oversold, as expected"
	case !r.Audit.Consistent:
		v = "lost updates, as expected"
	case !r.Safe:
		v = "held this time (unsafe)"
	}
	if r.Dropped > 0 {
		v += fmt.Sprintf("; %d dropped", r.Dropped)
	}
	return v
}
