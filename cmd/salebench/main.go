// Command salebench measures purchases of one hot product, in one go on one
// machine, so that its figures can be compared as ratios:
//
//   - two anchors, what MariaDB alone does with the project's own tables: a
//     serial purchase transaction (a conditional UPDATE of the stock and the
//     order's INSERT) on one connection, and the same on 64 connections at
//     once;
//   - the service over HTTP, as a process of its own, under the bundled
//     driver: each safe strategy at 64 buyers with stock enough for every
//     request, redlock with one lock per purchase (batch=1) and with the
//     default batch, on one instance and on two, and the same two runs at
//     256 buyers, where both instances' lines are full;
//   - a flash sale: two instances, 256 buyers, 500 units, 5,000 requests,
//     the default strategy;
//   - sold-out answers against GET /healthz, at the same concurrency;
//   - redlock with a per-IP limit no buyer reaches (SECKILL_IP_LIMIT), on
//     an instance of its own, the load from as many addresses as buyers;
//   - a catalogue of 10,000 products whose demand follows Zipf(1.1), on an
//     instance of its own, then that instance's resident memory and the
//     size of its /metrics.
//
// It prints one table, with the service's CPU per answer beside each of its
// runs (cpu.go), and the ratios the project aims for, met or not.
// scripts/bench-sale.sh builds the service and runs this with a real
// MariaDB and three Redis nodes.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/store"
)

type options struct {
	service     string        // the service's binary
	mysqlDSN    string        // a server DSN, no database
	redisAddrs  string        // three nodes, comma-separated
	duration    time.Duration // each measured run
	concurrency int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "salebench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("salebench", flag.ContinueOnError)
	fs.StringVar(&o.service, "service", "", "the seckill binary to run (required)")
	fs.StringVar(&o.mysqlDSN, "mysql", os.Getenv("SECKILL_TEST_MYSQL_DSN"), "MySQL server DSN, no database (default $SECKILL_TEST_MYSQL_DSN)")
	fs.StringVar(&o.redisAddrs, "redis", os.Getenv("SECKILL_TEST_REDIS_ADDRS"), "three Redis nodes, comma-separated (default $SECKILL_TEST_REDIS_ADDRS)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each measured run")
	fs.IntVar(&o.concurrency, "concurrency", 64, "buyers at once in the anchors and the single-instance runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.service == "" || o.mysqlDSN == "" || o.redisAddrs == "" {
		return errors.New("-service, -mysql and -redis are required (scripts/bench-sale.sh sets them)")
	}
	b := &bench{opts: o, out: out, pids: map[string]int{}}
	return b.all(ctx)
}

// row is one line of the table.
type row struct {
	what       string
	perSecond  float64
	p99        time.Duration
	unanswered int           // 503s and failures
	cpu        time.Duration // the service's CPU per answer, all its instances; 0: not the service
}

type bench struct {
	opts options
	out  io.Writer
	rows []row
	// pids are the processes of the services started, by URL.
	pids map[string]int
}

// run runs cfg, one strategy, against services this bench started, and
// returns its row.
func (b *bench) run(ctx context.Context, what string, cfg driver.Config) (row, error) {
	res, cpu, err := measured(ctx, cfg, b.pidsOf(cfg.URLs))
	if err != nil {
		return row{}, fmt.Errorf("%s: %w", what, err)
	}
	rw := resultRow(what, res)
	rw.cpu = cpu
	return rw, nil
}

// pidsOf returns the processes of the services at urls.
func (b *bench) pidsOf(urls []string) []int {
	pids := make([]int, len(urls))
	for i, u := range urls {
		pids[i] = b.pids[u]
	}
	return pids
}

// figures is what all measures, for the table's notes and the ratios.
type figures struct {
	serial, parallel anchorResult
	batch1, batched  row           // redlock on one instance: batch=1, the default batch
	two              row           // redlock, the default batch, on two instances
	full, twoFull    row           // the same on one and on two instances, fullLines buyers
	sale             driver.Result // the flash sale
	soldOut, health  float64       // answers per second
	soldOutCPU       time.Duration // the service's CPU per sold-out answer
	healthCPU        time.Duration // and per GET /healthz
	limited          row           // redlock, the default batch, SECKILL_IP_LIMIT on
	cat              catalogueResult
}

// sale503 counts the flash sale's purchases answered 503 or not at all.
func (f *figures) sale503() int {
	return f.sale.Outcomes[driver.OutcomeLockTimeout] + f.sale.Outcomes[driver.Outcome5xx] + f.sale.Outcomes[driver.OutcomeTransport]
}

// all runs every measure in turn, each service started for it kept
// running to the end, and prints the table and the ratios.
func (b *bench) all(ctx context.Context) error {
	fmt.Fprintf(b.out, "bench-sale: %d CPUs, %s; %d buyers, %v per run\n\n", runtime.NumCPU(), runtime.Version(), b.opts.concurrency, b.opts.duration)
	var f figures
	if err := b.anchors(ctx, &f); err != nil {
		return err
	}
	dsn, dropDB, err := b.database(ctx)
	if err != nil {
		return err
	}
	defer dropDB()
	token := "bench-" + fmt.Sprint(time.Now().UnixNano())
	first, stopFirst, err := b.startService(ctx, dsn, token)
	if err != nil {
		return err
	}
	defer stopFirst()
	if err := b.strategies(ctx, first, token, &f); err != nil {
		return err
	}
	second, stopSecond, err := b.startService(ctx, dsn, token)
	if err != nil {
		return err
	}
	defer stopSecond()
	if err := b.twoInstances(ctx, []string{first, second}, token, &f); err != nil {
		return err
	}
	if err := b.soldOutAgainstHealth(ctx, first, token, &f); err != nil {
		return err
	}

	// The per-IP limit's cost: one Redis round trip per purchase. A limit
	// no buyer reaches, the load from as many addresses as buyers.
	limited, stopLimited, err := b.startService(ctx, dsn, token, "SECKILL_IP_LIMIT=1000000000/1m")
	if err != nil {
		return err
	}
	defer stopLimited()
	if f.limited, err = b.run(ctx, "service redlock, default batch, SECKILL_IP_LIMIT on",
		b.steady([]string{limited}, token, "redlock", 0, b.opts.concurrency)); err != nil {
		return err
	}
	b.rows = append(b.rows, f.limited)

	if f.cat, err = b.catalogue(ctx, dsn, token); err != nil {
		return err
	}
	b.rows = append(b.rows, f.cat.row)
	if err := b.writeTable(&f); err != nil {
		return err
	}
	b.writeRatios(&f)
	return nil
}

// anchors measures what MariaDB alone does: serially, and on as many
// connections as buyers.
func (b *bench) anchors(ctx context.Context, f *figures) error {
	var err error
	if f.serial, err = b.anchor(ctx, 1); err != nil {
		return err
	}
	if f.parallel, err = b.anchor(ctx, b.opts.concurrency); err != nil {
		return err
	}
	b.rows = append(b.rows,
		row{what: "anchor: serial purchase transaction, 1 connection, no lock", perSecond: f.serial.perSecond, p99: f.serial.p99},
		row{what: fmt.Sprintf("anchor: conditional UPDATE + INSERT, %d connections", b.opts.concurrency), perSecond: f.parallel.perSecond, p99: f.parallel.p99})
	return nil
}

// strategies measures each safe strategy on the instance at url, with
// stock enough for every request, redlock with a lock per purchase and
// with the default batch.
func (b *bench) strategies(ctx context.Context, url, token string, f *figures) error {
	for _, r := range []struct {
		label, strategy string
		batch           int
	}{
		{"service optimistic over HTTP", "optimistic", 0},
		{"service pessimistic (default batch)", "pessimistic", 0},
		{"service token (default batch)", "token", 0},
		{"service redlock, batch=1: a lock per purchase", "redlock", 1},
		{"service redlock, default batch", "redlock", 0},
	} {
		rw, err := b.run(ctx, r.label, b.steady([]string{url}, token, r.strategy, r.batch, 0))
		if err != nil {
			return err
		}
		b.rows = append(b.rows, rw)
		switch {
		case r.strategy == "redlock" && r.batch == 1:
			f.batch1 = rw
		case r.strategy == "redlock":
			f.batched = rw
		}
	}
	return nil
}

// fullLines is how many buyers the runs with full lines have: at 64, two
// instances' lines hold 32 buyers each, so a hold on either sells half of
// what one instance's sells, for the same cost; at 256, each line holds
// more than a batch (100) at every hold, on one instance as on two.
const fullLines = 256

// twoInstances measures redlock on both instances of urls, at the bench's
// buyers, then with full lines on the first alone and on both, then the
// flash sale on them.
func (b *bench) twoInstances(ctx context.Context, urls []string, token string, f *figures) error {
	for _, r := range []struct {
		label  string
		urls   []string
		buyers int
		into   *row
	}{
		{"service redlock, default batch, 2 instances", urls, b.opts.concurrency, &f.two},
		{fmt.Sprintf("service redlock, default batch, %d buyers", fullLines), urls[:1], fullLines, &f.full},
		{fmt.Sprintf("service redlock, default batch, 2 instances, %d buyers", fullLines), urls, fullLines, &f.twoFull},
	} {
		cfg := b.steady(r.urls, token, "redlock", 0, 0)
		cfg.Concurrency = r.buyers
		rw, err := b.run(ctx, r.label, cfg)
		if err != nil {
			return err
		}
		*r.into = rw
		b.rows = append(b.rows, rw)
	}
	flash, err := driver.Run(ctx, driver.Config{
		URLs: urls, AdminToken: token, Stock: 500, Strategies: []string{""},
		Requests: 5000, Concurrency: 256,
	})
	if err != nil {
		return fmt.Errorf("flash sale: %w", err)
	}
	f.sale = flash.Results[0]
	return nil
}

// steady is a measured run of strategy at the instances of urls, with
// stock enough for every request, after a warmup of a second; batch 0 is
// the server's, clients 0 leaves the source address to the system.
func (b *bench) steady(urls []string, token, strategy string, batch, clients int) driver.Config {
	return driver.Config{
		URLs: urls, AdminToken: token, Stock: 100_000_000, Strategies: []string{strategy},
		Duration: b.opts.duration, Warmup: time.Second, Concurrency: b.opts.concurrency, Batch: batch, Clients: clients,
	}
}

// resultRow is the table's row of a run's result: its rate of sales, the
// p99 of its 201s and the requests not answered 201.
func resultRow(what string, res driver.Result) row {
	return row{what: what, perSecond: res.SellRate, p99: res.LatencyByOutcome[driver.OutcomeCreated].P99,
		unanswered: res.Requests - res.Successes}
}

// writeTable prints the table of rows and the figures beside it.
func (b *bench) writeTable(f *figures) error {
	tw := tabwriter.NewWriter(b.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WHAT\tPURCHASES/S\tP99\tNOT 201\tCPU/ANSWER")
	for _, r := range b.rows {
		cpu := "-"
		if r.cpu > 0 {
			cpu = round(r.cpu).String()
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%d\t%s\n", r.what, r.perSecond, round(r.p99), r.unanswered, cpu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(b.out, "\nflash sale, 2 instances, 256 buyers, 500 units, 5000 requests, %s: sold out in %s, %d answered 503, final stock %d, %s\n",
		f.sale.Strategy, round(f.sale.TimeToSoldOut), f.sale503(), f.sale.Audit.Stock, f.sale.Verdict)
	fmt.Fprintf(b.out, "sold-out answers: %.0f/s, CPU/ANSWER %s; GET /healthz: %.0f/s, CPU/ANSWER %s (both %d at once, %v)\n",
		f.soldOut, round(f.soldOutCPU), f.health, round(f.healthCPU), b.opts.concurrency, b.opts.duration)
	fmt.Fprintln(b.out, "CPU/ANSWER: the service's CPU (user and system, all its instances) per answer of the run's")
	fmt.Fprintln(b.out, "    measured stretch, from /proc; MariaDB, Redis and the driver use the same 2 cores besides.")
	fmt.Fprintf(b.out, "after the catalogue run: RSS %.0f MB, GET /metrics %.0f KB\n\n", float64(f.cat.rss)/(1<<20), float64(f.cat.metrics)/1024)
	return nil
}

// writeRatios prints the ratios the project aims for, met or not.
func (b *bench) writeRatios(f *figures) {
	fmt.Fprintln(b.out, "ratios (one run, one machine):")
	aim := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT MET"
	}
	sale503 := f.sale503()
	r1 := f.batch1.perSecond / f.serial.perSecond
	fmt.Fprintf(b.out, "  redlock batch=1 / serial anchor        %5.2fx  (aim >= 0.5: %s); p99 %s (aim < 250ms: %s); %d not 201 (aim 0: %s)\n",
		r1, aim(r1 >= 0.5), round(f.batch1.p99), aim(f.batch1.p99 < 250*time.Millisecond), f.batch1.unanswered, aim(f.batch1.unanswered == 0))
	r2 := f.batched.perSecond / f.parallel.perSecond
	fmt.Fprintf(b.out, "  redlock default batch / 64-conn anchor %5.2fx  (aim >= 3: %s); p99 %s (aim < 50ms: %s)\n",
		r2, aim(r2 >= 3), round(f.batched.p99), aim(f.batched.p99 < 50*time.Millisecond))
	fmt.Fprintf(b.out, "  flash sale sold out in %s (aim <= 250ms: %s), %d answered 503 (aim 0: %s)\n",
		round(f.sale.TimeToSoldOut), aim(f.sale.TimeToSoldOut > 0 && f.sale.TimeToSoldOut <= 250*time.Millisecond), sale503, aim(sale503 == 0))
	r4 := f.soldOut / f.health
	fmt.Fprintf(b.out, "  sold-out answers / GET /healthz        %5.2fx  (aim >= 0.8: %s)\n", r4, aim(r4 >= 0.8))
	r5 := f.batched.perSecond / f.health
	fmt.Fprintf(b.out, "  hot product / GET /healthz             %5.2fx  (aim >= 0.4: %s); p99 %s (aim < 25ms: %s)\n",
		r5, aim(r5 >= 0.4), round(f.batched.p99), aim(f.batched.p99 < 25*time.Millisecond))
	r6 := f.two.perSecond / f.batched.perSecond
	fmt.Fprintf(b.out, "  two instances / one (hot product)      %5.2fx  (aim >= 0.9: %s)\n", r6, aim(r6 >= 0.9))
	fmt.Fprintf(b.out, "  the same, %d buyers (lines full)      %5.2fx  (beside the aim, whose run has %d buyers)\n",
		fullLines, f.twoFull.perSecond/f.full.perSecond, b.opts.concurrency)
	r7 := f.cat.row.perSecond / f.batched.perSecond
	fmt.Fprintf(b.out, "  catalogue / hot product                %5.2fx  (aim >= 0.5: %s); p99 %s (aim < 50ms: %s); %d products, Zipf(%.1f)\n",
		r7, aim(r7 >= 0.5), round(f.cat.row.p99), aim(f.cat.row.p99 < 50*time.Millisecond), catalogueProducts, catalogueZipf)
	fmt.Fprintf(b.out, "  RSS after the catalogue                %5.0f MB  (aim < 200 MB: %s); GET /metrics %.0f KB (aim < 256 KB: %s)\n",
		float64(f.cat.rss)/(1<<20), aim(f.cat.rss < 200<<20), float64(f.cat.metrics)/1024, aim(f.cat.metrics < 256<<10))
	fmt.Fprintf(b.out, "  IP limit on / off (redlock default)    %5.2fx  (one Redis round trip per purchase; p99 %s)\n",
		f.limited.perSecond/f.batched.perSecond, round(f.limited.p99))
	fmt.Fprintf(b.out, "  CPU/ANSWER, hot product / GET /healthz %5.2fx  (two instances / one %.2fx; catalogue / hot product %.2fx)\n",
		ratio(f.batched.cpu, f.healthCPU), ratio(f.two.cpu, f.batched.cpu), ratio(f.cat.row.cpu, f.batched.cpu))
}

// ratio is a / b, 0 when b is.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// anchorResult is what an anchor measured.
type anchorResult struct {
	perSecond float64
	p99       time.Duration
}

// anchor runs conns connections that each buy one unit at a time of one
// product, in a transaction of their own: UPDATE products SET stock =
// stock - 1 WHERE id = ? AND stock >= 1, then the order's INSERT.
func (b *bench) anchor(ctx context.Context, conns int) (anchorResult, error) {
	dsn, drop, err := b.database(ctx)
	if err != nil {
		return anchorResult{}, err
	}
	defer drop()
	db, err := store.OpenMySQL(ctx, dsn)
	if err != nil {
		return anchorResult{}, err
	}
	defer store.CloseSQL(db)
	if err := model.Migrate(ctx, db); err != nil {
		return anchorResult{}, err
	}
	p := model.Product{Name: "anchor", Stock: 100_000_000, InitialStock: 100_000_000}
	if err := db.WithContext(ctx).Create(&p).Error; err != nil {
		return anchorResult{}, fmt.Errorf("anchor product: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return anchorResult{}, err
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)

	var (
		mu        sync.Mutex
		latencies []time.Duration
		failed    atomic.Int64
		users     atomic.Int64
		wg        sync.WaitGroup
	)
	deadline := time.Now().Add(b.opts.duration)
	start := time.Now()
	for range conns {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if err := buy(ctx, sqlDB, p.ID, users.Add(1)); err != nil {
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := failed.Load(); n > 0 {
		return anchorResult{}, fmt.Errorf("anchor on %d connections: %d purchases failed", conns, n)
	}
	slices.Sort(latencies)
	return anchorResult{perSecond: float64(len(latencies)) / elapsed.Seconds(), p99: latencies[len(latencies)*99/100]}, nil
}

// buy is the anchors' purchase transaction.
func buy(ctx context.Context, db *sql.DB, product, user int64) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback())
		}
	}()
	res, err := tx.ExecContext(ctx, "UPDATE products SET stock = stock - 1 WHERE id = ? AND stock >= 1", product)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("decrement: %d rows, %v", n, err)
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO orders (product_id, user_id, quantity, strategy, remaining_stock, created_at) VALUES (?, ?, 1, 'anchor', 0, NOW(3))",
		product, fmt.Sprintf("u-%d", user))
	if err != nil {
		return err
	}
	return tx.Commit()
}

// database names a new database on the server and returns its DSN and a
// func that drops it (the service or OpenMySQL creates it).
func (b *bench) database(ctx context.Context) (string, func(), error) {
	cfg, err := mysql.ParseDSN(b.opts.mysqlDSN)
	if err != nil {
		return "", nil, fmt.Errorf("-mysql: %w", err)
	}
	name := fmt.Sprintf("seckill_bench_%d", time.Now().UnixNano())
	server := *cfg
	cfg.DBName = name
	cfg.ParseTime = true
	drop := func() {
		db, err := sql.Open("mysql", server.FormatDSN())
		if err != nil {
			fmt.Fprintln(os.Stderr, "salebench: drop", name, err)
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			fmt.Fprintln(os.Stderr, "salebench: drop", name, err)
		}
	}
	return cfg.FormatDSN(), drop, nil
}

// startService runs the service's binary on a free port against dsn and
// the Redis nodes, with the strategy override on, and waits until it is
// ready. stop ends it with SIGTERM, as an orchestrator would.
func (b *bench) startService(ctx context.Context, dsn, token string, env ...string) (string, func(), error) {
	url, stop, _, err := b.startProcess(ctx, dsn, token, env...)
	return url, stop, err
}

// startProcess is startService that also returns the process's ID.
func (b *bench) startProcess(ctx context.Context, dsn, token string, env ...string) (string, func(), int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, 0, err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", nil, 0, err
	}
	cmd := exec.Command(b.opts.service)
	cmd.Env = append(os.Environ(),
		"SECKILL_ADDR="+addr,
		"SECKILL_MYSQL_DSN="+dsn,
		"SECKILL_REDIS_ADDRS="+b.opts.redisAddrs,
		"SECKILL_ADMIN_TOKEN="+token,
		"SECKILL_STRATEGY_OVERRIDE=true",
	)
	cmd.Env = append(cmd.Env, env...)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return "", nil, 0, fmt.Errorf("start %s: %w", b.opts.service, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // it may have exited already: Wait says so
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill() // past its drain: what Wait reports is not news
			<-done
		}
	}
	url := "http://" + addr
	c := &client.Client{BaseURL: url, CallTimeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for c.Healthz(ctx) != nil {
		select {
		case err := <-done:
			return "", nil, 0, fmt.Errorf("the service exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return "", nil, 0, fmt.Errorf("the service did not answer /healthz within 30s\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.pids[url] = cmd.Process.Pid
	return url, stop, cmd.Process.Pid, nil
}

// soldOutAgainstHealth measures, on one instance, the rate of purchases of
// a product it knows is sold out, then that of GET /healthz, each at the
// same concurrency for the same time, and the service's CPU per answer of
// each.
func (b *bench) soldOutAgainstHealth(ctx context.Context, url, token string, f *figures) error {
	c := &client.Client{BaseURL: url, AdminToken: token}
	p, err := c.CreateProduct(ctx, "sold out", 1)
	if err != nil {
		return err
	}
	if _, err := c.SetStock(ctx, p.ID, 0); err != nil {
		return err
	}
	pids := b.pidsOf([]string{url})
	res, cpu, err := measured(ctx, driver.Config{URLs: []string{url}, AdminToken: token, ProductID: p.ID, Strategies: []string{""},
		Duration: b.opts.duration, Warmup: time.Second, Concurrency: b.opts.concurrency}, pids)
	if err != nil {
		return fmt.Errorf("sold-out answers: %w", err)
	}
	if res.Outcomes[driver.OutcomeSoldOut] != res.Requests {
		return fmt.Errorf("sold-out answers: %d of %d were sold_out", res.Outcomes[driver.OutcomeSoldOut], res.Requests)
	}
	f.soldOut, f.soldOutCPU = res.Throughput, cpu
	h, cpu, err := measured(ctx, driver.Config{URLs: []string{url}, Endpoint: "/healthz",
		Duration: b.opts.duration, Warmup: time.Second, Concurrency: b.opts.concurrency}, pids)
	if err != nil {
		return fmt.Errorf("GET /healthz: %w", err)
	}
	f.health, f.healthCPU = h.Throughput, cpu
	return nil
}

// The catalogue run: many products, a few hot ones.
const (
	catalogueProducts = 10_000
	catalogueZipf     = 1.1
)

// catalogueResult is the catalogue run's row, and what the instance that
// served it weighs afterwards.
type catalogueResult struct {
	row          row
	rss, metrics int64 // bytes
}

// catalogue runs redlock with the default batch over catalogueProducts
// products whose demand follows Zipf(catalogueZipf), on an instance of its
// own, then reads that instance's resident memory and the size of its
// /metrics.
func (b *bench) catalogue(ctx context.Context, dsn, token string) (catalogueResult, error) {
	url, stop, pid, err := b.startProcess(ctx, dsn, token)
	if err != nil {
		return catalogueResult{}, err
	}
	defer stop()
	what := fmt.Sprintf("service redlock, default batch, %d products, Zipf(%.1f)", catalogueProducts, catalogueZipf)
	rw, err := b.run(ctx, what, driver.Config{
		URLs: []string{url}, AdminToken: token, Stock: 100_000_000, Strategies: []string{"redlock"},
		Products: catalogueProducts, Zipf: catalogueZipf,
		Duration: b.opts.duration, Warmup: time.Second, Concurrency: b.opts.concurrency,
	})
	if err != nil {
		return catalogueResult{}, err
	}
	out := catalogueResult{row: rw}
	if out.rss, err = residentBytes(pid); err != nil {
		return catalogueResult{}, err
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return catalogueResult{}, fmt.Errorf("GET /metrics: %w", err)
	}
	out.metrics, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return catalogueResult{}, fmt.Errorf("GET /metrics: %w", err)
	}
	return out, nil
}

// residentBytes reads a process's resident set size from /proc.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("the service's memory: %w", err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("the service's memory: VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("the service's memory: no VmRSS in /proc/%d/status", pid)
}

// round rounds d for a table.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
