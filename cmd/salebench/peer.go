package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/loadtest/driver/load"
	"github.com/seckill/seckill/loadtest/report"
)

// The recipe teams copy (cmd/peer) beside reserve: the same load engine
// as the driver's, the same buyers at once, a new buyer per request, one
// product with stock for all; then how long after its sale the recipe's
// single consumer has every order in MySQL.

// peerProduct is the product the peer sells.
const peerProduct = 1

// peerStock is the product's stock: more than any run sells.
const peerStock = 100_000_000

// peerResult is the peer's run.
type peerResult struct {
	row row
	// catchUp is how long after the sale's end the last of its orders was
	// in MySQL; caughtUp says it got there within peerCatchUp.
	catchUp  time.Duration
	caughtUp bool
	sold     int64
}

// peerCatchUp bounds the wait for the peer's backlog.
const peerCatchUp = 3 * time.Minute

// peer runs the recipe at cmd/peer's binary on its own database and the
// third Redis node, measures it, and waits for its backlog.
func (b *bench) peer(ctx context.Context) (peerResult, error) {
	dsn, drop, err := b.peerDatabase(ctx)
	if err != nil {
		return peerResult{}, err
	}
	defer drop()
	nodes := strings.Split(b.opts.redisAddrs, ",")
	prefix := fmt.Sprintf("salebench-peer-%d:", time.Now().UnixNano())
	url, pid, stop, err := b.startPeer(ctx, dsn, nodes[len(nodes)-1], prefix)
	if err != nil {
		return peerResult{}, err
	}
	defer stop()
	if err := callJSON(ctx, http.MethodPut, fmt.Sprintf("%s/stock/%d", url, peerProduct), map[string]int64{"stock": peerStock}, nil); err != nil {
		return peerResult{}, fmt.Errorf("the peer's stock: %w", err)
	}
	meter := &cpuMeter{pids: []int{pid}}
	plan := &load.Plan{
		Timeout: 30 * time.Second, Bases: []string{url}, Targets: []string{fmt.Sprintf("%s/seckill/%d", url, peerProduct)},
		Purchase: true, Head: []byte(`{"user_id":"peer-`), Mid: []byte(`","n":`), Tail: []byte(`}`),
		Phases:  []load.Phase{{Warm: true, Length: time.Second}, {Start: time.Second, Length: b.opts.duration}},
		Workers: b.opts.concurrency, Stock: -1, Quantity: 1, Progress: meter,
	}
	res, cpu, err := meteredPlan(ctx, plan, meter)
	if err != nil {
		return peerResult{}, fmt.Errorf("the peer: %w", err)
	}
	ended := time.Now()
	ok := res.Codes["200"]
	out := peerResult{row: row{
		what:      "peer: the public repositories' recipe (Lua + stream, an order per transaction)",
		perSecond: float64(ok) / res.Elapsed.Seconds(), p99: res.Latency.P99, unanswered: res.Requests - ok, cpu: cpu,
	}}
	rdb := redis.NewClient(&redis.Options{Addr: nodes[len(nodes)-1]})
	defer rdb.Close()
	left, err := rdb.Get(ctx, fmt.Sprintf("%sstock:%d", prefix, peerProduct)).Int64()
	if err != nil {
		return peerResult{}, fmt.Errorf("the peer's stock in Redis: %w", err)
	}
	out.sold = peerStock - left
	for time.Since(ended) < peerCatchUp && ctx.Err() == nil {
		var w struct{ Orders int64 }
		if err := callJSON(ctx, http.MethodGet, fmt.Sprintf("%s/written/%d", url, peerProduct), nil, &w); err != nil {
			return peerResult{}, fmt.Errorf("the peer's orders: %w", err)
		}
		if w.Orders >= out.sold {
			out.catchUp, out.caughtUp = time.Since(ended), true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out, nil
}

// meteredPlan runs plan and returns its result and the CPU meter's
// processes' CPU per answer over its measured stretch (measuredGroups, for
// a plan of the load engine's own).
func meteredPlan(ctx context.Context, plan *load.Plan, m *cpuMeter) (report.Result, time.Duration, error) {
	stop := sampling(m.sample)
	t, err := plan.Run(ctx)
	stop()
	if err != nil {
		return report.Result{}, 0, err
	}
	res := t.Result()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return res, 0, fmt.Errorf("the CPU of processes %v: %w", m.pids, m.err)
	}
	if m.began.IsZero() || res.Requests == 0 {
		return res, 0, errors.New("the run drew no progress line or had no answer: its CPU per answer is not known")
	}
	from := m.began.Add(plan.Warmup())
	return res, (m.at(from.Add(res.Elapsed)) - m.at(from)) / time.Duration(res.Requests), nil
}

// peerDatabase creates a database of the peer's own and returns its DSN
// and its drop.
func (b *bench) peerDatabase(ctx context.Context) (string, func(), error) {
	cfg, err := mysql.ParseDSN(b.opts.mysqlDSN)
	if err != nil {
		return "", nil, fmt.Errorf("-mysql: %w", err)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("seckill_peer_%d", time.Now().UnixNano())
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		return "", nil, errors.Join(fmt.Errorf("create the peer's database: %w", err), db.Close())
	}
	drop := func() {
		if _, err := db.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			fmt.Fprintln(os.Stderr, "salebench: drop", name, err)
		}
		if err := db.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "salebench: drop", name, err)
		}
	}
	cfg.DBName = name
	return cfg.FormatDSN(), drop, nil
}

// startPeer runs the peer's binary on a free port and waits until it
// answers; stop ends it with SIGTERM (it then clears its Redis keys).
func (b *bench) startPeer(ctx context.Context, dsn, redisAddr, prefix string) (string, int, func(), error) {
	addr, err := freeAddr()
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(b.opts.peer, "-addr", addr, "-redis", redisAddr, "-mysql", dsn, "-prefix", prefix)
	url := "http://" + addr
	stop, err := launch(ctx, cmd, url)
	if err != nil {
		return "", 0, nil, err
	}
	return url, cmd.Process.Pid, stop, nil
}

// callJSON sends in (nil: no body) to url as JSON, wants a 200, and
// decodes its body into out when not nil.
func callJSON(ctx context.Context, method, url string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", method, url, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
