package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
	"github.com/seckill/seckill/locker"
)

// The bounded counter: the second article's other example. A count kept
// in Redis (an IP's requests, say) must stay at or below a limit: read N,
// check N < limit, write N + 1. Buyers racing on it without a lock all
// read the same N and pass the limit; under a lock they take turns; and
// the atomic INCR, which is how the service's own SECKILL_IP_LIMIT counts,
// needs no lock at all.
const (
	counterLimit   = 10
	counterBuyers  = 40
	counterRaceGap = 2 * time.Millisecond // between the read and the write
)

func counterScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "ip-limit",
		Title: "THE BOUNDED COUNTER: an IP access limit kept in Redis",
		Shows: "a read-check-write counter passes its limit unlocked; locks or an atomic INCR hold it",
		Story: fmt.Sprintf("The articles' other example: a limit of %d requests per IP, its count kept in "+
			"Redis. %d requests of one IP arrive at once. Each reads the count, checks it is under %d, "+
			"and %s later writes it back plus one: without a lock, then under token's and Redlock's. "+
			"Last, the service's own SECKILL_IP_LIMIT=%d/1m, over two instances: one INCR in Redis, no lock.",
			counterLimit, counterBuyers, counterLimit, lab.DurWords(counterRaceGap), counterLimit),
		Run: runCounter,
	}
}

func runCounter(w *lab.World) (*lab.Result, error) {
	nodes := w.Redis()
	opts := locker.Options{TTL: 2 * time.Second, Wait: 10 * time.Second}
	res := &lab.Result{Columns: []string{"COUNTER", "GUARDED BY", "ALLOWED", "LIMIT", "VERDICT"}}
	for _, c := range []struct {
		key, guard string
		lock       locker.Locker
	}{
		{"read-check-write", "nothing", nil},
		{"read-check-write token", "token: SET NX PX", locker.NewToken(nodes[0], opts)},
		{"read-check-write redlock", "Redlock: 2 of 3 nodes", locker.NewRedlock(nodes, opts)},
	} {
		w.Note("%s: %d requests", c.key, counterBuyers)
		allowed, err := naiveCounter(w.Context(), nodes[0], w.KeyPrefix()+"counter:"+c.key, c.lock)
		if err != nil {
			return nil, err
		}
		row := lab.Row{Key: c.key, Flaw: allowed > counterLimit,
			Cells: []string{"read, check, write", c.guard, strconv.Itoa(allowed), strconv.Itoa(counterLimit)}}
		row.Verdict = "held"
		if row.Flaw {
			row.Verdict = fmt.Sprintf("LIMIT PASSED by %d", allowed-counterLimit)
		}
		res.Add(row, row.Flaw == (c.lock == nil))
	}
	allowed, err := serviceLimit(w)
	if err != nil {
		return nil, err
	}
	row := lab.Row{Key: "incr", Flaw: allowed > counterLimit,
		Cells: []string{"INCR (SECKILL_IP_LIMIT)", "one atomic step", strconv.Itoa(allowed), strconv.Itoa(counterLimit)}}
	row.Verdict = "held, with no lock"
	if row.Flaw || allowed < counterLimit {
		row.Verdict = fmt.Sprintf("%d allowed of a limit of %d", allowed, counterLimit)
	}
	res.Add(row, allowed == counterLimit)
	res.Notes = []string{"A lock makes the read-check-write safe, at a lock round per request. " +
		"The count needs none: INCR reads and writes in one step, and the expiry set with the first " +
		"request opens the window. Reach for a lock when the step cannot be made atomic."}
	return res, nil
}

// naiveCounter runs counterBuyers requests at once against the count at
// key, each reading it, checking it is under the limit and, after a gap,
// writing it back plus one, under lk when not nil; it returns how many
// were allowed.
func naiveCounter(ctx context.Context, node redis.UniversalClient, key string, lk locker.Locker) (int, error) {
	if err := node.Del(ctx, key).Err(); err != nil {
		return 0, fmt.Errorf("scenario: reset the counter: %w", err)
	}
	var (
		allowed atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
	)
	start := make(chan struct{})
	for range counterBuyers {
		wg.Go(func() {
			<-start
			if err := countOnce(ctx, node, key, lk, &allowed); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, fmt.Errorf("scenario: the counter: %w", err)
	}
	return int(allowed.Load()), nil
}

// countOnce is one request against the naive counter.
func countOnce(ctx context.Context, node redis.UniversalClient, key string, lk locker.Locker, allowed *atomic.Int64) (err error) {
	if lk != nil {
		lease, err := lk.Lock(ctx, key+":lock")
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, lease.Unlock(context.WithoutCancel(ctx))) }()
	}
	n, err := node.Get(ctx, key).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if n >= counterLimit {
		return nil // refused
	}
	if err := lab.Sleep(ctx, counterRaceGap); err != nil {
		return err
	}
	if err := node.Set(ctx, key, n+1, time.Minute).Err(); err != nil {
		return err
	}
	allowed.Add(1)
	return nil
}

// serviceLimit sends counterBuyers purchases at once over two instances
// that limit each IP to counterLimit a minute, and returns how many were
// not answered 429.
func serviceLimit(w *lab.World) (int, error) {
	ins, err := w.StartInstances(2, lab.Setup{IPLimit: counterLimit, IPWindow: time.Minute})
	if err != nil {
		return 0, err
	}
	s, err := w.NewSeries("ip-limit", "INCR", ins[0], counterBuyers)
	if err != nil {
		return 0, err
	}
	w.Note("SECKILL_IP_LIMIT=%d/1m: %d requests", counterLimit, counterBuyers)
	as := w.Crowd(w.Context(), s, ins, counterBuyers, counterBuyers, client.Override{})
	if err := w.Context().Err(); err != nil {
		return 0, err
	}
	if _, err := w.Finish(s); err != nil {
		return 0, err
	}
	return len(as) - lab.Count(as, fmt.Sprintf("%d rate_limited", http.StatusTooManyRequests)), nil
}
