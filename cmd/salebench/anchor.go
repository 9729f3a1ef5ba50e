package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/anchor"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/store"
)

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
				if err := anchor.Buy(ctx, sqlDB, p.ID, users.Add(1)); err != nil {
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
