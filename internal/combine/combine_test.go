package combine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/combine"
)

// double serves a batch by doubling each request, and records the batches'
// sizes; gate, when not nil, holds each round until it is closed or fed.
type double struct {
	mu      sync.Mutex
	batches []int
	gate    chan struct{}
	size    int
}

func (d *double) serve(_ string, q *combine.Queue[int, string]) {
	if d.gate != nil {
		<-d.gate
	}
	b := q.Take(func(int) int { return d.size })
	reqs, _ := b.Requests()
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = fmt.Sprint(2 * r)
	}
	d.mu.Lock()
	d.batches = append(d.batches, b.Len())
	d.mu.Unlock()
	b.Answer(out)
}

// TestEachCallerGetsItsOwnResult: 200 callers of 4 keys at once each get
// the result of their own request, and no batch is larger than its size.
func TestEachCallerGetsItsOwnResult(t *testing.T) {
	d := &double{size: 8}
	c := combine.New(d.serve)
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			got, err := c.Do(t.Context(), fmt.Sprint("k", i%4), i, time.Minute)
			if want := fmt.Sprint(2 * i); err != nil || got != want {
				t.Errorf("Do(%d) = %q, %v; want %q, nil", i, got, err, want)
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range d.batches {
		if n < 1 || n > 8 {
			t.Errorf("a batch of %d; want 1 to 8", n)
		}
		total += n
	}
	if total != 200 {
		t.Errorf("batches served %d requests; want 200", total)
	}
}

// TestBatchesTakeWhoWaits: while the leader is held, callers pile up; the
// next round takes them in one batch, oldest first, up to the size the
// oldest asks for.
func TestBatchesTakeWhoWaits(t *testing.T) {
	gate := make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	c := combine.New(func(_ string, q *combine.Queue[int, int]) {
		<-gate
		b := q.Take(func(oldest int) int { return oldest }) // the oldest says how many
		reqs, _ := b.Requests()
		mu.Lock()
		batches = append(batches, reqs)
		mu.Unlock()
		b.Answer(reqs)
	})
	defer c.Close()
	var wg sync.WaitGroup
	all := func(string) bool { return true }
	for i, r := range []int{3, 1, 1, 1, 1} {
		wg.Go(func() {
			if got, err := c.Do(t.Context(), "k", r, time.Minute); err != nil || got != r {
				t.Errorf("Do(%d) = %d, %v", r, got, err)
			}
		})
		waitFor(t, func() bool { return c.Waiting(all) == i+1 }) // queued in this order
	}
	close(gate)
	wg.Wait()
	if got := fmt.Sprint(batches); got != "[[3 1 1] [1] [1]]" {
		t.Errorf("batches %s; want [[3 1 1] [1] [1]]: the size its oldest asks for, oldest first", got)
	}
}

// TestWaitRunsOut: a request that no leader takes within its wait leaves
// the queue and says so; one the leader took waits for its result even
// when its context ends.
func TestWaitRunsOut(t *testing.T) {
	gate := make(chan struct{})
	var took atomic.Bool
	c := combine.New(func(_ string, q *combine.Queue[int, int]) {
		<-gate
		b := q.Take(func(int) int { return 1 })
		took.Store(b.Len() == 1)
		time.Sleep(50 * time.Millisecond) // the caller's context ends meanwhile
		reqs, _ := b.Requests()
		b.Answer(reqs)
	})
	defer c.Close()
	_, err := c.Do(t.Context(), "k", 1, 20*time.Millisecond)
	var gaveUp *combine.GaveUp
	if !errors.As(err, &gaveUp) || !errors.Is(err, combine.ErrWaitOver) || gaveUp.Stalled || gaveUp.Waited < 20*time.Millisecond {
		t.Fatalf("Do with nobody serving = %v (%+v); want a GaveUp with ErrWaitOver, not stalled, after its wait", err, gaveUp)
	}
	if n := c.Waiting(func(string) bool { return true }); n != 0 {
		t.Errorf("%d waiting after the caller gave up; want 0", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		got, err := c.Do(ctx, "k", 7, time.Minute)
		if err == nil && got != 7 {
			err = fmt.Errorf("result %d", got)
		}
		done <- err
	}()
	waitFor(t, func() bool { return c.Waiting(func(string) bool { return true }) == 1 })
	close(gate)
	waitFor(t, took.Load)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Do taken, then its context ended = %v; want its result", err)
	}
}

// TestHangUpAndStall: a caller whose context ends before it is taken
// leaves with its context's error; one that gives up while the leader is
// stalled is told so.
func TestHangUpAndStall(t *testing.T) {
	stalled := make(chan struct{})
	release := make(chan struct{})
	c := combine.New(func(_ string, q *combine.Queue[int, int]) {
		q.Stall(true, time.Time{})
		close(stalled)
		<-release
		q.AnswerIf(func(int, time.Time) (int, bool) { return 0, true })
	})
	defer func() { close(release); c.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	_, err := c.Do(ctx, "k", 1, time.Minute)
	var gaveUp *combine.GaveUp
	if !errors.As(err, &gaveUp) || !errors.Is(err, context.DeadlineExceeded) || !gaveUp.Stalled {
		t.Errorf("Do whose context ends while the leader is stalled = %v (%+v); want a stalled GaveUp with the context's error", err, gaveUp)
	}
	<-stalled
}

// TestAnswerIfAndClose: AnswerIf answers the matching waiters at once and
// leaves the rest; after Close, Do refuses.
func TestAnswerIfAndClose(t *testing.T) {
	c := combine.New(func(_ string, q *combine.Queue[int, string]) {
		if !q.AnswerIf(func(r int, _ time.Time) (string, bool) { return "odd", r%2 == 1 }) {
			return
		}
		b := q.Take(func(int) int { return 100 })
		b.AnswerAll("even")
	})
	for _, r := range []int{1, 2, 3, 4} {
		want := map[bool]string{true: "odd", false: "even"}[r%2 == 1]
		if got, err := c.Do(t.Context(), "k", r, time.Minute); err != nil || got != want {
			t.Errorf("Do(%d) = %q, %v; want %q", r, got, err, want)
		}
	}
	c.Close()
	if _, err := c.Do(t.Context(), "k", 1, time.Minute); !errors.Is(err, combine.ErrClosed) {
		t.Errorf("Do after Close = %v; want %v", err, combine.ErrClosed)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
