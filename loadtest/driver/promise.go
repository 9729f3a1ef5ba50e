package driver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/loadtest/driver/latency"
	"github.com/seckill/seckill/loadtest/report"
)

// Of the polls that follow the promises (see tracker).
const (
	// pollConcurrency is the most polls in flight.
	pollConcurrency = 16
	// pollPause is the pause between two rounds of polls.
	pollPause = 150 * time.Millisecond
	// promiseSamples is the most promises not kept that a run names.
	promiseSamples = 5
	// maxProbes is the most promises followed at once while the load
	// runs, for the write lag: polling every one would load the service
	// (and its database) as much as the purchases do, and time the polls
	// rather than the writers. The others are asked after the load.
	maxProbes = 64
)

// promise is a 202 of the run: the request it answered (its request ID is
// the run's prefix and i), the index of the product it bought, when it
// came, and what the last poll said of it when that was no state.
type promise struct {
	i, product int
	at         time.Time
	last       string
	// probe says the promise is followed from its 202 on, for the write
	// lag; the others are asked only after the load.
	probe bool
}

// fate is what a poll said of a promise.
type fate int

const (
	fateUnasked fate = iota // no poll was answered: the polls were ending
	fatePending             // still pending, or the poll got no state
	fateKept                // ordered
	fateFailed              // the database refused it
	fateLost                // 404 purchase_not_found
)

// polled is the answer of one poll.
type polled struct {
	fate fate
	at   time.Time // when the answer came
	// why says, for a person, why the promise was not kept, or why the
	// poll got no state.
	why     string
	noState bool // no answer, an error other than 404 purchase_not_found, or an unknown state
}

// tracker follows the promises of one run: a goroutine asks GET
// /api/v1/purchases/{request_id}, pollConcurrency at a time, in rounds
// pollPause apart, until each promise became an order (kept), was refused
// by the database (failed) or is found by no instance (lost). While the
// load runs it follows at most maxProbes promises at once, from their 202
// on, so that a promise's write lag runs from its 202 to the first poll
// that found its order, at the resolution of a round and a pause, and the
// polls add little to the load; the write lag is theirs. Once the load is
// over it asks every promise, and drain gives those still pending up to a
// limit.
type tracker struct {
	clients []*client.Client // polled in turn
	prefix  string           // of the request IDs
	// token, when not nil, is the token of request i's buyer, its polls'
	// bearer (SECKILL_BUYER_AUTH=jwt).
	token func(i int) (string, error)
	// wake tells the goroutine of new promises; loadOver, closed, that
	// the load is over: no promise comes after it.
	wake     chan struct{}
	loadOver chan struct{}
	done     chan struct{}
	// ctx ends the polls: when Run's context ends, when the drain runs
	// out, or at stop.
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	added []promise // not yet handed to the goroutine

	// Written by the goroutine, read after done.
	res    report.Promises
	unkept []int64 // per product
}

// newTracker starts the tracker of a run of products products, whose
// request IDs begin with prefix; its polls go to clients in turn, each
// bounded by timeout, over an HTTP client of their own that keeps a
// connection per poll in flight.
func newTracker(ctx context.Context, clients []*client.Client, prefix string, products int, timeout time.Duration, token func(i int) (string, error)) *tracker {
	hc := client.NewHTTPClient(timeout)
	if tr, ok := hc.Transport.(*http.Transport); ok {
		tr.MaxIdleConnsPerHost = pollConcurrency
	}
	polls := make([]*client.Client, len(clients))
	for k, c := range clients {
		polls[k] = &client.Client{BaseURL: c.BaseURL, HTTP: hc, CallTimeout: timeout}
	}
	t := &tracker{clients: polls, prefix: prefix, token: token, wake: make(chan struct{}, 1), loadOver: make(chan struct{}),
		done: make(chan struct{}), unkept: make([]int64, products)}
	t.ctx, t.cancel = context.WithCancel(ctx)
	go func() {
		defer close(t.done)
		defer hc.CloseIdleConnections()
		t.follow()
	}()
	return t
}

// add hands the tracker the promise that answered request i, a purchase
// of product (its index), at at; the load's workers call it.
func (t *tracker) add(i, product int, at time.Time) {
	t.mu.Lock()
	t.added = append(t.added, promise{i: i, product: product, at: at})
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default: // a wake is on its way already
	}
}

// collect appends the promises added since the last collect to pending.
func (t *tracker) collect(pending []promise) []promise {
	t.mu.Lock()
	fresh := t.added
	t.added = nil
	t.mu.Unlock()
	t.res.Made += len(fresh)
	return append(pending, fresh...)
}

// drain tells the tracker that the load is over and waits, at most limit
// (less when Run's context ends), for every promise to be settled. It
// returns what became of them (nil when there was none) and, per product,
// the promises not kept. Call it once, after the load.
func (t *tracker) drain(limit time.Duration) (*report.Promises, []int64) {
	start := time.Now()
	timer := time.AfterFunc(limit, t.cancel)
	defer timer.Stop()
	close(t.loadOver)
	<-t.done
	if t.res.Made == 0 {
		return nil, t.unkept
	}
	res := t.res
	res.Drain, res.DrainLimit, res.PollPause = time.Since(start), limit, pollPause
	return &res, t.unkept
}

// stop ends the polls at once and waits for the goroutine; it may follow
// drain.
func (t *tracker) stop() {
	t.cancel()
	<-t.done
}

// follow is the tracker's goroutine: while the load runs, a round of polls
// of the probes (up to maxProbes promises, followed from their 202 on for
// the write lag), then a pause; once the load is over, rounds of every
// promise still pending, until each is settled or the polls end.
func (t *tracker) follow() {
	lag := latency.New(latency.RunSigFigs)
	var probes, later []promise
	over := false
	pause := time.NewTimer(pollPause)
	defer pause.Stop()
	for {
		for _, p := range t.collect(nil) {
			if len(probes) < maxProbes {
				p.probe = true
				probes = append(probes, p)
			} else {
				later = append(later, p)
			}
		}
		if over {
			probes, later = append(probes, later...), nil
		}
		if len(probes) > 0 {
			probes = t.round(probes, lag)
		}
		if (over && len(probes) == 0) || !t.wait(len(probes) > 0, &over, pause) {
			break
		}
	}
	for _, p := range t.collect(append(probes, later...)) {
		t.res.Pending++
		t.unkept[p.product]++
		why := "still pending"
		if p.last != "" {
			why += " (the last poll: " + p.last + ")"
		}
		t.sample(p, why)
	}
	t.res.WriteLag = latency.Figures(lag)
}

// wait waits for the next round: the pause when promises are pending,
// else a new promise, or the load's end; it notes the load's end in over.
// It returns false when the polls must end.
func (t *tracker) wait(pending bool, over *bool, pause *time.Timer) bool {
	var tick <-chan time.Time
	wake, loadOver := t.wake, t.loadOver
	if pending {
		pause.Reset(pollPause)
		tick, wake = pause.C, nil // promises that come now wait for the pause
	}
	if *over {
		loadOver = nil
	}
	for {
		select {
		case <-tick:
			return true
		case <-wake:
			return true
		case <-loadOver:
			*over, loadOver = true, nil
			if !pending {
				return true // the last promises, if any, at once
			}
		case <-t.ctx.Done():
			return false
		}
	}
}

// round polls every promise of pending once, pollConcurrency at a time,
// records what became of each, and returns those still pending; the
// write lag of those kept goes into lag.
func (t *tracker) round(pending []promise, lag *hdrhistogram.Histogram) []promise {
	answers := make([]polled, len(pending))
	sem := make(chan struct{}, pollConcurrency)
	var wg sync.WaitGroup
	for k := range pending {
		select {
		case sem <- struct{}{}:
		case <-t.ctx.Done():
		}
		if t.ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			answers[k] = t.poll(pending[k])
		})
	}
	wg.Wait()
	still := pending[:0] // written at k or before, read at k
	for k, p := range pending {
		a := answers[k]
		if a.fate != fateUnasked {
			t.res.Polls++
		}
		if a.noState {
			t.res.PollErrors++
			p.last = a.why
		}
		switch a.fate {
		case fateKept:
			t.res.Kept++
			if p.probe {
				latency.Record(lag, a.at.Sub(p.at))
			}
		case fateFailed, fateLost:
			if a.fate == fateFailed {
				t.res.Failed++
			} else {
				t.res.Lost++
			}
			t.unkept[p.product]++
			t.sample(p, a.why)
		default:
			still = append(still, p)
		}
	}
	return still
}

// poll asks an instance what became of promise p.
func (t *tracker) poll(p promise) polled {
	c := t.clients[p.i%len(t.clients)]
	var st client.PurchaseState
	var err error
	if t.token == nil {
		st, err = c.PurchaseState(t.ctx, t.requestID(p))
	} else {
		var tok string
		if tok, err = t.token(p.i); err == nil {
			st, err = c.PurchaseStateAs(t.ctx, t.requestID(p), tok)
		}
	}
	at := time.Now()
	var e *client.Error
	switch {
	case t.ctx.Err() != nil:
		return polled{fate: fateUnasked}
	case errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code == "purchase_not_found":
		return polled{fate: fateLost, at: at, why: "lost: 404 purchase_not_found"}
	case err != nil:
		return polled{fate: fatePending, at: at, why: err.Error(), noState: true}
	}
	switch st.State {
	case api.StateOrdered:
		return polled{fate: fateKept, at: at}
	case api.StatePending:
		return polled{fate: fatePending, at: at}
	case api.StateFailed:
		why := "failed"
		if st.Error != nil {
			why += ": " + st.Error.Code + ": " + st.Error.Message
		}
		return polled{fate: fateFailed, at: at, why: why}
	}
	return polled{fate: fatePending, at: at, why: fmt.Sprintf("%s answered the state %q", c.BaseURL, st.State), noState: true}
}

// requestID is the request ID of promise p: the run's prefix and its
// index, as the purchase's body gave it.
func (t *tracker) requestID(p promise) string { return t.prefix + strconv.Itoa(p.i) }

// sample names promise p, not kept for why, among the run's samples.
func (t *tracker) sample(p promise, why string) {
	if len(t.res.Samples) < promiseSamples {
		t.res.Samples = append(t.res.Samples, t.requestID(p)+": "+why)
	}
}
