package load

import (
	"context"
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// request is one request of the load as a worker sees it.
type request struct {
	i        int           // its index: the body's and the target's
	product  int           // the product it buys: p.pick(i)
	phase    int           // open loop: its phase
	warm     bool          // of the warmup
	intended time.Duration // since the load's start
	delay    time.Duration // open loop: how late it left
}

// run is a run of a plan in progress: what its workers share. Its
// fields up to the counters are set before the workers start and only
// read afterwards.
type run struct {
	p       *Plan
	cancels *cancels
	lc      *loadClient
	cancel  context.CancelFunc // ends the run early
	warmup  time.Duration
	start   time.Time
	// Workers share the shards; a dropped request counts in shard i %
	// len(shards).
	shards []shard
	series *timeline
	_      [64]byte // keep the counters off the cache lines read above
	// next is the index of the next request; measured counts the closed
	// loop's measured requests claimed.
	next, measured atomic.Int64
	// captured: the strategy of a 201 has been read, or is not asked for.
	captured atomic.Bool
	counts   live
}

func newRun(p *Plan, workers int, cancel context.CancelFunc) *run {
	ld := &run{p: p, cancels: &cancels{}, cancel: cancel, warmup: p.Warmup(), series: &timeline{secs: map[int]*secAgg{}}}
	ld.shards = make([]shard, min(workers, 4*runtime.GOMAXPROCS(0)))
	for i := range ld.shards {
		ld.shards[i].t = newTally(len(p.Targets), len(p.Phases), p.products())
		ld.shards[i].series = ld.series
	}
	if !p.CaptureStrategy {
		ld.captured.Store(true)
	}
	return ld
}

// work is one worker: it claims a request, sends it, records the answer in
// sh and the live counts, and claims the next, until the load is over.
func (ld *run) work(ctx context.Context, sh *shard) {
	p := ld.p
	wk := newWorker(p, ld.lc, ld.cancels)
	defer wk.release()
	var timer *time.Timer
	for {
		r, ok := ld.claim(ctx, &timer)
		if !ok || ctx.Err() != nil {
			return
		}
		r.product = p.pick(r.i)
		sent := time.Now()
		a := wk.do(ctx, r.i, r.product, &ld.captured)
		since := time.Since(ld.start)
		if a.out == outTransport && ctx.Err() != nil {
			return // cancelled, not an answer
		}
		if p.History != nil {
			p.History.purchase(r.i, p.ProductIDs[r.product], p.Quantity, sent, time.Now(), a, wk.resp.Body())
		}
		if a.out == outCreated && cancelled(r.i, p.Cancel) {
			if id, _, ok := orderFigures(wk.resp.Body()); ok {
				wk.cancel(r.i%len(p.Targets), p.ProductIDs[r.product], id, r.i)
			}
		}
		if a.out == outAccepted && p.Promised != nil {
			p.Promised(r.i, r.product, ld.start.Add(since))
		}
		if a.override {
			ld.cancel()
		}
		sh.record(p, r, a, since, ld.warmup)
		ld.counts.counts[a.out].Add(1)
		if r.warm {
			ld.counts.warm.Add(1)
		}
	}
}

// claim claims the next request; ok false: the worker is done. timer is
// the worker's own, for the open loop's waits.
func (ld *run) claim(ctx context.Context, timer **time.Timer) (r request, ok bool) {
	if !ld.p.Open {
		return ld.claimClosed()
	}
	return ld.claimOpen(ctx, timer)
}

// claimClosed claims the closed loop's next request, sent at once: one of
// the warmup, then one of the measured phase while there are requests or
// time left.
func (ld *run) claimClosed() (r request, ok bool) {
	p := ld.p
	since := time.Since(ld.start)
	switch {
	case since < ld.warmup:
		r.warm = true
	case p.Requests > 0:
		if ld.measured.Add(1) > int64(p.Requests) {
			return r, false
		}
	case since >= p.length():
		return r, false
	}
	r.i, r.intended = int(ld.next.Add(1)-1), since
	return r, true
}

// claimOpen claims the open loop's next scheduled request and waits for
// its time; a request that cannot leave within one interval of its time
// is dropped, and the next one claimed.
func (ld *run) claimOpen(ctx context.Context, timer **time.Timer) (r request, ok bool) {
	p := ld.p
	for {
		r.i = int(ld.next.Add(1) - 1)
		if r.i >= p.scheduled() {
			return r, false
		}
		r.phase, r.intended = p.phaseOf(r.i)
		ph := p.Phases[r.phase]
		r.warm = ph.Warm
		wait := r.intended - time.Since(ld.start)
		if wait > 0 {
			if *timer == nil {
				*timer = time.NewTimer(wait)
			} else {
				(*timer).Reset(wait)
			}
			select {
			case <-(*timer).C:
			case <-ctx.Done():
				return r, false
			}
			return r, true
		}
		r.delay = -wait
		if r.delay <= max(time.Millisecond, time.Duration(float64(time.Second)/ph.Rate)) {
			return r, true
		}
		ld.drop(r)
	}
}

// drop counts the open loop's request r as dropped: never sent.
func (ld *run) drop(r request) {
	sh := &ld.shards[r.i%len(ld.shards)]
	sh.mu.Lock()
	if r.warm {
		sh.t.warmDropped++
	} else {
		sh.t.dropped++
		sh.t.steps[r.phase].dropped++
	}
	sh.second(secondOf(r.intended, ld.warmup)).dropped++
	sh.mu.Unlock()
	ld.counts.dropped.Add(1)
}

// total merges what the shards measured into the run's tally; end is when
// the last worker stopped, since the load's start.
func (ld *run) total(end time.Duration) *Tally {
	p := ld.p
	total := newTally(len(p.Targets), len(p.Phases), p.products())
	for i := range ld.shards {
		ld.shards[i].handOver(math.MaxInt)
		total.merge(ld.shards[i].t)
	}
	total.elapsed = max(0, end-ld.warmup)
	total.series = ld.series.finish()
	total.plan, total.cancels = p, ld.cancels
	return total
}
