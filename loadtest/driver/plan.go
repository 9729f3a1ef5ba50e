package driver

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// plan is one run of the load at the targets.
type plan struct {
	timeout  time.Duration // longest wait for an answer once a request is sent
	bases    []string      // base URL per instance
	targets  []string      // full URL per instance
	purchase bool          // POST a purchase; else GET
	// The body of purchase i is head + i + mid + i + tail.
	head, mid, tail []byte
	phases          []phase
	open            bool
	// requests is the closed loop's measured request count; 0: it runs
	// its measured phase's length.
	requests int
	workers  int
	progress io.Writer
	// progressEvery, when not 0: the progress as a line every that long.
	progressEvery time.Duration
	label         string
	// stock and quantity let the progress show the stock left; stock < 0:
	// unknown.
	stock, quantity int64
	// captureStrategy asks for the strategy named by the first 201.
	captureStrategy bool
	// history, when not nil, records every purchase (-history).
	history *recorder
	// promises, when not nil, follows every 202 until it becomes an
	// order (see tracker).
	promises *tracker
	// cancel is the fraction of the orders cancelled (-cancel), by the
	// buyers whose user IDs start with userPrefix; cancels counts them.
	cancel     float64
	userPrefix string
	cancels    *cancels
	// productIDs are the products on sale (none in the raw mode); draw,
	// when not nil, picks each request's (else the first's), and
	// productURLs[k][j] is the URL of a purchase of product j at
	// instance k.
	productIDs  []int64
	draw        *draw
	productURLs [][]string
	// authorization, when not empty, is every request's Authorization
	// header: the admin token, which the override's parameters need.
	authorization string
	// sources are the local addresses the load's connections come from
	// (-clients); empty: the system's choice.
	sources []net.IP
}

// products is the number of products the plan counts apart (1 in the
// raw mode).
func (p *plan) products() int { return max(1, len(p.productIDs)) }

// warmup is the length of the plan's warmup, 0 for none.
func (p *plan) warmup() time.Duration {
	if p.phases[0].warm {
		return p.phases[0].length
	}
	return 0
}

// length is the planned length of the load; 0 when it runs a request
// count.
func (p *plan) length() time.Duration {
	last := p.phases[len(p.phases)-1]
	if !p.open && p.requests > 0 {
		return 0
	}
	return last.start + last.length
}

// scheduled is the open loop's number of requests, warmup included.
func (p *plan) scheduled() int {
	last := p.phases[len(p.phases)-1]
	return last.first + last.n
}

// phaseOf returns the phase of the open loop's request i and its intended
// send time since the load's start.
func (p *plan) phaseOf(i int) (int, time.Duration) {
	k := len(p.phases) - 1
	for k > 0 && i < p.phases[k].first {
		k--
	}
	ph := p.phases[k]
	return k, ph.start + time.Duration(float64(i-ph.first)*float64(time.Second)/ph.rate)
}

// run executes p and returns what it measured. It stops early when ctx
// ends or an instance answers 403 strategy_override_disabled.
func (p *plan) run(ctx context.Context) *tally {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := max(1, p.workers)
	switch {
	case p.open:
		workers = min(workers, p.scheduled())
	case p.requests > 0 && p.warmup() == 0:
		workers = min(workers, p.requests)
	}
	ld := newLoad(p, workers, cancel)
	lc, err := newLoadClient(ctx, p.targets, workers, p.timeout, p.sources)
	if err != nil {
		panic(err) // the targets were checked by Config
	}
	defer lc.close()
	ld.lc = lc
	// fasthttp knows no context: when ctx ends (Ctrl-C, or an instance
	// refused the override), closing the connections ends the requests in
	// flight at once, as net/http would have.
	stopClose := context.AfterFunc(ctx, lc.close)
	defer stopClose()
	ld.start = time.Now()
	stopWatch := p.watch(ld.start, ld.shards, &ld.counts)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ld.work(ctx, &ld.shards[w%len(ld.shards)])
		}()
	}
	wg.Wait()
	end := time.Since(ld.start)
	stopWatch()
	return ld.total(end)
}
