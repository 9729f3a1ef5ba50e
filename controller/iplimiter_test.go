package controller_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/controller"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestIPLimitRedisDown: a limit whose Redis does not answer lets every
// request it cannot count through, and counts them as unavailable.
func TestIPLimitRedisDown(t *testing.T) {
	node := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: node.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	reg := prometheus.NewRegistry()
	l := controller.NewIPLimiter(c, 1, time.Minute, testenv.RandomName("t:")+":", reg, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if ok, _ := l.Allow(ctx, "192.0.2.1"); !ok {
		t.Fatal("the first request was refused")
	}
	if ok, retry := l.Allow(ctx, "192.0.2.1"); ok || retry <= 0 || retry > time.Minute {
		t.Fatalf("the second request = %v, retry %v; want refused, within the minute", ok, retry)
	}
	node.Stop()
	for range 3 {
		if ok, _ := l.Allow(ctx, "192.0.2.2"); !ok {
			t.Error("a request was refused while Redis was down; want allowed")
		}
	}
	// An IP this instance knows to be over the limit stays refused until
	// its window ends: its count only grows until then.
	if ok, _ := l.Allow(ctx, "192.0.2.1"); ok {
		t.Error("the IP over the limit was let through while Redis was down; want refused, its window running")
	}
	m, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var unavailable, limited float64
	for _, f := range m {
		for _, s := range f.GetMetric() {
			switch s.GetLabel()[0].GetValue() {
			case "unavailable":
				unavailable = s.GetCounter().GetValue()
			case "limited":
				limited = s.GetCounter().GetValue()
			}
		}
	}
	if unavailable != 3 || limited != 2 {
		t.Errorf("seckill_ip_limit_total unavailable %v, limited %v; want 3 and 2", unavailable, limited)
	}
}

// TestIPLimitScriptFlushed: a Redis that lost the script (restarted, or
// SCRIPT FLUSH) is sent it again, and the counts go on, exact: the
// pipeline's calls that found no script are counted once, by EVAL.
func TestIPLimitScriptFlushed(t *testing.T) {
	node := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer c.Close()
	l := controller.NewIPLimiter(c, 3, time.Minute, testenv.RandomName("t:")+":", prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx := context.Background()
	allowed := 0
	for i := range 5 {
		if i%2 == 0 {
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if ok, _ := l.Allow(ctx, "192.0.2.9"); ok {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("%d of 5 requests allowed under a limit of 3, the script flushed every other one; want 3", allowed)
	}
}

// TestIPLimitCountsAhead: an IP's requests are taken from Redis a block at
// a time, so that a busy IP costs few calls of the script; never more than
// the limit is let through in a window, on one instance or over two, and
// over two at most a sixteenth of the limit per instance is refused early
// (held in a block by the other).
func TestIPLimitCountsAhead(t *testing.T) {
	node := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer c.Close()
	ctx := context.Background()
	limiter := func(prefix string) *controller.IPLimiter {
		return controller.NewIPLimiter(c, 1000, time.Minute, prefix, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	}
	one := limiter(testenv.RandomName("t:") + ":")
	allowed := 0
	for range 1100 {
		if ok, _ := one.Allow(ctx, "192.0.2.7"); ok {
			allowed++
		}
	}
	if allowed != 1000 {
		t.Errorf("one instance let %d of 1,100 requests through under a limit of 1,000; want 1,000", allowed)
	}
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := -1
	for l := range strings.Lines(stats) {
		if rest, ok := strings.CutPrefix(l, "cmdstat_evalsha:calls="); ok {
			calls, _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		}
	}
	if calls < 1 || calls > 100 {
		t.Errorf("%d calls of the script for 1,100 requests of one IP; want a block at a time, at most 100", calls)
	}

	prefix := testenv.RandomName("t:") + ":"
	a, b := limiter(prefix), limiter(prefix)
	allowed = 0
	for i := range 1100 {
		if ok, _ := []*controller.IPLimiter{a, b}[i%2].Allow(ctx, "192.0.2.8"); ok {
			allowed++
		}
	}
	if allowed > 1000 || allowed < 1000-2*1000/16 {
		t.Errorf("two instances let %d of 1,100 requests through under a limit of 1,000; want at most 1,000, at least %d", allowed, 1000-2*1000/16)
	}
}
