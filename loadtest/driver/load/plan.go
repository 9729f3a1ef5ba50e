package load

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// Plan is one run of the load at the targets: what to send, how and for
// how long. A caller fills it in and calls Run once.
type Plan struct {
	Timeout  time.Duration // longest wait for an answer once a request is sent
	Bases    []string      // base URL per instance
	Targets  []string      // full URL per instance
	Purchase bool          // POST a purchase; else GET
	// The body of purchase i is Head + Buyer(i) + Mid + i + Tail.
	Head, Mid, Tail []byte
	// Buyers, when above 0, is how many buyers there are: request i's is
	// the (i mod Buyers)th; 0: request i's buyer is the ith.
	Buyers int
	Phases []Phase
	Open   bool
	// Requests is the closed loop's measured request count; 0: it runs
	// its measured phase's length.
	Requests int
	Workers  int
	Progress io.Writer
	// ProgressEvery, when not 0: the progress as a line every that long.
	ProgressEvery time.Duration
	Label         string
	// Stock and Quantity let the progress show the stock left; Stock < 0:
	// unknown.
	Stock, Quantity int64
	// CaptureStrategy asks for the strategy named by the first 201.
	CaptureStrategy bool
	// History, when not nil, records every purchase (-history).
	History *Recorder
	// Promised, when not nil, is told of every 202 (a promise, under
	// reserve) as it comes: the index of its request, that of its product
	// and when it came.
	Promised func(i, product int, at time.Time)
	// Cancel is the fraction of the orders cancelled (-cancel), by the
	// buyers whose user IDs start with UserPrefix.
	Cancel     float64
	UserPrefix string
	// ProductIDs are the products on sale (none in the raw mode); Pick,
	// when not nil, picks each request's by its index (else the first),
	// and ProductURLs[k][j] is the URL of a purchase of product j at
	// instance k.
	ProductIDs  []int64
	Pick        func(i int) int
	ProductURLs [][]string
	// Authorization, when not empty, is every request's Authorization
	// header: the admin token, which the override's parameters need.
	Authorization string
	// BuyerToken, when not nil, is the token of buyer b (request i's is
	// Buyer(i)), sent as its bearer token on its purchase and its cancel
	// (SECKILL_BUYER_AUTH=jwt).
	BuyerToken func(b int) (string, error)
	// Sources are the local addresses the load's connections come from
	// (-clients); empty: the system's choice.
	Sources []net.IP
}

// Buyer is the buyer of request i: its user ID is UserPrefix and it.
func (p *Plan) Buyer(i int) int {
	if p.Buyers > 0 {
		return i % p.Buyers
	}
	return i
}

// Phase is a stretch of the load: the warmup, or one step of the open loop
// (the closed loop has its warmup and one measured phase).
type Phase struct {
	Warm   bool
	Rate   float64       // open loop: requests per second
	Start  time.Duration // since the load's start
	Length time.Duration // 0: the closed loop's request count
	First  int           // open loop: index of its first request
	N      int           // open loop: its requests
}

// products is the number of products the plan counts apart (1 in the
// raw mode).
func (p *Plan) products() int { return max(1, len(p.ProductIDs)) }

// pick is the index of request i's product.
func (p *Plan) pick(i int) int {
	if p.Pick == nil {
		return 0
	}
	return p.Pick(i)
}

// Warmup is the length of the plan's warmup, 0 for none.
func (p *Plan) Warmup() time.Duration {
	if p.Phases[0].Warm {
		return p.Phases[0].Length
	}
	return 0
}

// length is the planned length of the load; 0 when it runs a request
// count.
func (p *Plan) length() time.Duration {
	last := p.Phases[len(p.Phases)-1]
	if !p.Open && p.Requests > 0 {
		return 0
	}
	return last.Start + last.Length
}

// scheduled is the open loop's number of requests, warmup included.
func (p *Plan) scheduled() int {
	last := p.Phases[len(p.Phases)-1]
	return last.First + last.N
}

// phaseOf returns the phase of the open loop's request i and its intended
// send time since the load's start.
func (p *Plan) phaseOf(i int) (int, time.Duration) {
	k := len(p.Phases) - 1
	for k > 0 && i < p.Phases[k].First {
		k--
	}
	ph := p.Phases[k]
	return k, ph.Start + time.Duration(float64(i-ph.First)*float64(time.Second)/ph.Rate)
}

// Run executes p and returns what it measured; its error says a target is
// not a URL. It stops early when ctx ends or an instance answers 403
// strategy_override_disabled.
func (p *Plan) Run(ctx context.Context) (*Tally, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := max(1, p.Workers)
	switch {
	case p.Open:
		workers = min(workers, p.scheduled())
	case p.Requests > 0 && p.Warmup() == 0:
		workers = min(workers, p.Requests)
	}
	lc, err := newLoadClient(ctx, p.Targets, p.Timeout, p.Sources)
	if err != nil {
		return nil, err
	}
	ld := newRun(p, workers, cancel)
	defer lc.close()
	ld.lc = lc
	// The connections know no context: when ctx ends (Ctrl-C, its
	// deadline, or an instance refused the override), closing them ends
	// the requests in flight at once, as net/http would have.
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
	return ld.total(end), nil
}
