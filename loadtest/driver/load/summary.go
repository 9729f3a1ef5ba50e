package load

import (
	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill/seckill/loadtest/driver/latency"
	"github.com/seckill/seckill/loadtest/report"
)

// Result sums up what the run measured in a report.Result, without the
// audit: in all, by outcome, by instance, by rate step and by second.
func (t *Tally) Result() report.Result {
	p := t.plan
	raw := !p.Purchase
	res := report.Result{
		Requests:         int(t.total()),
		Outcomes:         outcomeMap(t.counts, raw),
		Dropped:          int(t.dropped),
		Codes:            map[string]int{},
		Elapsed:          t.elapsed,
		MaxSendDelay:     t.maxSendDelay,
		Samples:          t.samples,
		Raw:              raw,
		Latency:          latency.Figures(t.all()),
		LatencyByOutcome: map[string]report.Latency{},
	}
	for k, v := range t.codes {
		res.Codes[k] = int(v)
	}
	successes := func(c [numOutcomes]int64) int {
		if raw {
			return int(c[outOK])
		}
		return int(c[outCreated] + c[outAccepted])
	}
	res.Successes = successes(t.counts)
	if t.counts[outAccepted] > 0 {
		var h *hdrhistogram.Histogram
		latency.Merge(&h, t.hists[outCreated], latency.RunSigFigs)
		latency.Merge(&h, t.hists[outAccepted], latency.RunSigFigs)
		res.SuccessLatency = latency.Figures(h)
	}
	if s := t.elapsed.Seconds(); s > 0 {
		res.Throughput = float64(res.Requests) / s
		res.SuccessThroughput = float64(res.Successes) / s
	}
	for i, h := range t.hists {
		if h != nil {
			res.LatencyByOutcome[outcomeNames[i]] = latency.Figures(h)
		}
	}
	res.Warmup = warmupOf(p, t, raw, successes)
	res.Steps = stepsOf(p, t, raw, successes)
	for _, s := range t.series {
		res.Series = append(res.Series, s.summarize(raw))
	}
	res.Cancels = t.cancels.report()
	for i, tt := range t.targets {
		res.Instances = append(res.Instances, report.Instance{URL: p.Bases[i], Requests: int(tt.answers), Transport: int(tt.transport)})
	}
	return res
}

// warmupOf counts the warmup's answers apart: nil for a plan without one.
func warmupOf(p *Plan, t *Tally, raw bool, successes func([numOutcomes]int64) int) *report.Warmup {
	if p.Warmup() <= 0 {
		return nil
	}
	w := &report.Warmup{Outcomes: outcomeMap(t.warm, raw), Successes: successes(t.warm), Dropped: int(t.warmDropped)}
	for _, n := range t.warm {
		w.Requests += int(n)
	}
	return w
}

// stepsOf sums up each step of an open plan's rates after the warmup: nil
// for a closed plan.
func stepsOf(p *Plan, t *Tally, raw bool, successes func([numOutcomes]int64) int) []report.Step {
	if !p.Open {
		return nil
	}
	var steps []report.Step
	for i, ph := range p.Phases {
		if ph.Warm {
			continue
		}
		st := t.steps[i]
		step := report.Step{Rate: ph.Rate, Scheduled: ph.N, Dropped: int(st.dropped), Outcomes: outcomeMap(st.counts, raw),
			Successes: successes(st.counts), Latency: latency.Figures(st.hist)}
		for _, n := range st.counts {
			step.Requests += int(n)
		}
		step.Throughput = float64(step.Requests) / ph.Length.Seconds()
		steps = append(steps, step)
	}
	return steps
}

// summarize sums up one second of the run: its answers by outcome and by
// column, and its latency.
func (s *secAgg) summarize(raw bool) report.Second {
	sec := report.Second{Second: s.sec, Dropped: int(s.dropped), Outcomes: map[string]int{}}
	for i, n := range s.counts {
		if n > 0 {
			sec.Outcomes[outcomeNames[i]] = int(n)
		}
		sec.Answers += int(n)
		switch outcome(i) {
		case outCreated, outAccepted, outOK:
			sec.Created += int(n)
		case outSoldOut:
			sec.SoldOut += int(n)
		case outLockTimeout, outLockLost:
			sec.LockFailures += int(n)
		default:
			sec.OtherFailures += int(n)
		}
	}
	if raw {
		sec.Created = 0 // the 201 column counts purchases only
	}
	if l := latency.Figures(s.hist); l.Count > 0 {
		sec.P50, sec.P99, sec.Max = l.P50, l.P99, l.Max
	}
	return sec
}

// outcomeMap names the counts of c: every failure that has a column of its
// own, the 201s, and any other that is not 0 (the 202s of reserve, 2xx of
// the raw mode, other).
func outcomeMap(c [numOutcomes]int64, raw bool) map[string]int {
	m := map[string]int{}
	for i, n := range c {
		if n > 0 || (raw && i == int(outOK)) || (!raw && i != int(outOK) && i != int(outOther) && i != int(outAccepted)) {
			m[outcomeNames[i]] = int(n)
		}
	}
	return m
}
