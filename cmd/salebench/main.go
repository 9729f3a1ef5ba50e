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
//     size of its /metrics;
//   - buyers known by their tokens (SECKILL_BUYER_AUTH=jwt), a fresh
//     token for each, once per algorithm (RS256, ES256, EdDSA), beside the
//     verify of a fresh token alone (buyers.go);
//   - with -peer, the recipe teams copy (cmd/peer: one Lua script, one
//     stream, an order per transaction) beside reserve, and how long its
//     orders take to be in MySQL after its sale (peer.go).
//
// It prints one table, with the service's CPU per answer beside each of its
// runs (cpu.go), and the ratios the project aims for, met or not.
// scripts/bench-sale.sh builds the service and runs this with a real
// MariaDB and three Redis nodes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

type options struct {
	service     string        // the service's binary
	peer        string        // the recipe's binary (cmd/peer); empty: no peer row
	mysqlDSN    string        // a server DSN, no database
	redisAddrs  string        // three nodes, comma-separated
	duration    time.Duration // each measured run
	concurrency int
	cluster     bool // the cluster bench (cluster.go) instead
	jwt         bool // only the hot product under open and under jwt (buyers.go)
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
	fs.StringVar(&o.peer, "peer", "", "cmd/peer's binary: measure the recipe teams copy beside reserve (optional)")
	fs.StringVar(&o.mysqlDSN, "mysql", os.Getenv("SECKILL_TEST_MYSQL_DSN"), "MySQL server DSN, no database (default $SECKILL_TEST_MYSQL_DSN)")
	fs.StringVar(&o.redisAddrs, "redis", os.Getenv("SECKILL_TEST_REDIS_ADDRS"), "three Redis nodes, comma-separated (default $SECKILL_TEST_REDIS_ADDRS)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each measured run")
	fs.IntVar(&o.concurrency, "concurrency", 64, "buyers at once in the anchors and the single-instance runs")
	fs.BoolVar(&o.cluster, "cluster", false, "measure reserve on one Redis node against a Redis Cluster it starts (3 masters, 3 replicas) instead")
	fs.BoolVar(&o.jwt, "jwt", false, "measure only the hot product under open and under jwt, per algorithm")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.cluster && o.jwt {
		return errors.New("-cluster and -jwt are two benches: give one")
	}
	if o.service == "" || o.mysqlDSN == "" || o.redisAddrs == "" {
		return errors.New("-service, -mysql and -redis are required (scripts/bench-sale.sh sets them)")
	}
	b := &bench{opts: o, out: out, pids: map[string]int{}}
	if o.cluster {
		return b.clusterAll(ctx)
	}
	if o.jwt {
		return b.jwtAll(ctx)
	}
	return b.all(ctx)
}

// row is one line of the table.
type row struct {
	what       string
	perSecond  float64
	p99        time.Duration
	unanswered int           // 503s and failures
	cpu        time.Duration // the service's CPU per answer, all its instances; 0: not the service
	// writeLag is the p99 of reserve's write lag; broken its promises not
	// kept (0 for the other strategies).
	writeLag time.Duration
	broken   int
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

// figures is what all measures, for the table's notes and the ratios.
type figures struct {
	serial, parallel anchorResult
	batch1, batched  row           // redlock on one instance: batch=1, the default batch
	two              row           // redlock, the default batch, on two instances
	full, twoFull    row           // the same on one and on two instances, fullLines buyers
	sale             report.Result // the flash sale
	soldOut, health  float64       // answers per second
	soldOutCPU       time.Duration // the service's CPU per sold-out answer
	healthCPU        time.Duration // and per GET /healthz
	limited          row           // redlock, the default batch, SECKILL_IP_LIMIT on
	cat              catalogueResult
	// reserve on one instance and on two, and over the catalogue.
	reserve, reserveTwo row
	reserveCat          catalogueResult
	// peer is the recipe teams copy (cmd/peer), measured as reserve is.
	peer peerResult
	// jwt is the hot product under SECKILL_BUYER_AUTH=jwt, per algorithm.
	jwt jwtResult
	// sweep is the hot product before and during the sweep of a backlog.
	sweep sweepResult
}

// sale503 counts the flash sale's purchases answered 503 or not at all.
func (f *figures) sale503() int {
	return f.sale.Outcomes[report.OutcomeLockTimeout] + f.sale.Outcomes[report.Outcome5xx] + f.sale.Outcomes[report.OutcomeTransport]
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
	if b.opts.peer != "" {
		if f.peer, err = b.peer(ctx); err != nil {
			return err
		}
		b.rows = append(b.rows, f.peer.row)
	}
	if f.jwt, err = b.buyersJWT(ctx, dsn, token); err != nil {
		return err
	}
	if f.sweep, err = b.sweepCost(ctx, dsn, first, token); err != nil {
		return err
	}
	b.rows = append(b.rows, f.sweep.first, f.sweep.before, f.sweep.during)
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

	// The per-IP limit's cost: an IP's requests counted in Redis a block at a time. A limit
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

	if f.cat, err = b.catalogue(ctx, dsn, token, "redlock"); err != nil {
		return err
	}
	b.rows = append(b.rows, f.cat.row)
	if f.reserveCat, err = b.catalogue(ctx, dsn, token, "reserve"); err != nil {
		return err
	}
	b.rows = append(b.rows, f.reserveCat.row)
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
		{"service reserve: 202s, the orders written behind", "reserve", 0},
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
		case r.strategy == "reserve":
			f.reserve = rw
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
		label    string
		strategy string
		urls     []string
		buyers   int
		into     *row
	}{
		{"service redlock, default batch, 2 instances", "redlock", urls, b.opts.concurrency, &f.two},
		{"service reserve, 2 instances", "reserve", urls, b.opts.concurrency, &f.reserveTwo},
		{fmt.Sprintf("service redlock, default batch, %d buyers", fullLines), "redlock", urls[:1], fullLines, &f.full},
		{fmt.Sprintf("service redlock, default batch, 2 instances, %d buyers", fullLines), "redlock", urls, fullLines, &f.twoFull},
	} {
		cfg := b.steady(r.urls, token, r.strategy, 0, 0)
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
	if res.Outcomes[report.OutcomeSoldOut] != res.Requests {
		return fmt.Errorf("sold-out answers: %d of %d were sold_out", res.Outcomes[report.OutcomeSoldOut], res.Requests)
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
	// writerP99 and writerMax bound reserve's write lag as the instance's
	// writer measured it while the sale ran (seconds, the upper bounds of
	// seckill_reserve_write_lag_seconds' buckets); lagged says they are
	// known.
	writerP99, writerMax float64
	lagged               bool
}

// catalogue runs strategy (redlock: with the default batch) over
// catalogueProducts products whose demand follows Zipf(catalogueZipf), on
// an instance of its own, then reads that instance's resident memory and
// the size of its /metrics.
func (b *bench) catalogue(ctx context.Context, dsn, token, strategy string) (catalogueResult, error) {
	url, stop, pid, err := b.startProcess(ctx, dsn, token)
	if err != nil {
		return catalogueResult{}, err
	}
	defer stop()
	what := fmt.Sprintf("service %s, %d products, Zipf(%.1f)", strategy, catalogueProducts, catalogueZipf)
	if strategy == "redlock" {
		what = fmt.Sprintf("service redlock, default batch, %d products, Zipf(%.1f)", catalogueProducts, catalogueZipf)
	}
	rw, err := b.run(ctx, what, driver.Config{
		URLs: []string{url}, AdminToken: token, Stock: 100_000_000, Strategies: []string{strategy},
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
	body, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return catalogueResult{}, fmt.Errorf("GET /metrics: %w", err)
	}
	out.metrics = int64(len(body))
	m, err := client.ParseMetrics(body)
	if err != nil {
		return catalogueResult{}, err
	}
	p99, ok99 := m.BucketOf("seckill_reserve_write_lag_seconds", 0.99)
	top, okTop := m.BucketOf("seckill_reserve_write_lag_seconds", 1)
	out.writerP99, out.writerMax, out.lagged = p99, top, ok99 && okTop
	return out, nil
}
