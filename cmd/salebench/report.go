package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/seckill/seckill/loadtest/report"
)

// resultRow is the table's row of a run's result: its rate of sales, the
// p99 of its 201s (and 202s, under reserve), the requests not answered so,
// and under reserve the write lag and the promises not kept.
func resultRow(what string, res report.Result) row {
	rw := row{what: what, perSecond: res.SellRate, p99: res.SuccessLatency.P99, unanswered: res.Requests - res.Successes}
	if res.SuccessLatency.Count == 0 {
		rw.p99 = res.LatencyByOutcome[report.OutcomeCreated].P99
	}
	if p := res.Promises; p != nil {
		rw.writeLag, rw.broken = p.WriteLag.P99, p.Broken()
	}
	return rw
}

// writeTable prints the table of rows and the figures beside it.
func (b *bench) writeTable(f *figures) error {
	if err := b.writeRows(); err != nil {
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
	fmt.Fprintf(b.out, "  IP limit on / off (redlock default)    %5.2fx  (an IP's requests counted a block at a time; p99 %s)\n",
		f.limited.perSecond/f.batched.perSecond, round(f.limited.p99))
	fmt.Fprintf(b.out, "  CPU/ANSWER, hot product / GET /healthz %5.2fx  (two instances / one %.2fx; catalogue / hot product %.2fx)\n",
		ratio(f.batched.cpu, f.healthCPU), ratio(f.two.cpu, f.batched.cpu), ratio(f.cat.row.cpu, f.batched.cpu))
	r8 := f.reserve.perSecond / f.health
	fmt.Fprintf(b.out, "  reserve, hot product / GET /healthz    %5.2fx  (aim >= 0.5: %s); p99 %s (aim <= 10ms: %s); redlock's %.2fx\n",
		r8, aim(r8 >= 0.5), round(f.reserve.p99), aim(f.reserve.p99 <= 10*time.Millisecond), r5)
	r9 := f.reserve.perSecond / f.parallel.perSecond
	fmt.Fprintf(b.out, "  reserve's writers / 64-conn anchor     %5.2fx  (aim >= 3: %s; a floor: the writers kept up with the 202s)\n", r9, aim(r9 >= 3))
	fmt.Fprintf(b.out, "  reserve's write lag p99                %s  (aim <= 1s: %s); promises not kept %d (aim 0: %s)\n",
		round(f.reserve.writeLag), aim(f.reserve.writeLag <= time.Second), f.reserve.broken+f.reserveTwo.broken+f.reserveCat.row.broken,
		aim(f.reserve.broken+f.reserveTwo.broken+f.reserveCat.row.broken == 0))
	r10 := f.reserveTwo.perSecond / f.reserve.perSecond
	fmt.Fprintf(b.out, "  reserve, two instances / one           %5.2fx  (aim >= 0.95: %s)\n", r10, aim(r10 >= 0.95))
	r11 := f.reserveCat.row.perSecond / f.reserve.perSecond
	fmt.Fprintf(b.out, "  reserve, catalogue / its hot product   %5.2fx  (aim >= 0.8: %s); write lag p99 %s\n",
		r11, aim(r11 >= 0.8), round(f.reserveCat.row.writeLag))
	if c := f.reserveCat; c.lagged {
		fmt.Fprintf(b.out, "  reserve, catalogue, the writer's lag while it sold: p99 <= %gs (aim <= 1s: %s), max <= %gs (aim <= 2s: %s)\n",
			c.writerP99, aim(c.writerP99 <= 1), c.writerMax, aim(c.writerMax <= 2))
	} else {
		fmt.Fprintf(b.out, "  reserve, catalogue, the writer's lag while it sold: past its last bucket (30s), or none written\n")
	}
	if p := f.peer; p.row.perSecond > 0 {
		r := f.reserve.perSecond / p.row.perSecond
		catchUp := "not within " + peerCatchUp.String()
		if p.caughtUp {
			catchUp = round(p.catchUp).String()
		}
		fmt.Fprintf(b.out, "  reserve / the peer recipe (hot)        %5.2fx  (aim >= 1.0: %s); the peer's %d orders all in MySQL %s after its sale, reserve's write lag p99 %s\n",
			r, aim(r >= 1), p.sold, catchUp, round(f.reserve.writeLag))
	}
	b.writeJWT(f)
	r12 := f.sweep.during.perSecond / f.sweep.before.perSecond
	fmt.Fprintf(b.out, "  hot product, sweeping a backlog / not  %5.2fx  (aim >= 0.95: %s); %d of %d due orders expired during the run\n",
		r12, aim(r12 >= 0.95), f.sweep.expired, sweepBacklog)
}

// writeRows writes the table of b's rows.
func (b *bench) writeRows() error {
	tw := tabwriter.NewWriter(b.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WHAT\tPURCHASES/S\tP99\tNOT 201\tCPU/ANSWER")
	for _, r := range b.rows {
		cpu := "-"
		if r.cpu > 0 {
			cpu = round(r.cpu).String()
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%d\t%s\n", r.what, r.perSecond, round(r.p99), r.unanswered, cpu)
	}
	return tw.Flush()
}

// writeJWT writes the ratios of the runs under jwt to open's: the
// service's CPU per answer over open's at the same rate, against the
// verify alone; the rate as fast as each goes, with a fresh buyer per
// purchase and with each buyer's token reused (each beside open's run of
// its pair).
func (b *bench) writeJWT(f *figures) {
	for _, j := range f.jwt.byAlgo {
		extra := j.atRate.cpu - j.openAtRate.cpu
		r := ratio(extra, j.verify)
		reused := j.reused.perSecond / j.openReused.perSecond
		fmt.Fprintf(b.out, "  jwt %-6s CPU/ANSWER over open's at %.0f/s %s (the verify alone %s: %.2fx, aim <= 1.15: %s); rate %.2fx open's, tokens reused %.2fx (aim >= 0.95: %s)\n",
			j.alg, f.jwt.rate, round(extra), round(j.verify), r, aim(r <= 1.15), j.fast.perSecond/f.jwt.open.perSecond, reused, aim(reused >= 0.95))
	}
}

// aim says whether an aim is met.
func aim(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

// ratio is a / b, 0 when b is.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
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
