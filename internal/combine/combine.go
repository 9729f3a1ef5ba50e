// Package combine lets callers that want the same thing done share the
// work: callers of one key wait in one queue, first come first served, and
// one goroutine at a time, the queue's leader, serves it in batches, giving
// each caller its own result. A leader starts with the first caller of a
// key and ends when nobody waits.
//
// The service queues the purchases of a product this way (service/line.go):
// the leader takes the product's lock once for a whole batch, sells it and
// returns one answer per purchase. Nothing here knows about purchases or
// locks: a Combiner is a key, a request, a result and the function that
// serves a queue.
package combine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed is returned by Do once Close has begun.
var ErrClosed = errors.New("combine: closed")

// ErrWaitOver is the cause of a *GaveUp whose wait ran out.
var ErrWaitOver = errors.New("combine: the wait ran out")

// GaveUp is Do's error when a caller stopped waiting before a leader took
// its request: its wait ran out (ErrWaitOver) or its context ended. Stalled
// says the queue's leader was stalled then (see Queue.Stall): the caller
// was kept waiting by what the leader waits on, not by the callers before
// it.
type GaveUp struct {
	Cause   error
	Stalled bool
	// Waited is how long the caller waited.
	Waited time.Duration
}

func (e *GaveUp) Error() string { return "combine: gave up waiting: " + e.Cause.Error() }
func (e *GaveUp) Unwrap() error { return e.Cause }

// Combiner queues requests by key. Its zero value is not usable: see New.
type Combiner[K comparable, Req, Res any] struct {
	serve func(key K, q *Queue[Req, Res])

	mu     sync.Mutex
	queues map[K]*Queue[Req, Res]
	wg     sync.WaitGroup
	closed bool
}

// New returns a Combiner whose leader of each key calls serve again and
// again while anyone waits in the key's queue. Each call is one round: it
// may answer some waiting requests at once (Queue.AnswerIf), wait for what
// it needs (a lock), then take a batch (Queue.Take) and answer every
// request of it (Batch.Answer).
func New[K comparable, Req, Res any](serve func(key K, q *Queue[Req, Res])) *Combiner[K, Req, Res] {
	return &Combiner[K, Req, Res]{serve: serve, queues: map[K]*Queue[Req, Res]{}}
}

// Do queues req under key and returns its result. When ctx ends or wait
// runs out before a leader took req, req leaves the queue and Do returns a
// *GaveUp; once taken, Do waits for its result whatever ctx does.
func (c *Combiner[K, Req, Res]) Do(ctx context.Context, key K, req Req, wait time.Duration) (Res, error) {
	w := &waiter[Req, Res]{req: req, arrived: time.Now(), done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		var zero Res
		return zero, ErrClosed
	}
	q, ok := c.queues[key]
	if !ok {
		q = &Queue[Req, Res]{mu: &c.mu}
		c.queues[key] = q
		c.wg.Add(1)
		go c.lead(key, q)
	}
	q.waiting = append(q.waiting, w)
	c.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var cause error
	select {
	case <-w.done:
		return w.res, nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-timer.C:
		cause = ErrWaitOver
	}
	c.mu.Lock()
	if !w.taken {
		q.remove(w)
		stalled := q.failed || (!q.due.IsZero() && time.Now().After(q.due))
		c.mu.Unlock()
		var zero Res
		return zero, &GaveUp{Cause: cause, Stalled: stalled, Waited: time.Since(w.arrived)}
	}
	c.mu.Unlock()
	<-w.done // taken into a batch: its result is the leader's
	return w.res, nil
}

// Waiting counts the requests waiting, not yet taken into a batch, in the
// queues of the keys that match.
func (c *Combiner[K, Req, Res]) Waiting(match func(K) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for key, q := range c.queues {
		if match(key) {
			n += len(q.waiting)
		}
	}
	return n
}

// Close stops taking requests and waits for every leader to finish: call
// it once no Do is under way.
func (c *Combiner[K, Req, Res]) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
}

// lead serves q while anyone waits in it, then forgets it.
func (c *Combiner[K, Req, Res]) lead(key K, q *Queue[Req, Res]) {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		if len(q.waiting) == 0 {
			delete(c.queues, key)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.serve(key, q)
	}
}

// Queue is the requests of one key waiting, oldest first, as its leader
// sees them. Its methods are for the leader.
type Queue[Req, Res any] struct {
	mu      *sync.Mutex // the Combiner's
	waiting []*waiter[Req, Res]
	// failed and due are Stall's.
	failed bool
	due    time.Time
}

type waiter[Req, Res any] struct {
	req     Req
	arrived time.Time
	taken   bool // guarded by the Combiner's mutex
	done    chan struct{}
	res     Res
}

func (w *waiter[Req, Res]) answer(r Res) {
	w.res = r
	close(w.done)
}

// remove takes w out of the queue. The caller holds the mutex.
func (q *Queue[Req, Res]) remove(w *waiter[Req, Res]) {
	for i, x := range q.waiting {
		if x == w {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			return
		}
	}
}

// Oldest returns when the oldest waiting request was queued; false when
// nobody waits.
func (q *Queue[Req, Res]) Oldest() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		return time.Time{}, false
	}
	return q.waiting[0].arrived, true
}

// Stall tells the callers that give up from now on whether the leader is
// stalled: failed says its last round failed for something that did not
// answer; due, when not zero, is when the round under way should have
// ended (after it, the round is late).
func (q *Queue[Req, Res]) Stall(failed bool, due time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failed, q.due = failed, due
}

// AnswerIf answers at once, and takes out of the queue, every waiting
// request for which answer (given the request and when it was queued) says
// so (its second result true). It reports whether anyone still waits.
func (q *Queue[Req, Res]) AnswerIf(answer func(req Req, queued time.Time) (Res, bool)) bool {
	var done []*waiter[Req, Res]
	var results []Res
	q.mu.Lock()
	kept := q.waiting[:0]
	for _, w := range q.waiting {
		if r, ok := answer(w.req, w.arrived); ok {
			w.taken = true
			done, results = append(done, w), append(results, r)
			continue
		}
		kept = append(kept, w)
	}
	clear(q.waiting[len(kept):])
	q.waiting = kept
	left := len(q.waiting) > 0
	q.mu.Unlock()
	for i, w := range done {
		w.answer(results[i])
	}
	return left
}

// Take takes the batch the leader serves next: the n oldest waiting
// requests (fewer when fewer wait), where n is what size says of the
// oldest. It is empty when nobody waits.
func (q *Queue[Req, Res]) Take(size func(oldest Req) int) *Batch[Req, Res] {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		return &Batch[Req, Res]{}
	}
	n := min(max(size(q.waiting[0].req), 1), len(q.waiting))
	b := &Batch[Req, Res]{ws: make([]*waiter[Req, Res], n)}
	copy(b.ws, q.waiting)
	clear(q.waiting[:n])
	q.waiting = q.waiting[n:]
	for _, w := range b.ws {
		w.taken = true
	}
	return b
}

// Batch is requests a leader took: it must answer each of them.
type Batch[Req, Res any] struct {
	ws []*waiter[Req, Res]
}

// Len is the number of requests in the batch.
func (b *Batch[Req, Res]) Len() int { return len(b.ws) }

// Requests are the batch's requests, oldest first, and when each was
// queued.
func (b *Batch[Req, Res]) Requests() (reqs []Req, queued []time.Time) {
	reqs, queued = make([]Req, len(b.ws)), make([]time.Time, len(b.ws))
	for i, w := range b.ws {
		reqs[i], queued[i] = w.req, w.arrived
	}
	return reqs, queued
}

// Answer gives request i of the batch results[i]. There must be one
// result per request.
func (b *Batch[Req, Res]) Answer(results []Res) {
	if len(results) != len(b.ws) {
		panic("combine: a batch answered with a number of results other than its requests'")
	}
	for i, w := range b.ws {
		w.answer(results[i])
	}
}

// AnswerAll gives every request of the batch r.
func (b *Batch[Req, Res]) AnswerAll(r Res) {
	for _, w := range b.ws {
		w.answer(r)
	}
}
