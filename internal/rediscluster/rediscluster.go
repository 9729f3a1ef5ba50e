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
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/childproc"
)

// Node is one redis-server process of a cluster.
type Node struct {
	Addr string
	port string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Running says the process is there (not killed; it may be frozen).
func (n *Node) Running() bool { return n.cmd != nil }

// PID is the process's ID, 0 when it is not running.
func (n *Node) PID() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// start starts the process and waits until it answers PING.
func (n *Node) start(ctx context.Context) error {
	n.cmd = exec.Command("redis-server", "--port", n.port, "--bind", "127.0.0.1", "--dir", n.dir,
		"--logfile", filepath.Join(n.dir, "redis.log"), "--save", "", "--appendonly", "no",
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
	childproc.DieWithParent(n.cmd)
	if err := n.cmd.Start(); err != nil {
		n.cmd = nil
		return fmt.Errorf("rediscluster: start redis-server on %s: %w", n.Addr, err)
	}
	done := make(chan struct{})
	n.done = done
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait() // the exit status of a killed process is not news
		close(done)
	}(n.cmd)
	c := n.client()
	defer c.Close()
	err := until(ctx, 5*time.Second, func() error {
		select {
		case <-done:
			// It exited (its port or its bus port taken meanwhile): a PING
			// answered now would be someone else's.
			return errExited
		default:
		}
		return c.Ping(ctx).Err()
	})
	if err != nil {
		n.Kill()
		return fmt.Errorf("rediscluster: redis-server on %s did not answer: %w", n.Addr, err)
	}
	return nil
}

// errExited says a node's process ended while it was awaited.
var errExited = errors.New("the process exited")

// client is a plain client of this node alone.
func (n *Node) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 3 * time.Second})
}

// Kill kills the process (SIGKILL: nothing is flushed on the way out), a
// frozen one too, and waits until it is gone.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Kill() // it may have exited already: done says so
	<-n.done
	n.cmd = nil
}

// Freeze stops the process (SIGSTOP), as a frozen VM would: its
// connections stay open and nothing answers. Thaw lets it go on.
func (n *Node) Freeze() error { return n.signal(syscall.SIGSTOP) }

// Thaw lets a frozen process go on (SIGCONT).
func (n *Node) Thaw() error { return n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) error {
	if n.cmd == nil || n.cmd.Process == nil {
		return fmt.Errorf("rediscluster: %s is not running", n.Addr)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("rediscluster: signal %v to %s: %w", sig, n.Addr, err)
	}
	return nil
}

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

// startNode starts one node on a free port, trying another port a few
// times when the one found is taken meanwhile.
func startNode(ctx context.Context, dir string) (*Node, error) {
	var err error
	for range 10 {
		var port string
		if port, err = freePort(); err != nil {
			return nil, err
		}
		n := &Node{Addr: net.JoinHostPort("127.0.0.1", port), port: port, dir: dir}
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("rediscluster: %w", err)
		}
		if err = n.start(ctx); err == nil {
			return n, nil
		}
	}
	return nil, err
}

// waitReady waits until the node says the cluster is ok and, a replica,
// that it has synced with its master (so that WAIT counts it).
func (n *Node) waitReady(ctx context.Context) error {
	c := n.client()
	defer c.Close()
	var info string
	err := until(ctx, 30*time.Second, func() error {
		var err error
		if info, err = c.ClusterInfo(ctx).Result(); err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return errors.New("the cluster is not ok")
		}
		if info, err = c.Info(ctx, "replication").Result(); err != nil {
			return err
		}
		if strings.Contains(info, "role:master") || synced(info) {
			return nil
		}
		return errors.New("a replica not synced")
	})
	if err != nil {
		return fmt.Errorf("rediscluster: node %s: %w\n%s", n.Addr, err, info)
	}
	return nil
}

// synced says INFO replication is a replica's whose link to its master is
// up and whose sync is done.
func synced(info string) bool {
	return strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") &&
		strings.Contains(info, "master_sync_in_progress:0")
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

// Lag makes replica fall behind master and stay behind: once it has
// caught up with master, the replica is frozen (SIGSTOP), and master drops its replicas' links (CLIENT KILL TYPE
// replica), so that what master is sent from now on waits in its backlog
// and never reaches the frozen replica's socket (what the kernel had
// received for it already, it still reads when thawed). Thaw lets the
// replica go on; it reconnects if master is still there.
func (c *Cluster) Lag(ctx context.Context, master, replica *Node) error {
	cl := master.client()
	defer cl.Close()
	// First the replica catches up: it lacks only what comes after.
	rc := replica.client()
	defer rc.Close()
	err := until(ctx, 30*time.Second, func() error {
		m, err := cl.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		r, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if want, got := infoField(m, "master_repl_offset"), infoField(r, "slave_repl_offset"); want == "" || got != want {
			return fmt.Errorf("the replica %s is at offset %q of its master's %q", replica.Addr, got, want)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rediscluster: lag: %w", err)
	}
	if err := replica.Freeze(); err != nil {
		return err
	}
	if err := cl.Do(ctx, "client", "kill", "type", "replica").Err(); err != nil {
		return fmt.Errorf("rediscluster: CLIENT KILL TYPE replica on %s: %w", master.Addr, err)
	}
	return nil
}

// infoField is the value of field in an INFO answer, "" when it has none.
func infoField(info, field string) string {
	for l := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v
		}
	}
	return ""
}

// Takeover makes replica the master of its master's slots at once (CLUSTER
// FAILOVER TAKEOVER: no agreement asked of the master or the other
// masters, as an operator does when the master is gone), and waits until
// every live node sees it serve them and says the cluster is ok.
func (c *Cluster) Takeover(ctx context.Context, replica *Node) error {
	cl := replica.client()
	defer cl.Close()
	if err := cl.Do(ctx, "cluster", "failover", "takeover").Err(); err != nil {
		return fmt.Errorf("rediscluster: CLUSTER FAILOVER TAKEOVER on %s: %w", replica.Addr, err)
	}
	err := c.eachLive(ctx, func(n *Node, nc *redis.Client) error {
		nodes, err := nc.ClusterNodes(ctx).Result()
		if err != nil {
			return err
		}
		info, err := nc.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		for _, l := range strings.Split(nodes, "\n") {
			if strings.Contains(l, replica.Addr+"@") && strings.Contains(l, "master") && strings.Contains(info, "cluster_state:ok") {
				return nil
			}
		}
		return fmt.Errorf("%s does not see %s as a master of an ok cluster yet", n.Addr, replica.Addr)
	})
	if err != nil {
		return fmt.Errorf("rediscluster: takeover: %w", err)
	}
	return nil
}

// eachLive waits, node by node, until check passes on every running node
// (30 s at most for each), and returns the first that did not.
func (c *Cluster) eachLive(ctx context.Context, check func(n *Node, nc *redis.Client) error) error {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		nc := n.client()
		err := until(ctx, 30*time.Second, func() error { return check(n, nc) })
		nc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Rejoin starts a node that was killed (a master failed over) again with
// its cluster configuration: it learns that a replica took its slots over,
// becomes that replica's replica, and Rejoin waits until it has synced.
func (c *Cluster) Rejoin(ctx context.Context, n *Node) error {
	if err := n.start(ctx); err != nil {
		return err
	}
	cl := n.client()
	defer cl.Close()
	err := until(ctx, 30*time.Second, func() error {
		info, err := cl.Info(ctx, "replication").Result()
		if err == nil && !synced(info) {
			err = errors.New("not a synced replica yet")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("rediscluster: %s rejoining: %w", n.Addr, err)
	}
	return nil
}

// MoveSlot moves slot from its master to the master to, as redis-cli
// --cluster reshard does: the slot marked importing on to and migrating on
// its master, its keys MIGRATEd, then migrated runs (the old master now
// answers ASK for the slot's keys, which only to holds), then the slot is
// given to to on every master, and MoveSlot waits until every live node
// sees it there (the old master answers MOVED).
func (c *Cluster) MoveSlot(ctx context.Context, slot int, to *Node, migrated func() error) error {
	from, _, err := c.MasterOf(ctx, slot)
	if err != nil {
		return err
	}
	lines, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	ids := map[string]string{}
	for _, l := range lines {
		ids[l.addr] = l.id
	}
	src, dst := from.client(), to.client()
	defer src.Close()
	defer dst.Close()
	fail := func(what string, err error) error {
		return fmt.Errorf("rediscluster: move slot %d from %s to %s: %s: %w", slot, from.Addr, to.Addr, what, err)
	}
	if err := dst.Do(ctx, "cluster", "setslot", slot, "importing", ids[from.Addr]).Err(); err != nil {
		return fail("IMPORTING", err)
	}
	if err := src.Do(ctx, "cluster", "setslot", slot, "migrating", ids[to.Addr]).Err(); err != nil {
		return fail("MIGRATING", err)
	}
	host, port, _ := net.SplitHostPort(to.Addr)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fail("GETKEYSINSLOT", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fail("MIGRATE", err)
		}
	}
	if migrated != nil {
		if err := migrated(); err != nil {
			return err
		}
	}
	// The new master first, then the old one, then the others.
	given := map[string]bool{}
	for _, l := range append([]line{{addr: to.Addr, isMaster: true}, {addr: from.Addr, isMaster: true}}, lines...) {
		if !l.isMaster || given[l.addr] || c.Node(l.addr) == nil || !c.Node(l.addr).Running() {
			continue
		}
		given[l.addr] = true
		cl := c.Node(l.addr).client()
		err := cl.Do(ctx, "cluster", "setslot", slot, "node", ids[to.Addr]).Err()
		cl.Close()
		if err != nil {
			return fail("NODE on "+l.addr, err)
		}
	}
	err = c.eachLive(ctx, func(n *Node, nc *redis.Client) error {
		shards, err := nc.ClusterShards(ctx).Result()
		if err != nil {
			return err
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if r.Start <= int64(slot) && int64(slot) <= r.End {
					for _, m := range sh.Nodes {
						if m.Role == "master" && net.JoinHostPort(m.IP, strconv.FormatInt(m.Port, 10)) == to.Addr {
							return nil
						}
					}
				}
			}
		}
		return fmt.Errorf("%s does not see slot %d on %s yet", n.Addr, slot, to.Addr)
	})
	if err != nil {
		return fail("wait", err)
	}
	return nil
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

// freePort returns a port for a node: free, and its cluster bus port (the
// port + 10000) free too, both below the kernel's range of ports for
// outgoing connections (ip_local_port_range), where no test's or program's
// ":0" listener and no outgoing connection is given one meanwhile.
func freePort() (string, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	if low < 21000 {
		return "", fmt.Errorf("rediscluster: ip_local_port_range starts at %d: no room below it for a port and its bus port", low)
	}
	for range 200 {
		p := 10000 + rand.IntN(low-20000)
		if free(p) && free(p+10000) {
			return strconv.Itoa(p), nil
		}
	}
	return "", errors.New("rediscluster: no free port and bus port found below the outgoing range")
}

// free says nothing listens on port p of the loopback address now.
func free(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}
