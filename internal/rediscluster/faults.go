package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

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
	fail := func(err error) error {
		return fmt.Errorf("rediscluster: move slot %d from %s to %s: %w", slot, from.Addr, to.Addr, err)
	}
	if err := migrateSlot(ctx, slot, from, to, ids); err != nil {
		return fail(err)
	}
	if migrated != nil {
		if err := migrated(); err != nil {
			return err
		}
	}
	if err := c.giveSlot(ctx, slot, from, to, lines, ids); err != nil {
		return fail(err)
	}
	err = c.eachLive(ctx, func(n *Node, nc *redis.Client) error {
		return seesSlot(ctx, n, nc, slot, to)
	})
	if err != nil {
		return fail(fmt.Errorf("wait: %w", err))
	}
	return nil
}

// migrateSlot marks slot importing on to and migrating on from, and
// MIGRATEs its keys from from to to, 100 at a time; ids are the nodes' IDs
// by address.
func migrateSlot(ctx context.Context, slot int, from, to *Node, ids map[string]string) error {
	host, port, err := net.SplitHostPort(to.Addr)
	if err != nil {
		return err
	}
	src, dst := from.client(), to.client()
	defer src.Close()
	defer dst.Close()
	if err := dst.Do(ctx, "cluster", "setslot", slot, "importing", ids[from.Addr]).Err(); err != nil {
		return fmt.Errorf("IMPORTING: %w", err)
	}
	if err := src.Do(ctx, "cluster", "setslot", slot, "migrating", ids[to.Addr]).Err(); err != nil {
		return fmt.Errorf("MIGRATING: %w", err)
	}
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fmt.Errorf("GETKEYSINSLOT: %w", err)
		}
		if len(keys) == 0 {
			return nil
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("MIGRATE: %w", err)
		}
	}
}

// giveSlot gives slot to to on every live master of lines: the new master
// first, then the old one (from), then the others.
func (c *Cluster) giveSlot(ctx context.Context, slot int, from, to *Node, lines []line, ids map[string]string) error {
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
			return fmt.Errorf("NODE on %s: %w", l.addr, err)
		}
	}
	return nil
}

// seesSlot returns nil when node n, asked through nc, sees slot on the
// master to, else an error that says it does not yet.
func seesSlot(ctx context.Context, n *Node, nc *redis.Client, slot int, to *Node) error {
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
}
