package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/rediscluster"
)

// StartRedisCluster starts a Redis Cluster of masters*(1+replicas)
// redis-server processes on free loopback ports (rediscluster.Start: the
// slots spread over the masters, each with replicas replicas, every
// replica synced), and stops them all when t ends.
func StartRedisCluster(t testing.TB, masters, replicas int) *rediscluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := rediscluster.Start(ctx, t.TempDir(), masters, replicas)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}
