package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/store"
)

// The reserve scenario: the industry's path beside Redlock, then the
// reserve Redis restarted under promises not yet written.
const (
	// reserveStretch is how long each strategy sells in the rate race.
	reserveStretch = 1500 * time.Millisecond
	// reserveBuyers buy at once in the rate race.
	reserveBuyers = 32
	// reserveStock is more than the race can sell.
	reserveStock = 100_000
	// promisedStock is the product of the restarts; promised of its
	// units are reserved (and not written) before the restart, then
	// lateBuyers try for the rest.
	promisedStock = 20
	promised      = 10
	lateBuyers    = 25
)

func reserveScenario() Scenario {
	return Scenario{
		Name:  "reserve",
		Title: "RESERVE: NO LOCK, A REDIS COUNTER, THE ORDERS WRITTEN BEHIND",
		Shows: "reserve beside redlock, and the promises a Redis restart loses without an fsync'd AOF",
		Story: fmt.Sprintf("%d buyers on two instances buy for %s under redlock, then under reserve: a "+
			"Lua script takes the unit from a counter in Redis and answers 202, and the writers write "+
			"the orders behind it. Then %d units of %d are reserved while no writer runs, and the "+
			"reserve Redis is killed and started again: without persistence, then with appendfsync "+
			"always. A writer starts, and %d more buyers come.",
			reserveBuyers, durWords(reserveStretch), promised, promisedStock, lateBuyers),
		Faults: true,
		Run:    runReserve,
	}
}

func runReserve(w *World) (*Result, error) {
	ins, err := w.StartInstances(2, Setup{})
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: []string{"RUN", "SOLD/S", "202s", "KEPT", "LOST", "SOLD", "LEFT", "VERDICT"}}
	var unread int64
	for _, st := range []string{"redlock", "reserve"} {
		row, cutOff, ok, err := w.reserveRace(ins, st)
		if err != nil {
			return nil, err
		}
		res.Add(row, ok)
		unread += cutOff
	}
	res.Notes = []string{"A 202 is a promise: the order is written moments later, exactly once, whichever " +
		"instance's writer takes it. It survives an instance or the database going down; it does not " +
		"survive a Redis that forgets what it acknowledged. The service then derives the counter again " +
		"from the database, and never oversells."}
	if unread > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("reserve sold %d more than the 202s counted: the buyers "+
			"cut off at the end of the %s had their reservations made and written, their answers unread.",
			unread, durWords(reserveStretch)))
	}

	empty, err := store.StartMiniRedisNodes(1)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	w.mu.Lock()
	w.closers = append(w.closers, empty.Close)
	w.mu.Unlock()
	row, ok, err := w.reserveRestart("reserve, no persistence", empty.Addrs()[0],
		func() error { return empty.Restart(0) }, false)
	if err != nil {
		return nil, err
	}
	res.Add(row, ok)

	aof, err := StartRedisServer(w.ctx)
	switch {
	case errors.Is(err, exec.ErrNotFound):
		res.Notes = append(res.Notes, "The embedded Redis cannot persist, and no redis-server is installed "+
			"(apt-get install redis-server): the appendfsync always run is left out.")
		return res, nil
	case err != nil:
		return nil, err
	}
	w.mu.Lock()
	w.closers = append(w.closers, aof.Stop)
	w.mu.Unlock()
	row, ok, err = w.reserveRestart("reserve, appendfsync always", aof.Addr, aof.Restart, true)
	if err != nil {
		return nil, err
	}
	res.Add(row, ok)
	return res, nil
}

// reserveRace sells one product under strategy for reserveStretch on
// ins, then waits for the orders: the row, how many orders outnumber the
// 202s seen (buyers cut off at the end), and whether it held.
func (w *World) reserveRace(ins []*Instance, strategy string) (Row, int64, bool, error) {
	s, err := w.NewSeries(strategy, strategy, ins[0], reserveStock)
	if err != nil {
		return Row{}, 0, false, err
	}
	w.Note("%s: %d buyers for %s", strategy, reserveBuyers, durWords(reserveStretch))
	as := w.Stream(w.ctx, s, ins, reserveStretch, reserveBuyers, 0, client.Override{Strategy: strategy})
	last := time.Now()
	audit, err := w.Finish(s)
	if err != nil {
		return Row{}, 0, false, err
	}
	written := time.Since(last)
	made := count(as, "201") + count(as, "202")
	rate := float64(made) / reserveStretch.Seconds()
	row := Row{Key: strategy, Series: s.ID,
		Cells: []string{strategy, fmt.Sprintf("%.0f", rate), "-", "-", "-", fmt.Sprint(audit.UnitsSold), fmt.Sprint(audit.Stock)}}
	fine, cutOff := "held", int64(0)
	if promises := int64(count(as, "202")); promises > 0 {
		// The buyers cut off at the end of the stretch hung up on their
		// answers: their reservations were made and are written too, so
		// the orders may outnumber the 202s seen, never the other way.
		kept := min(promises, audit.UnitsSold)
		row.Cells[2], row.Cells[3], row.Cells[4] = fmt.Sprint(promises), fmt.Sprint(kept), fmt.Sprint(promises-kept)
		row.Flaw = kept < promises
		cutOff = audit.UnitsSold - kept
		fine = fmt.Sprintf("held: orders in %s", ms(written))
	}
	row.Judge(audit, "promises not written", fine)
	return row, cutOff, !row.Flaw && made > 0, nil
}

// reserveRestart reserves promised units of a product of promisedStock on
// an instance with no writer, its reserve Redis at addr, restarts that
// Redis, then starts a writer and sends lateBuyers more: the row, and
// whether it went as the lesson says (keeps says every promise should be
// kept; without it, every one is lost and nothing is oversold).
func (w *World) reserveRestart(label, addr string, restart func() error, keeps bool) (Row, bool, error) {
	seller, err := w.StartOwn(Setup{Reserve: addr, NoWriter: true})
	if err != nil {
		return Row{}, false, err
	}
	s, err := w.NewSeries(label, label, seller, promisedStock)
	if err != nil {
		return Row{}, false, err
	}
	o := client.Override{Strategy: "reserve"}
	w.Note("%s: %d buyers, no writer running", label, promised)
	var before, after []string
	for range promised {
		if a := w.Buy(w.ctx, s, seller, o); a.RequestID != "" {
			before = append(before, a.RequestID)
		}
	}
	w.Note("%s: the reserve Redis is killed and started again", label)
	if err := restart(); err != nil {
		return Row{}, false, err
	}
	if _, err := w.StartOwn(Setup{Reserve: addr}); err != nil {
		return Row{}, false, err
	}
	w.Note("%s: a writer runs; %d more buyers", label, lateBuyers)
	for range lateBuyers {
		if a := w.Buy(w.ctx, s, seller, o); a.RequestID != "" {
			after = append(after, a.RequestID)
		}
	}
	kept, lost, err := w.PromisesOf(seller, before)
	if err != nil {
		return Row{}, false, err
	}
	if _, lostAfter, err := w.PromisesOf(seller, after); err != nil || lostAfter > 0 {
		return Row{}, false, errors.Join(err, fmt.Errorf("demo: %s: %d promises made after the restart lost", label, lostAfter))
	}
	s.mu.Lock()
	s.broken = lost
	s.mu.Unlock()
	audit, err := w.Finish(s)
	if err != nil {
		return Row{}, false, err
	}
	row := Row{Key: label, Series: s.ID, Flaw: lost > 0,
		Cells: []string{label, "-", fmt.Sprint(len(before)), fmt.Sprint(kept), fmt.Sprint(lost), fmt.Sprint(audit.UnitsSold), fmt.Sprint(audit.Stock)}}
	row.Judge(audit, fmt.Sprintf("%d lost; none oversold", lost), "none lost")
	if keeps {
		return row, !row.Flaw && kept == promised && audit.Held(), nil
	}
	return row, lost == promised && audit.Held() && audit.Stock == 0, nil
}

// startOwn starts an instance set up as s on connections of its own to
// the world's stores (its own reserve Redis, when s names one), or, when
// s names a MySQL DSN, on stores of its own opened with it (the world's
// may be the embedded SQLite, which Share would open again) and the
// world's Redis nodes.
func (w *World) StartOwn(s Setup) (*Instance, error) {
	cfg, opts := w.apply(s)
	open := func() (*app.Stores, error) { return w.stores.Share(w.ctx, cfg) }
	if s.MySQLDSN != "" {
		open = func() (*app.Stores, error) { return app.OpenStores(w.ctx, cfg, w.lab.log) }
	}
	own, err := open()
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	in, err := w.serve(cfg, own, opts)
	if err != nil {
		return nil, errors.Join(err, own.Close())
	}
	w.mu.Lock()
	w.closers = append(w.closers, own.Close)
	w.mu.Unlock()
	return in, nil
}

// promisesOf asks in what became of each reservation of rids, until none
// is pending or unanswered (10 s at most): how many became orders and how many no
// instance knows.
func (w *World) PromisesOf(in *Instance, rids []string) (kept, lost int, err error) {
	pending := rids
	for deadline := time.Now().Add(10 * time.Second); len(pending) > 0 && time.Now().Before(deadline); {
		var still []string
		for _, rid := range pending {
			st, err := in.Client.PurchaseState(w.ctx, rid)
			var e *client.Error
			switch {
			case errors.As(err, &e) && e.Code == "purchase_not_found":
				lost++
			case errors.As(err, &e) && e.Status == http.StatusServiceUnavailable:
				// A store between two states (a Redis Cluster's failover
				// not yet seen by the client): ask again.
				still = append(still, rid)
			case err != nil:
				return kept, lost, fmt.Errorf("demo: what became of %s: %w", rid, err)
			case st.State == "ordered":
				kept++
			case st.State == "pending":
				still = append(still, rid)
			}
		}
		if pending = still; len(pending) > 0 {
			select {
			case <-w.ctx.Done():
				return kept, lost, w.ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return kept, lost, nil
}

// RedisServer is a redis-server of the scenario's own that writes every
// command to its append-only file and syncs it before it answers.
type RedisServer struct {
	Addr, dir string
	ctx       context.Context
	cmd       *exec.Cmd
}

// StartRedisServer starts one on a free port, in a directory of its own;
// exec.ErrNotFound when none is installed.
func StartRedisServer(ctx context.Context) (*RedisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "seckill-demo-redis-")
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("demo: %w", err), os.RemoveAll(dir))
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return nil, errors.Join(fmt.Errorf("demo: %w", err), os.RemoveAll(dir))
	}
	r := &RedisServer{Addr: addr, dir: dir, ctx: ctx}
	if err := r.start(); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return r, nil
}

func (r *RedisServer) start() error {
	_, port, _ := net.SplitHostPort(r.Addr)
	r.cmd = exec.CommandContext(r.ctx, "redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--logfile", filepath.Join(r.dir, "redis.log"))
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("demo: start redis-server: %w", err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c.Ping(r.ctx).Err() == nil {
			return nil
		}
	}
	return fmt.Errorf("demo: redis-server on %s did not answer within 5 s", r.Addr)
}

// kill stops the process with SIGKILL: nothing is flushed on the way out.
func (r *RedisServer) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill() // it may have exited already
		_ = r.cmd.Wait()         // a killed process's exit status is not news
	}
}

// Restart kills it and starts it again from its append-only file.
func (r *RedisServer) Restart() error {
	r.kill()
	return r.start()
}

// Stop kills it and removes its directory.
func (r *RedisServer) Stop() error {
	r.kill()
	return os.RemoveAll(r.dir)
}
