package report

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// notes are the lines under the table about one result.
func (r Result) notes(c Settings) []string {
	var out []string
	if r.Promises != nil {
		out = append(out, r.Promises.note())
	}
	if r.Cancels != nil {
		out = append(out, r.Cancels.note(r.RunReturned))
	}
	var other []string
	for _, k := range []string{OutcomeLimitExceeded, OutcomeLockLost, OutcomeTransport} {
		if n := r.Outcomes[k]; n > 0 {
			other = append(other, fmt.Sprintf("%d %s", n, k))
		}
	}
	keys := make([]string, 0, len(r.Codes))
	for k := range r.Codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		other = append(other, fmt.Sprintf("%d × %s", r.Codes[k], k))
	}
	if len(other) > 0 && !r.Raw {
		out = append(out, "other = "+strings.Join(other, ", "))
	}
	if len(r.Samples) > 0 {
		out = append(out, "transport errors, e.g. "+r.Samples[0])
	}
	if r.Warmup != nil {
		out = append(out, fmt.Sprintf("the warmup's %d answers (%d successes) are left out of the figures",
			r.Warmup.Requests, r.Warmup.Successes))
	}
	if r.Dropped > 0 {
		out = append(out, fmt.Sprintf("%d requests dropped: not sent, because all %d were in flight when they were due",
			r.Dropped, c.Concurrency))
	}
	if c.Mode == "open" && r.MaxSendDelay >= time.Millisecond {
		out = append(out, fmt.Sprintf("some requests left up to %s after their intended time; their latency includes the wait",
			dur(r.MaxSendDelay)))
	}
	if len(r.Steps) > 1 {
		parts := make([]string, len(r.Steps))
		for i, s := range r.Steps {
			parts[i] = fmt.Sprintf("%s/s: %s answered/s, %d dropped, p99 %s",
				strconv.FormatFloat(s.Rate, 'f', -1, 64), rate(s.Throughput), s.Dropped, dur(s.Latency.P99))
		}
		out = append(out, "steps: "+strings.Join(parts, "; "))
	}
	return out
}

// hasPromises says some run had 202s.
func (r *Report) hasPromises() bool {
	for _, res := range r.Results {
		if res.Promises != nil {
			return true
		}
	}
	return false
}

// promiseCells are the wide table's promise columns; dashes for a run
// without 202s.
func promiseCells(p *Promises) []string {
	if p == nil {
		return []string{"-", "-", "-", "-", "-", "-", "-"}
	}
	return []string{itoa(p.Made), itoa(p.Kept), itoa(p.Failed), itoa(p.Lost), itoa(p.Pending),
		dur(p.WriteLag.P50), dur(p.WriteLag.P99)}
}

// note is the line under the table about a run's promises.
func (p *Promises) note() string {
	s := fmt.Sprintf("promises (202s): %d made, %d kept, %d failed, %d lost, %d still pending, after a drain of %s (at most %s)",
		p.Made, p.Kept, p.Failed, p.Lost, p.Pending, durOrZero(p.Drain), p.DrainLimit)
	if p.Kept > 0 {
		s += fmt.Sprintf("; write lag p50 %s, p99 %s (upper bounds: polls %s apart)", dur(p.WriteLag.P50), dur(p.WriteLag.P99), p.PollPause)
	}
	if p.PollErrors > 0 {
		s += fmt.Sprintf("; %d of %d polls got no state", p.PollErrors, p.Polls)
	}
	if len(p.Samples) > 0 {
		s += "; e.g. " + p.Samples[0]
	}
	return s
}

// durOrZero is dur, but 0s for 0.
func durOrZero(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return dur(d)
}

// slowerUnguarded says why res, a run of none (no lock), sold slower than
// a safe strategy of the same report, which surprises a reader; "" when it
// did not, or when the locks sold one purchase a hold (batch=1).
func (r *Report) slowerUnguarded(res Result) string {
	if res.Strategy != "none" || r.Config.Batch == 1 {
		return ""
	}
	faster := ""
	var best float64
	for _, o := range r.Results {
		if o.Safe && o.SellRate > res.SellRate && o.SellRate > best {
			faster, best = o.Strategy, o.SellRate
		}
	}
	if faster == "" {
		return ""
	}
	return fmt.Sprintf("slower than %s (%s/s against %s/s) though it takes no lock: each of its purchases is a "+
		"read and a write of its own, one after the other on the product's row, while a lock's hold sells every buyer "+
		"waiting on the instance in one transaction (SECKILL_BATCH, %s here)",
		faster, rate(res.SellRate), rate(best), batchWords(r.Config.Batch))
}

// batchWords is the run's batch as a note says it.
func batchWords(batch int) string {
	if batch == 0 {
		return "the server's default"
	}
	return strconv.Itoa(batch)
}
