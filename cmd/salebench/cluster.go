package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/rediscluster"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/store"
)

// The cluster bench (-cluster): reserve on one Redis node against reserve
// on a Redis Cluster of three masters with a replica each, all on this
// machine, measured in one run:
//
//   - the catalogue (10,000 products, Zipf(1.1)) on the node and on the
//     cluster: the cluster spreads the products' slots over three masters,
//     which on two cores can only cost (the aim: no more than 10%); and on
//     three masters without replicas, to tell the replicas' share;
//   - one hot product on the node and on the cluster (one slot: one
//     master's one core), and the script alone on the cluster (reserve.lua
//     called as fast as it answers, no service, no HTTP, no writers): the
//     physical limit the service's hot product is held against;
//   - the hot product on the cluster with every reservation waiting for
//     its replica (SECKILL_RESERVE_ACKS=1/100ms): the rate WAIT costs.
//
// Each row has the service's CPU per answer and Redis's (the node's
// process, or every process of the cluster, replicas included).

// clusterAcks is the acknowledgement the acks run asks for.
const clusterAcks = "1/100ms"

// clusterRow is one row of the cluster bench's table.
type clusterRow struct {
	row
	redisCPU time.Duration
}

// clusterFigures is what the cluster bench measures.
type clusterFigures struct {
	hotNode, hotCluster, hotAcks clusterRow
	catNode, catCluster          clusterRow
	catBare                      clusterRow // on three masters without replicas
	script1, scriptBatch         float64    // purchases per second
}

// clusterAll runs the cluster bench and prints its table and ratios.
func (b *bench) clusterAll(ctx context.Context) error {
	node := strings.Split(b.opts.redisAddrs, ",")[0]
	fmt.Fprintf(b.out, "bench-cluster: reserve on one Redis node (%s) and on a Redis Cluster of 3 masters and 3 replicas; %d buyers, %v per run\n\n",
		node, b.opts.concurrency, b.opts.duration)
	dir, err := os.MkdirTemp("", "seckill-cluster-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cl, err := rediscluster.Start(ctx, dir+"/replicated", 3, 1)
	if err != nil {
		return err
	}
	defer cl.Close()
	// The same three masters' work without the replicas' share of it.
	bare, err := rediscluster.Start(ctx, dir+"/bare", 3, 0)
	if err != nil {
		return err
	}
	defer bare.Close()
	nodePID, err := redisPID(ctx, node)
	if err != nil {
		return err
	}
	// One database for every run: its products' IDs and generations go on
	// from run to run, so that no run finds in Redis the counters and
	// records another left (a reset starts a product's new generation).
	dsn, drop, err := b.database(ctx)
	if err != nil {
		return err
	}
	defer drop()
	token := "bench-" + fmt.Sprint(time.Now().UnixNano())
	seeds := "cluster:" + strings.Join(cl.Addrs(), ",")
	var f clusterFigures
	for _, r := range []struct {
		label   string
		reserve string
		pids    []int
		env     []string
		cat     bool
		into    *clusterRow
	}{
		{"reserve, hot product, one node", node, []int{nodePID}, nil, false, &f.hotNode},
		{"reserve, hot product, cluster", seeds, cl.PIDs(), nil, false, &f.hotCluster},
		{"reserve, hot product, cluster, SECKILL_RESERVE_ACKS=" + clusterAcks, seeds, cl.PIDs(), []string{"SECKILL_RESERVE_ACKS=" + clusterAcks}, false, &f.hotAcks},
		{fmt.Sprintf("reserve, %d products, Zipf(%.1f), one node", catalogueProducts, catalogueZipf), node, []int{nodePID}, nil, true, &f.catNode},
		{fmt.Sprintf("reserve, %d products, Zipf(%.1f), cluster", catalogueProducts, catalogueZipf), seeds, cl.PIDs(), nil, true, &f.catCluster},
		{fmt.Sprintf("reserve, %d products, Zipf(%.1f), 3 masters, no replica", catalogueProducts, catalogueZipf),
			"cluster:" + strings.Join(bare.Addrs(), ","), bare.PIDs(), nil, true, &f.catBare},
	} {
		if *r.into, err = b.clusterRun(ctx, dsn, token, r.label, r.reserve, r.pids, r.env, r.cat); err != nil {
			return err
		}
	}
	rdb := store.OpenReserveRedis(cl.Addrs(), true)
	defer rdb.Close()
	if f.script1, err = b.scriptAlone(ctx, rdb, 1); err != nil {
		return err
	}
	if f.scriptBatch, err = b.scriptAlone(ctx, rdb, 64); err != nil {
		return err
	}
	return b.writeCluster(&f)
}

// clusterRun runs reserve, on one product with stock enough for every
// request or over the catalogue, at an instance of its own
// whose reserve Redis is reserveRedis (more env besides), and returns its
// row with the service's CPU and that of redisPIDs.
func (b *bench) clusterRun(ctx context.Context, dsn, token, what, reserveRedis string, redisPIDs []int, env []string, catalogue bool) (clusterRow, error) {
	url, stop, pid, err := b.startProcess(ctx, dsn, token, append(env, "SECKILL_RESERVE_REDIS="+reserveRedis)...)
	if err != nil {
		return clusterRow{}, err
	}
	defer stop()
	cfg := b.steady([]string{url}, token, "reserve", 0, 0)
	if catalogue {
		cfg.Products, cfg.Zipf = catalogueProducts, catalogueZipf
	}
	res, cpu, err := measuredGroups(ctx, cfg, []int{pid}, redisPIDs)
	if err != nil {
		return clusterRow{}, fmt.Errorf("%s: %w", what, err)
	}
	rw := resultRow(what, res)
	rw.cpu = cpu[0]
	return clusterRow{row: rw, redisCPU: cpu[1]}, nil
}

// scriptAlone calls reserve.lua on one product of the cluster from the
// bench's concurrency at once, batch purchases a call, for the run's
// duration, and returns the purchases reserved per second: what one slot's
// master does with the script alone.
func (b *bench) scriptAlone(ctx context.Context, rdb redis.UniversalClient, batch int) (float64, error) {
	prefix := fmt.Sprintf("bench-script-%d:", time.Now().UnixNano())
	s := reserve.New(rdb, prefix)
	const product = 1
	if _, err := s.Load(ctx, product, 1<<50, 1, 0, nil, nil, nil, false, true); err != nil {
		return 0, fmt.Errorf("the script alone: load: %w", err)
	}
	defer func() {
		k := s.KeysOf(product)
		_ = rdb.Del(context.WithoutCancel(ctx), k.Counter, k.Units, k.Requests, k.Stream, k.Where).Err() // a bench's leftovers
	}()
	var reserved, seq atomic.Int64
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(b.opts.duration)
	start := time.Now()
	var wg sync.WaitGroup
	for range b.opts.concurrency {
		wg.Go(func() {
			items := make([]reserve.Item, batch)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				for i := range items {
					n := strconv.FormatInt(seq.Add(1), 10)
					items[i] = reserve.Item{User: "u" + n, Quantity: 1, RequestID: "r" + n}
				}
				rs, err := s.ReserveBatch(ctx, product, 0, 1, items)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				for _, r := range rs {
					if r.Verdict == reserve.Reserved {
						reserved.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("the script alone: %w", firstErr)
	}
	return float64(reserved.Load()) / time.Since(start).Seconds(), nil
}

// redisPID asks the Redis at addr for its process ID.
func redisPID(ctx context.Context, addr string) (int, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO server of %s: %w", addr, err)
	}
	for l := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("INFO server of %s has no process_id", addr)
}

// writeCluster prints the cluster bench's table and ratios.
func (b *bench) writeCluster(f *clusterFigures) error {
	tw := tabwriter.NewWriter(b.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WHAT\tPURCHASES/S\tP99\tNOT 202\tCPU/ANSWER SERVICE\tCPU/ANSWER REDIS\tWRITE LAG P99\tBROKEN")
	for _, r := range []clusterRow{f.hotNode, f.hotCluster, f.hotAcks, f.catNode, f.catCluster, f.catBare} {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%d\t%s\t%s\t%s\t%d\n", r.what, r.perSecond, round(r.p99), r.unanswered,
			round(r.cpu), round(r.redisCPU), round(r.writeLag), r.broken)
	}
	fmt.Fprintf(tw, "reserve.lua alone on the cluster, 1 purchase a call\t%.0f\t-\t-\t-\t-\t-\t-\n", f.script1)
	fmt.Fprintf(tw, "reserve.lua alone on the cluster, 64 purchases a call\t%.0f\t-\t-\t-\t-\t-\t-\n", f.scriptBatch)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(b.out, "CPU/ANSWER REDIS: the node's process, or every process of the cluster (the replicas apply every write too).")
	fmt.Fprintln(b.out, "The service, MariaDB, every Redis and the driver share the machine's cores.")
	fmt.Fprintln(b.out, "\nratios (one run, one machine):")
	r1 := f.catCluster.perSecond / f.catNode.perSecond
	fmt.Fprintf(b.out, "  catalogue, cluster / one node          %5.2fx  (aim >= 0.9: %s); CPU/answer service %.2fx, Redis %.2fx\n",
		r1, aim(r1 >= 0.9), ratio(f.catCluster.cpu, f.catNode.cpu), ratio(f.catCluster.redisCPU, f.catNode.redisCPU))
	fmt.Fprintf(b.out, "  catalogue, 3 masters without replicas / one node %5.2fx  (what the replicas' share costs: CPU/answer Redis %.2fx)\n",
		f.catBare.perSecond/f.catNode.perSecond, ratio(f.catBare.redisCPU, f.catNode.redisCPU))
	r2 := f.hotCluster.perSecond / f.hotNode.perSecond
	fmt.Fprintf(b.out, "  hot product, cluster / one node        %5.2fx  (aim >= 0.9: %s); CPU/answer service %.2fx, Redis %.2fx\n",
		r2, aim(r2 >= 0.9), ratio(f.hotCluster.cpu, f.hotNode.cpu), ratio(f.hotCluster.redisCPU, f.hotNode.redisCPU))
	limit := max(f.script1, f.scriptBatch)
	fmt.Fprintf(b.out, "  hot product, cluster / script alone    %5.2fx  (the script alone: %.0f/s a purchase a call, %.0f/s 64 a call)\n",
		f.hotCluster.perSecond/limit, f.script1, f.scriptBatch)
	fmt.Fprintf(b.out, "  hot product, acks %s / none       %5.2fx  (p99 %s against %s; the price of WAIT)\n",
		clusterAcks, f.hotAcks.perSecond/f.hotCluster.perSecond, round(f.hotAcks.p99), round(f.hotCluster.p99))
	return nil
}
