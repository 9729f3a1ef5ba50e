package testenv

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a Redis Cluster of redis-server processes a test
// started: masters, each with its replicas, on free loopback ports.
type RedisCluster struct {
	// Nodes are its processes, masters first as redis-cli made them.
	Nodes []*Redis
}

// Addrs are the addresses of every node: seeds for a cluster client.
func (c *RedisCluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// StartRedisCluster starts masters*(1+replicas) redis-server processes in
// cluster mode, keeping nothing on disk, joins them into one cluster with
// redis-cli --cluster create (the hash slots spread over the masters, each
// with replicas replicas), waits until every node says the cluster is ok,
// and stops them all when t ends.
func StartRedisCluster(t testing.TB, masters, replicas int) *RedisCluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("testenv: redis-cli not found (make test installs it with redis-server): %v", err)
	}
	c := &RedisCluster{}
	for range masters * (1 + replicas) {
		c.Nodes = append(c.Nodes, startRedis(t, "--save", "", "--appendonly", "no",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.Nodes {
		client := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		var info string
		ok := Until(30*time.Second, func() bool {
			info, err = client.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		client.Close()
		if !ok {
			t.Fatalf("testenv: the cluster's node %s is not ok after 30 s: %v\n%s", n.Addr, err, info)
		}
	}
	return c
}
