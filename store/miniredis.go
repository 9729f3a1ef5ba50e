package store

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// MiniRedisTick is how often the embedded Redis nodes' clocks are advanced.
// A key expires within one tick of its TTL: at most a tick late, and at most
// a tick early when it was written just before a tick (miniredis keeps a
// remaining duration per key, not a deadline, so a tick takes its whole
// length off a key that only lived part of it). 10 ms keeps that error
// inside Redlock's allowance for clock drift (redsync's: 1% of the TTL, 20 ms
// for the default 2 s lease) at a cost of one short pass over the keys that
// carry a TTL, per node, per tick.
const MiniRedisTick = 10 * time.Millisecond

// StartMiniRedis starts n independent in-process Redis nodes
// (github.com/alicebob/miniredis/v2), each on 127.0.0.1 and a free port, and
// returns their addresses. The returned func stops them (once; later calls
// do nothing); their ports refuse connections afterwards.
//
// miniredis does not expire keys by itself: a TTL only runs down when the
// node is told that time passed. One goroutine tells every node, every
// MiniRedisTick, how much real time has passed since it last did, so that an
// abandoned lock expires on time, to within a tick.
// miniredis's ClockTTL option is exact but re-scans the keys on every
// command, which slows every command as keys accumulate.
func StartMiniRedis(n int) ([]string, func() error, error) {
	m, err := StartMiniRedisNodes(n)
	if err != nil {
		return nil, nil, err
	}
	return m.Addrs(), m.Close, nil
}

// MiniRedis is a set of independent in-process Redis nodes, as
// StartMiniRedis starts them, that can also be made to fail: a node stopped
// (Stop) refuses connections and cuts those it had, as a crashed server
// does; started again (Start) it answers on the same port with nothing in
// it, as a redis-server restarted without persistence does. The demo injects
// its Redis faults through it.
type MiniRedis struct {
	mu    sync.Mutex
	nodes []*miniredis.Miniredis // nil while stopped
	addrs []string

	done  chan struct{}
	wg    sync.WaitGroup
	close func() error
}

// StartMiniRedisNodes starts n independent in-process Redis nodes, each on
// 127.0.0.1 and a free port, with their clocks advanced every
// MiniRedisTick (see StartMiniRedis). Close stops them.
func StartMiniRedisNodes(n int) (*MiniRedis, error) {
	if n < 1 {
		return nil, fmt.Errorf("store: start %d embedded redis nodes: need at least one", n)
	}
	m := &MiniRedis{done: make(chan struct{})}
	for range n {
		node := miniredis.NewMiniRedis()
		if err := node.StartAddr("127.0.0.1:0"); err != nil {
			m.closeNodes()
			return nil, fmt.Errorf("store: start embedded redis: %w", err)
		}
		m.nodes = append(m.nodes, node)
		m.addrs = append(m.addrs, node.Addr())
	}
	m.wg.Go(m.advanceClocks)
	m.close = sync.OnceValue(func() error {
		close(m.done)
		m.wg.Wait()
		m.closeNodes()
		return nil
	})
	return m, nil
}

// Addrs returns the nodes' addresses, host:port, in order.
func (m *MiniRedis) Addrs() []string { return append([]string(nil), m.addrs...) }

// Close stops every node (once; later calls do nothing).
func (m *MiniRedis) Close() error { return m.close() }

// Stop takes node i down: its port refuses connections and the connections
// it had are cut. What it held is lost. Stopping a stopped node does
// nothing.
func (m *MiniRedis) Stop(i int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i < 0 || i >= len(m.nodes) {
		return fmt.Errorf("store: stop embedded redis node %d of %d", i, len(m.nodes))
	}
	if m.nodes[i] != nil {
		m.nodes[i].Close()
		m.nodes[i] = nil
	}
	return nil
}

// Start brings node i back on its address, empty: no keys, no cached
// scripts, no subscribers (clients reconnect by themselves). Starting a
// node that runs does nothing.
func (m *MiniRedis) Start(i int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i < 0 || i >= len(m.nodes) {
		return fmt.Errorf("store: start embedded redis node %d of %d", i, len(m.nodes))
	}
	if m.nodes[i] != nil {
		return nil
	}
	node := miniredis.NewMiniRedis()
	if err := node.StartAddr(m.addrs[i]); err != nil {
		return fmt.Errorf("store: restart embedded redis node %d on %s: %w", i, m.addrs[i], err)
	}
	m.nodes[i] = node
	return nil
}

// Restart stops node i and starts it again, empty: a crash and a restart
// without persistence.
func (m *MiniRedis) Restart(i int) error {
	if err := m.Stop(i); err != nil {
		return err
	}
	return m.Start(i)
}

// Up says whether node i runs.
func (m *MiniRedis) Up(i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return i >= 0 && i < len(m.nodes) && m.nodes[i] != nil
}

func (m *MiniRedis) closeNodes() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, node := range m.nodes {
		if node != nil {
			node.Close()
			m.nodes[i] = nil
		}
	}
}

// advanceClocks fast-forwards every running node by the real time elapsed,
// every tick, until done is closed.
func (m *MiniRedis) advanceClocks() {
	t := time.NewTicker(MiniRedisTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
			now := time.Now()
			elapsed := now.Sub(last)
			last = now
			m.mu.Lock()
			for _, node := range m.nodes {
				if node != nil {
					node.FastForward(elapsed)
				}
			}
			m.mu.Unlock()
		}
	}
}
