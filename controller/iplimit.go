package controller

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/combine"
)

// The per-IP limit (SECKILL_IP_LIMIT): at most N purchase requests per
// client IP in a window that starts at that IP's first counted request,
// counted in Redis so that every instance shares one count. The articles'
// bounded counter, done as it should be: one atomic step in Redis (INCR,
// with the expiry set on the first), no lock, no read-check-write race.
//
// An instance need not ask Redis for every request. It takes an IP's
// requests a block at a time (INCRBY: one at first, twice as many each
// time the last block was used up in its window, at most a sixteenth of
// the limit) and counts the block down locally until the window ends; an
// IP refused stays refused on that instance until its window ends (its
// count only grows until then). Never more than N requests of an IP are
// let through in a window; what it trades is that the unused part of a
// block another instance holds counts as used, so an IP busy on several
// instances may be refused a little early: by the unused parts of the
// blocks the others hold, a sixteenth of N at most each (an instance takes
// a block for each request of the IP that finds its block used up;
// docs/security.md).

// ipLimitScript takes a block of an IP's requests: KEYS[1] its counter,
// ARGV[1] the window in ms, ARGV[2] the block. It returns the count with
// the block and the window's time left in ms. A counter found without an
// expiry (its PEXPIRE lost) gets one.
var ipLimitScript = redis.NewScript(`
local n = redis.call('INCRBY', KEYS[1], ARGV[2])
if n == tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {n, tonumber(ARGV[1])}
end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {n, left}
`)

// ipLimitBudget bounds a count's wait for its turn, and then its round
// trip: a node that does not answer lets the request through rather than
// hold every buyer up.
const ipLimitBudget = 250 * time.Millisecond

// ipLimitBatch is the most counts sent to Redis at once.
const ipLimitBatch = 256

// IPLimiter counts purchase requests per client IP. The counts of the
// requests that arrive together go to Redis together: one pipeline of
// the script's calls, one round trip, sent by whichever request came
// first while the others wait for it (as a product's buyers wait in line).
// Each call is still its own atomic step, so the count is exact: no
// request is let through that one at a time would refuse.
type IPLimiter struct {
	node   redis.UniversalClient
	limit  int64
	window time.Duration
	prefix string
	counts *prometheus.CounterVec
	log    *slog.Logger
	line   *combine.Combiner[struct{}, ipAsk, ipCount]
	// mu guards ips, what this instance holds of each IP's window, and
	// sweepAt, the size of ips at which the windows that ended go.
	mu      sync.Mutex
	ips     map[string]*ipWindow
	sweepAt int
	// warned is when the last outage was logged (Unix ns): once a second
	// at most, not once a request.
	warned atomic.Int64
}

// ipWindow is what an instance holds of an IP's window, until it ends:
// the requests of its last block not yet let through, the next block's
// size, and whether the IP is over the limit.
type ipWindow struct {
	until   time.Time
	left    int64
	block   int64
	refused bool
}

// ipAsk is a block of an IP's requests asked of Redis.
type ipAsk struct {
	ip    string
	block int64
}

// ipCount is the script's answer to an ipAsk: the IP's count with the
// block and the window's time left, or why there is none.
type ipCount struct {
	n, left int64
	err     error
}

// ipSweepMin is the least size of the map of IPs at which the windows that
// ended are dropped.
const ipSweepMin = 4096

// NewIPLimiter limits each IP to limit requests per window, counted on
// node under keyPrefix (config.DefaultKeyPrefix when empty), its metric registered with
// reg: seckill_ip_limit_total{result} (allowed, limited, unavailable).
func NewIPLimiter(node redis.UniversalClient, limit int, window time.Duration, keyPrefix string, reg prometheus.Registerer, log *slog.Logger) *IPLimiter {
	if keyPrefix == "" {
		keyPrefix = config.DefaultKeyPrefix
	}
	l := &IPLimiter{node: node, limit: int64(limit), window: window, prefix: keyPrefix + "ip:", log: log,
		ips: map[string]*ipWindow{}, sweepAt: ipSweepMin,
		counts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_ip_limit_total",
			Help: "Purchase requests counted against SECKILL_IP_LIMIT, by result: allowed, limited (answered 429), unavailable (Redis did not answer: allowed).",
		}, []string{"result"})}
	l.line = combine.New(l.serve)
	reg.MustRegister(l.counts)
	for _, r := range []string{"allowed", "limited", "unavailable"} {
		l.counts.WithLabelValues(r)
	}
	return l
}

// Allow counts a purchase request of ip. !ok says ip is over the limit:
// it may try again after retryAfter, the rest of its window. A Redis that
// does not answer allows the request, with a warning and the metric.
func (l *IPLimiter) Allow(ctx context.Context, ip string) (ok bool, retryAfter time.Duration) {
	now := time.Now()
	ok, retryAfter, block := l.local(ip, now)
	if block == 0 {
		l.count(ok)
		return ok, retryAfter
	}
	c, err := l.line.Do(ctx, struct{}{}, ipAsk{ip: ip, block: block}, ipLimitBudget)
	if err == nil {
		err = c.err
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// The client hung up: not counted, and not answered 429 either
		// (the IP is not known to be over); the purchase finds its
		// context ended and writes nothing, as before this count.
		return true, 0
	case err != nil:
		l.counts.WithLabelValues("unavailable").Inc()
		now := time.Now().UnixNano()
		if last := l.warned.Load(); now-last > int64(time.Second) && l.warned.CompareAndSwap(last, now) {
			l.log.WarnContext(ctx, "the per-IP limit cannot count requests; they are allowed", "ip", ip, "err", err)
		}
		return true, 0
	}
	// The block's requests within the limit: this one, and the rest for
	// the next requests of the window.
	granted := min(block, l.limit-(c.n-block))
	ok, retryAfter = granted > 0, time.Duration(c.left)*time.Millisecond
	l.took(ip, now.Add(retryAfter), c.n == block, block, granted)
	l.count(ok)
	return ok, retryAfter
}

// local answers a request of ip from what this instance holds of its
// window, when it can: block is 0 then; otherwise block is how many of
// its requests to ask Redis for.
func (l *IPLimiter) local(ip string, now time.Time) (ok bool, retryAfter time.Duration, block int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.ips[ip]
	switch {
	case w == nil || !now.Before(w.until):
		return false, 0, 1
	case w.refused:
		return false, w.until.Sub(now), 0
	case w.left > 0:
		w.left--
		return true, 0, 0
	}
	return false, 0, w.block
}

// took keeps what Redis granted of a block of ip's requests in its window
// (until; fresh says the block began it): granted of them, one for the
// request that asked; none, and the IP is refused until the window ends.
// An answer whose window has ended is not kept: a reply that came late,
// once a newer window began, would count the old one's requests in it.
func (l *IPLimiter) took(ip string, until time.Time, fresh bool, block, granted int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !now.Before(until) {
		return
	}
	w := l.ips[ip]
	if w == nil || fresh || !now.Before(w.until) {
		if len(l.ips) >= l.sweepAt {
			for k, w := range l.ips {
				if !now.Before(w.until) {
					delete(l.ips, k)
				}
			}
			l.sweepAt = max(ipSweepMin, 2*len(l.ips))
		}
		w = &ipWindow{until: until, block: 1}
		l.ips[ip] = w
	}
	if granted <= 0 {
		w.refused = true
		return
	}
	w.left += granted - 1
	// A block used up within its window: the next is twice as large, up
	// to a sixteenth of the limit.
	w.block = max(1, min(2*block, l.limit/16))
}

// count counts a request allowed or limited.
func (l *IPLimiter) count(ok bool) {
	if ok {
		l.counts.WithLabelValues("allowed").Inc()
		return
	}
	l.counts.WithLabelValues("limited").Inc()
}

// serve counts the requests waiting, up to ipLimitBatch, in one pipeline.
func (l *IPLimiter) serve(_ struct{}, q *combine.Queue[ipAsk, ipCount]) {
	b := q.Take(func(ipAsk) int { return ipLimitBatch })
	asks, _ := b.Requests()
	if len(asks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ipLimitBudget)
	defer cancel()
	window := l.window.Milliseconds()
	cmds := make([]*redis.Cmd, len(asks))
	var again []int // the calls that found no script: EVAL them
	for attempt := range 2 {
		_, _ = l.node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, a := range asks {
				switch {
				case attempt == 0:
					cmds[i] = ipLimitScript.EvalSha(ctx, p, []string{l.prefix + a.ip}, window, a.block)
				case slices.Contains(again, i):
					cmds[i] = ipLimitScript.Eval(ctx, p, []string{l.prefix + a.ip}, window, a.block)
				}
			}
			return nil
		}) // each command carries its own error
		again = again[:0]
		for i, c := range cmds {
			if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			break
		}
	}
	out := make([]ipCount, len(asks))
	for i, c := range cmds {
		res, err := c.Int64Slice()
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("the script answered %v", res)
		}
		if err != nil {
			out[i].err = err
			continue
		}
		out[i].n, out[i].left = res[0], res[1]
	}
	b.Answer(out)
}

// limitIP answers 429 rate_limited, with Retry-After, to a client IP over
// SECKILL_IP_LIMIT, before anything of its purchase is read or written.
func limitIP(log *slog.Logger, limiter *IPLimiter) gin.HandlerFunc {
	return func(c *gin.Context) {
		ok, retry := limiter.Allow(c.Request.Context(), c.ClientIP())
		if ok {
			return
		}
		c.Header("Retry-After", strconv.FormatInt(max(1, int64(math.Ceil(retry.Seconds()))), 10))
		writeError(c, log, apiError(codeRateLimited, "too many purchase requests from this address: retry after the time in Retry-After"))
	}
}
