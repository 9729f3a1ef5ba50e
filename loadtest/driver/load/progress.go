package load

import (
	"fmt"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/seckill/seckill/internal/every"
	"github.com/seckill/seckill/loadtest/report"
)

// watch starts the run's watcher: every tick it hands the shards' finished
// seconds over to the series and, when p.Progress is set, redraws the
// progress line. The returned function stops it.
func (p *Plan) watch(start time.Time, shards []shard, counts *live) (stop func()) {
	var bar *progressbar.ProgressBar
	if p.Progress != nil && p.ProgressEvery == 0 {
		bar = progressbar.NewOptions(1000,
			progressbar.OptionSetWriter(p.Progress),
			progressbar.OptionSetWidth(10),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionThrottle(tick/2),
		)
	}
	pace := &pace{}
	lastLine := time.Now()
	draw := func(final bool) {
		if p.Progress != nil && p.ProgressEvery > 0 {
			// Plain lines, for a log: one every progressEvery, and the last
			// (the status every tick all the same: its pace needs them).
			_, status := p.status(time.Since(start), counts, pace, final)
			if final || time.Since(lastLine) >= p.ProgressEvery {
				lastLine = time.Now()
				fmt.Fprintf(p.Progress, "%s %s\n", time.Now().Format("15:04:05"), status)
			}
			return
		}
		if bar == nil {
			return
		}
		since := time.Since(start)
		frac, status := p.status(since, counts, pace, final)
		bar.Describe(status)
		_ = bar.Set(int(frac * 1000)) // a progress line that cannot draw is no reason to stop
	}
	if p.ProgressEvery == 0 {
		draw(false)
	}
	stopTicks := every.Start(tick, func() {
		before := secondOf(time.Since(start), p.Warmup()) - 1
		for i := range shards {
			shards[i].handOver(before)
		}
		draw(false)
	})
	return func() {
		stopTicks()
		if bar != nil {
			draw(true)
			_ = bar.Exit() // as above
			fmt.Fprintln(p.Progress)
		} else if p.ProgressEvery > 0 {
			draw(true)
		}
	}
}

// pace remembers the answer counts of the last second, for the end
// estimate.
type pace struct {
	at      []time.Duration
	answers []int64
	created []int64
}

// rates returns the answers and the 201s per second over about the last
// second; ok false until a second of samples is there.
func (pc *pace) rates(now time.Duration, answers, created int64) (all, made float64, ok bool) {
	pc.at = append(pc.at, now)
	pc.answers = append(pc.answers, answers)
	pc.created = append(pc.created, created)
	for len(pc.at) > 2 && now-pc.at[1] >= time.Second {
		pc.at, pc.answers, pc.created = pc.at[1:], pc.answers[1:], pc.created[1:]
	}
	d := (now - pc.at[0]).Seconds()
	if d < 0.9 {
		return 0, 0, false
	}
	return float64(answers-pc.answers[0]) / d, float64(created-pc.created[0]) / d, true
}

// writeCounts writes the answers so far by outcome, the requests dropped
// (of the open loop) and the stock left, which it returns (-1: not
// known).
func (p *Plan) writeCounts(b *strings.Builder, c [numOutcomes]int64, answers, dropped int64) int64 {
	if p.Purchase {
		lock := c[outLockTimeout] + c[outLockLost]
		other := answers - c[outCreated] - c[outAccepted] - c[outSoldOut] - lock
		fmt.Fprintf(b, " 201 %d", c[outCreated])
		if c[outAccepted] > 0 {
			fmt.Fprintf(b, ", 202 %d", c[outAccepted])
		}
		fmt.Fprintf(b, ", sold_out %d, lock %d, other %d", c[outSoldOut], lock, other)
	} else {
		fmt.Fprintf(b, " 2xx %d, other %d", c[outOK], answers-c[outOK])
	}
	if p.Open {
		fmt.Fprintf(b, ", dropped %d", dropped)
	}
	stockLeft := int64(-1)
	if p.Purchase && p.Stock >= 0 {
		// An unsafe strategy sells more than there is: the stock goes
		// below 0, as the audit will say.
		stockLeft = p.Stock - (c[outCreated]+c[outAccepted])*p.Quantity
		fmt.Fprintf(b, "; stock %d", stockLeft)
		if stockLeft < 0 {
			fmt.Fprintf(b, " (oversold %d)", -stockLeft)
		}
	}
	return stockLeft
}

// status returns how far the run is (0 to 1) and its progress line: the
// answers so far by outcome, the stock left, the time elapsed and the end
// estimate. A run of fixed length ends when its schedule does; a run of a
// request count is estimated from the last second's pace, and not while
// stock is left, since the pace changes when the stock runs out.
func (p *Plan) status(since time.Duration, counts *live, pc *pace, final bool) (float64, string) {
	var c [numOutcomes]int64
	var answers int64
	for i := range c {
		c[i] = counts.counts[i].Load()
		answers += c[i]
	}
	dropped := counts.dropped.Load()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s:", p.Label, report.FormatDuration(since.Round(100*time.Millisecond)))
	stockLeft := p.writeCounts(&b, c, answers, dropped)
	all, _, paced := pc.rates(since, answers+dropped, c[outCreated]+c[outAccepted])
	var frac float64
	switch length := p.length(); {
	case final:
		frac = 1
	case length > 0:
		frac = min(1, since.Seconds()/length.Seconds())
		if left := (length - since).Round(100 * time.Millisecond); left > 0 {
			fmt.Fprintf(&b, "; ends in %s", report.FormatDuration(left))
		}
	default:
		done := max(0, answers-counts.warm.Load())
		frac = min(1, float64(done)/float64(p.Requests))
		left := int64(p.Requests) - done
		switch {
		case since < p.Warmup():
			fmt.Fprintf(&b, "; warmup, %s left", report.FormatDuration((p.Warmup() - since).Round(100*time.Millisecond)))
		case stockLeft > 0:
			b.WriteString("; end: after the sell-out")
		case paced && all > 0 && left > 0:
			if est := time.Duration(float64(left) / all * float64(time.Second)).Round(100 * time.Millisecond); est > 0 {
				fmt.Fprintf(&b, "; ends in ~%s", report.FormatDuration(est))
			}
		}
	}
	if final {
		b.WriteString("; done")
	}
	return frac, b.String()
}
