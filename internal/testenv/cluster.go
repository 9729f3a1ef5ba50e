package testenv

import (
	"context"
	"fmt"
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
// with replicas replicas), waits until every node says the cluster is ok
// and every replica has synced, and stops them all when t ends.
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
			if info, err = client.ClusterInfo(ctx).Result(); err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
			// A replica has synced with its master, so that WAIT counts it.
			info, err = client.Info(ctx, "replication").Result()
			return err == nil && (strings.Contains(info, "role:master") ||
				strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0"))
		})
		client.Close()
		if !ok {
			t.Fatalf("testenv: the cluster's node %s is not ok (or not synced with its master) after 30 s: %v\n%s", n.Addr, err, info)
		}
	}
	return c
}

// Node returns the node of the cluster at addr.
func (c *RedisCluster) Node(t testing.TB, addr string) *Redis {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	t.Fatalf("testenv: no node of the cluster is at %s", addr)
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	isMaster         bool
	slots            [][2]int
}

// nodes reads CLUSTER NODES from a live node.
func (c *RedisCluster) nodes(t testing.TB) []clusterNode {
	t.Helper()
	var out string
	var err error
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		out, err = cl.ClusterNodes(context.Background()).Result()
		cl.Close()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("testenv: CLUSTER NODES: %v", err)
	}
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: addr, master: f[3], isMaster: strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail")}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being imported or migrated
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, _ := strconv.Atoi(lo)
			b, _ := strconv.Atoi(hi)
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// MasterOf returns the master serving slot, as the cluster's live nodes
// see it now, and its replicas.
func (c *RedisCluster) MasterOf(t testing.TB, slot int) (master *Redis, replicas []*Redis) {
	t.Helper()
	nodes := c.nodes(t)
	for _, n := range nodes {
		if !n.isMaster {
			continue
		}
		for _, r := range n.slots {
			if slot < r[0] || slot > r[1] {
				continue
			}
			for _, m := range nodes {
				if m.master == n.id {
					replicas = append(replicas, c.Node(t, m.addr))
				}
			}
			return c.Node(t, n.addr), replicas
		}
	}
	t.Fatalf("testenv: no master serves slot %d", slot)
	return nil, nil
}

// Takeover makes replica the master of its master's slots at once (CLUSTER
// FAILOVER TAKEOVER: no agreement asked of the master or the other
// masters, as an operator does when the master is gone), and waits until
// every live node sees it serve them and says the cluster is ok.
func (c *RedisCluster) Takeover(t testing.TB, replica *Redis) {
	t.Helper()
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
	defer cl.Close()
	if err := cl.Do(ctx, "cluster", "failover", "takeover").Err(); err != nil {
		t.Fatalf("testenv: CLUSTER FAILOVER TAKEOVER on %s: %v", replica.Addr, err)
	}
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		nc := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		var nodes, info string
		ok := Until(30*time.Second, func() bool {
			nodes, _ = nc.ClusterNodes(ctx).Result()
			info, _ = nc.ClusterInfo(ctx).Result()
			for _, line := range strings.Split(nodes, "\n") {
				if strings.Contains(line, replica.Addr+"@") && strings.Contains(line, "master") {
					return strings.Contains(info, "cluster_state:ok")
				}
			}
			return false
		})
		nc.Close()
		if !ok {
			t.Fatalf("testenv: %s does not see %s as a master after 30 s:\n%s\n%s", n.Addr, replica.Addr, nodes, info)
		}
	}
}

// MoveSlot moves slot from its master to the master to, as redis-cli
// --cluster reshard does: the slot marked importing on to and migrating on
// its master, its keys MIGRATEd, then migrated runs (the old master now
// answers ASK for the slot's keys, which only to holds), then the slot is
// given to to on every master and the test waits until every live node
// sees it there (the old master answers MOVED).
func (c *RedisCluster) MoveSlot(t testing.TB, slot int, to *Redis, migrated func()) {
	t.Helper()
	ctx := context.Background()
	from, _ := c.MasterOf(t, slot)
	ids := map[string]string{}
	for _, n := range c.nodes(t) {
		ids[n.addr] = n.id
	}
	client := func(r *Redis) *redis.Client {
		cl := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	src, dst := client(from), client(to)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("testenv: move slot %d from %s to %s: %s: %v", slot, from.Addr, to.Addr, what, err)
		}
	}
	must("IMPORTING", dst.Do(ctx, "cluster", "setslot", slot, "importing", ids[from.Addr]).Err())
	must("MIGRATING", src.Do(ctx, "cluster", "setslot", slot, "migrating", ids[to.Addr]).Err())
	host, port, _ := strings.Cut(to.Addr, ":")
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		must("GETKEYSINSLOT", err)
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		must("MIGRATE", src.Do(ctx, args...).Err())
	}
	if migrated != nil {
		migrated()
	}
	must("NODE on the new master", dst.Do(ctx, "cluster", "setslot", slot, "node", ids[to.Addr]).Err())
	must("NODE on the old master", src.Do(ctx, "cluster", "setslot", slot, "node", ids[to.Addr]).Err())
	for _, n := range c.nodes(t) {
		if n.isMaster && n.addr != from.Addr && n.addr != to.Addr {
			must("NODE on "+n.addr, client(c.Node(t, n.addr)).Do(ctx, "cluster", "setslot", slot, "node", ids[to.Addr]).Err())
		}
	}
	Eventually(t, 30*time.Second, fmt.Sprintf("every node to see slot %d on %s", slot, to.Addr), func() bool {
		for _, n := range c.Nodes {
			if n.cmd == nil {
				continue
			}
			nc := client(n)
			shards, err := nc.ClusterSlots(ctx).Result()
			if err != nil {
				return false
			}
			for _, s := range shards {
				if s.Start <= slot && slot <= s.End && (len(s.Nodes) == 0 || s.Nodes[0].Addr != to.Addr) {
					return false
				}
			}
		}
		return true
	})
}

// Masters returns the masters serving slots now, as the live nodes see it.
func (c *RedisCluster) Masters(t testing.TB) []*Redis {
	t.Helper()
	var out []*Redis
	for _, n := range c.nodes(t) {
		if n.isMaster && len(n.slots) > 0 {
			out = append(out, c.Node(t, n.addr))
		}
	}
	return out
}

// Rejoin starts a node that was stopped (a master failed over) again with
// its cluster configuration: it learns that a replica took its slots over,
// becomes that replica's replica, and the test waits until it has synced.
func (c *RedisCluster) Rejoin(t testing.TB, n *Redis) {
	t.Helper()
	n.Restart(t)
	cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
	defer cl.Close()
	var info string
	Eventually(t, 30*time.Second, n.Addr+" to rejoin the cluster as a synced replica", func() bool {
		info, _ = cl.Info(context.Background(), "replication").Result()
		return strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") &&
			strings.Contains(info, "master_sync_in_progress:0")
	})
}

// Lag makes replica fall behind master and stay behind: the replica is
// frozen (SIGSTOP), and master drops its replicas' links (CLIENT KILL TYPE
// replica), so that what master is sent from now on waits in its backlog
// and never reaches the frozen replica's socket (what the kernel had
// received for it already, it still reads when thawed). Thaw lets the
// replica go on; it reconnects if master is still there.
func (c *RedisCluster) Lag(t testing.TB, master, replica *Redis) {
	t.Helper()
	replica.Freeze(t)
	cl := redis.NewClient(&redis.Options{Addr: master.Addr, MaxRetries: -1})
	defer cl.Close()
	if err := cl.Do(context.Background(), "client", "kill", "type", "replica").Err(); err != nil {
		t.Fatalf("testenv: CLIENT KILL TYPE replica on %s: %v", master.Addr, err)
	}
}
