package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/config"
)

// The per-IP limit (SECKILL_IP_LIMIT): at most N purchase requests per
// client IP in a window that starts at that IP's first counted request,
// counted in Redis so that every instance shares one count. The articles'
// bounded counter, done as it should be: one atomic step in Redis (INCR,
// with the expiry set on the first), no lock, no read-check-write race.

// ipLimitScript counts one request of a client: KEYS[1] its counter,
// ARGV[1] the window in ms. It returns the count and the window's time left
// in ms. A counter found without an expiry (its PEXPIRE lost) gets one.
var ipLimitScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then
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

// ipLimitBudget bounds one count: a node that does not answer lets the
// request through rather than hold every buyer up.
const ipLimitBudget = 250 * time.Millisecond

// IPLimiter counts purchase requests per client IP.
type IPLimiter struct {
	node   redis.UniversalClient
	limit  int64
	window time.Duration
	prefix string
	counts *prometheus.CounterVec
	log    *slog.Logger
	// warned is when the last outage was logged (Unix ns): once a second
	// at most, not once a request.
	warned atomic.Int64
}

// NewIPLimiter limits each IP to limit requests per window, counted on
// node under keyPrefix (config.DefaultKeyPrefix when empty), its metric registered with
// reg: seckill_ip_limit_total{result} (allowed, limited, unavailable).
func NewIPLimiter(node redis.UniversalClient, limit int, window time.Duration, keyPrefix string, reg prometheus.Registerer, log *slog.Logger) *IPLimiter {
	if keyPrefix == "" {
		keyPrefix = config.DefaultKeyPrefix
	}
	l := &IPLimiter{node: node, limit: int64(limit), window: window, prefix: keyPrefix + "ip:", log: log,
		counts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_ip_limit_total",
			Help: "Purchase requests counted against SECKILL_IP_LIMIT, by result: allowed, limited (answered 429), unavailable (Redis did not answer: allowed).",
		}, []string{"result"})}
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
	ctx, cancel := context.WithTimeout(ctx, ipLimitBudget)
	defer cancel()
	res, err := ipLimitScript.Run(ctx, l.node, []string{l.prefix + ip}, l.window.Milliseconds()).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("the script answered %v", res)
	}
	if err != nil {
		l.counts.WithLabelValues("unavailable").Inc()
		now := time.Now().UnixNano()
		if last := l.warned.Load(); now-last > int64(time.Second) && l.warned.CompareAndSwap(last, now) {
			l.log.WarnContext(ctx, "the per-IP limit cannot count requests; they are allowed", "ip", ip, "err", err)
		}
		return true, 0
	}
	if res[0] > l.limit {
		l.counts.WithLabelValues("limited").Inc()
		return false, time.Duration(res[1]) * time.Millisecond
	}
	l.counts.WithLabelValues("allowed").Inc()
	return true, 0
}
