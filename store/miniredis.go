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
// length off a key that only lived part of it). 10 ms keeps that error well
// inside Redlock's allowance for clock drift (1% of the TTL plus 2 ms, 82 ms
// for the default 8 s lease) at a cost of one short pass over the keys that
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
	if n < 1 {
		return nil, nil, fmt.Errorf("store: start %d embedded redis nodes: need at least one", n)
	}
	nodes := make([]*miniredis.Miniredis, 0, n)
	addrs := make([]string, 0, n)
	closeNodes := func() {
		for _, m := range nodes {
			m.Close()
		}
	}
	for range n {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			closeNodes()
			return nil, nil, fmt.Errorf("store: start embedded redis: %w", err)
		}
		nodes = append(nodes, m)
		addrs = append(addrs, m.Addr())
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { advanceClocks(nodes, MiniRedisTick, done) })

	stop := sync.OnceValue(func() error {
		close(done)
		wg.Wait()
		closeNodes()
		return nil
	})
	return addrs, stop, nil
}

// advanceClocks fast-forwards every node by the real time elapsed, every
// tick, until done is closed.
func advanceClocks(nodes []*miniredis.Miniredis, tick time.Duration, done <-chan struct{}) {
	t := time.NewTicker(tick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			now := time.Now()
			elapsed := now.Sub(last)
			last = now
			for _, m := range nodes {
				m.FastForward(elapsed)
			}
		}
	}
}
