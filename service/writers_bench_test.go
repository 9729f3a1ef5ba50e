package service_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/anchor"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
)

// BenchmarkWritersDrain measures the reservations per second reserve's
// writers sustain: a backlog of them, made by an instance that runs no
// writer (64 buyers at once), is written by the writer of a second
// instance, timed from its start to the last order. The backlog is spread
// over a catalogue (2,000 products, Zipf(1.1) demand: most of them cold)
// or on one product. Beside it, in the same run and on the same database,
// the 64-connection anchor: a transaction per unit (the conditional
// decrement and the order's INSERT), as bench-sale's. It reports the
// writers' rate, the anchor's, their ratio, and the writers' rate per
// busy core of the machine (all of it: the writer, MariaDB, Redis) while
// they drained. Run once: make bench-writers.
func BenchmarkWritersDrain(b *testing.B) {
	for _, tc := range []struct {
		name     string
		products int
		backlog  int
	}{
		{"catalogue", 2000, 40_000},
		{"one_product", 1, 40_000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				benchDrain(b, tc.products, tc.backlog)
			}
		})
	}
}

// benchDrain is one run of BenchmarkWritersDrain.
func benchDrain(b *testing.B, products, backlog int) {
	ctx := b.Context()
	f := newFixture(b, nil)
	seller := f.instance(settings{Strategy: "reserve", NoWriter: true})
	ids := make([]int64, products)
	for i := range ids {
		ids[i] = seller.product(b, 1_000_000).ID
	}
	zipf := func(r *rand.Rand) func() int64 {
		if products == 1 {
			return func() int64 { return ids[0] }
		}
		z := rand.NewZipf(r, 1.1, 1, uint64(products-1))
		return func() int64 { return ids[z.Uint64()] }
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			pick := zipf(rand.New(rand.NewPCG(uint64(g), 1)))
			for i := next.Add(1); i <= int64(backlog); i = next.Add(1) {
				p := service.Purchase{ProductID: pick(), UserID: fmt.Sprint("u-", i), Quantity: 1, RequestID: fmt.Sprint("r-", i)}
				if r, err := seller.svc.Purchase(ctx, p); err != nil || r.Reservation == nil {
					errs <- fmt.Errorf("purchase %d: %+v, %w", i, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	anchor := anchorRate(b, f, 3*time.Second)

	busyBefore := busyJiffies(b)
	start := time.Now()
	f.instance(settings{Strategy: "reserve", Consumer: "drain"})
	var written int64
	for written < int64(backlog) {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("%d of %d reservations written after 5 min", written, backlog)
		}
		time.Sleep(20 * time.Millisecond)
		if err := f.db.Model(&model.Order{}).Where("strategy = ?", "reserve").Count(&written).Error; err != nil {
			b.Fatal(err)
		}
	}
	took := time.Since(start)
	busy := float64(busyJiffies(b)-busyBefore) / 100 / took.Seconds() // cores, at 100 jiffies a second
	rate := float64(backlog) / took.Seconds()
	b.ReportMetric(rate, "reservations/s")
	b.ReportMetric(anchor, "anchor/s")
	b.ReportMetric(rate/anchor, "x_anchor")
	b.ReportMetric(rate/busy, "reservations/core-s")
}

// anchorRate runs 64 connections that each buy one unit at a time of one
// product for d, a transaction per unit, on f's database, and returns the
// units bought per second.
func anchorRate(b *testing.B, f *fixture, d time.Duration) float64 {
	ctx := b.Context()
	p := model.Product{Name: "anchor", Stock: 100_000_000, InitialStock: 100_000_000}
	if err := f.db.WithContext(ctx).Create(&p).Error; err != nil {
		b.Fatal(err)
	}
	db, err := f.db.DB()
	if err != nil {
		b.Fatal(err)
	}
	var bought, user atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	start := time.Now()
	failed := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := anchor.Buy(ctx, db, p.ID, user.Add(1)); err != nil {
					failed <- err
					return
				}
				bought.Add(1)
			}
		})
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		b.Fatal(err)
	}
	return float64(bought.Load()) / time.Since(start).Seconds()
}

// busyJiffies is the machine's CPU time spent on anything but idling
// since boot, in jiffies (/proc/stat's first line).
func busyJiffies(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	var busy int64
	for i, field := range strings.Fields(line)[1:] {
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %q: %v", line, err)
		}
		if i < 8 && i != 3 && i != 4 { // not idle, iowait, nor guest (counted in user)
			busy += n
		}
	}
	return busy
}
