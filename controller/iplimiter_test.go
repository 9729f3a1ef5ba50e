package controller_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/controller"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestIPLimitRedisDown: a limit whose Redis does not answer lets every
// request through, and counts them as unavailable.
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
		if ok, _ := l.Allow(ctx, "192.0.2.1"); !ok {
			t.Error("a request was refused while Redis was down; want allowed")
		}
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
	if unavailable != 3 || limited != 1 {
		t.Errorf("seckill_ip_limit_total unavailable %v, limited %v; want 3 and 1", unavailable, limited)
	}
}
