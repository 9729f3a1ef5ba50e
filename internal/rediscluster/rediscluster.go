// Package rediscluster starts a real Redis Cluster of redis-server
// processes on free loopback ports and plays its faults: a replica that
// lags, a master killed, a replica's takeover, the old master's return as a
// replica, a slot moved between masters. The tests (through testenv), the
// workshop's failover scenario and the cluster bench use it; it needs
// redis-server and redis-cli (Debian's redis-server package brings both).
package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Cluster is a Redis Cluster of redis-server processes: masters, each with
// its replicas.
type Cluster struct {
	// Nodes are its processes, masters first as redis-cli made them.
	Nodes []*Node
}

// Addrs are the addresses of every node: seeds for a cluster client.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// PIDs are the processes' IDs, of those running.
func (c *Cluster) PIDs() []int {
	var out []int
	for _, n := range c.Nodes {
		if pid := n.PID(); pid != 0 {
			out = append(out, pid)
		}
	}
	return out
}

// Close kills every process.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		_ = n.Thaw() // a frozen process is killed all the same; this only tidies
		n.Kill()
	}
}

// Start starts masters*(1+replicas) redis-server processes in cluster
// mode, each keeping nothing but its cluster configuration, in a directory
// of its own under dir, on free loopback ports; joins them with redis-cli
// --cluster create (the hash slots spread over the masters, each with
// replicas replicas); and waits until every node says the cluster is ok
// and every replica has synced. Every process gets SIGKILL when this one
// dies. On an error, what was started is stopped.
func Start(ctx context.Context, dir string, masters, replicas int) (*Cluster, error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("rediscluster: %w (apt-get install redis-server brings it)", err)
		}
	}
	c := &Cluster{}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for i := range masters * (1 + replicas) {
		n, err := startNode(ctx, filepath.Join(dir, "node-"+strconv.Itoa(i)))
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("rediscluster: redis-cli --cluster create: %w\n%s", err, out)
	}
	for _, n := range c.Nodes {
		if err := n.waitReady(ctx); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

// Node returns the node at addr, or nil.
func (c *Cluster) Node(addr string) *Node {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// line is one line of CLUSTER NODES.
type line struct {
	id, addr, master string
	isMaster         bool
	slots            [][2]int
}

// nodes reads CLUSTER NODES from the first live node that answers.
func (c *Cluster) nodes(ctx context.Context) ([]line, error) {
	var out string
	err := errors.New("rediscluster: no node is running")
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		cl := n.client()
		out, err = cl.ClusterNodes(ctx).Result()
		cl.Close()
		if err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("rediscluster: CLUSTER NODES: %w", err)
	}
	var lines []line
	for _, s := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(s)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		l := line{id: f[0], addr: addr, master: f[3], isMaster: strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail")}
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
			l.slots = append(l.slots, [2]int{a, b})
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// MasterOf returns the master serving slot, as a live node sees it now,
// and its replicas.
func (c *Cluster) MasterOf(ctx context.Context, slot int) (master *Node, replicas []*Node, err error) {
	lines, err := c.nodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, l := range lines {
		if !l.isMaster {
			continue
		}
		for _, r := range l.slots {
			if slot < r[0] || slot > r[1] {
				continue
			}
			for _, m := range lines {
				if m.master == l.id {
					replicas = append(replicas, c.Node(m.addr))
				}
			}
			return c.Node(l.addr), replicas, nil
		}
	}
	return nil, nil, fmt.Errorf("rediscluster: no master serves slot %d", slot)
}

// Masters returns the masters serving slots now, as a live node sees it.
func (c *Cluster) Masters(ctx context.Context) ([]*Node, error) {
	lines, err := c.nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Node
	for _, l := range lines {
		if l.isMaster && len(l.slots) > 0 {
			out = append(out, c.Node(l.addr))
		}
	}
	return out, nil
}

// until calls try every 50 ms until it succeeds, timeout passes or ctx
// ends, and returns its last error.
func until(ctx context.Context, timeout time.Duration, try func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := try()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
