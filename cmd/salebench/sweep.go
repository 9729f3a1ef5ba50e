package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/client"
)

// The expiry sweep's cost on the hot path: the hot product under redlock's
// default batch, just before and then while every instance's sweep works
// through a backlog of unpaid orders of another product, all due.

// sweepBacklog is how many due unpaid orders the backlog holds.
const sweepBacklog = 100_000

// sweepResult is the sweep's measure: the hot product without a backlog
// (twice: the first run after reserve's finds the writers still writing
// its orders, and warms the instance), then during its sweep, and how many
// of its orders expired meanwhile.
type sweepResult struct {
	first, before, during row
	expired               int64
}

// sweepCost measures the hot product on the instance at url before and
// while it sweeps a backlog of sweepBacklog due orders, written into the
// database of dsn behind its back.
func (b *bench) sweepCost(ctx context.Context, dsn, url, token string) (sweepResult, error) {
	var out sweepResult
	var err error
	if out.first, err = b.run(ctx, "service redlock, default batch, no order due", b.steady([]string{url}, token, "redlock", 0, 0)); err != nil {
		return out, err
	}
	if out.before, err = b.run(ctx, "service redlock, default batch, no order due, again", b.steady([]string{url}, token, "redlock", 0, 0)); err != nil {
		return out, err
	}
	c := &client.Client{BaseURL: url, AdminToken: token}
	p, err := c.CreateProduct(ctx, "backlog", sweepBacklog)
	if err != nil {
		return out, fmt.Errorf("the backlog's product: %w", err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return out, err
	}
	defer db.Close()
	if err := writeBacklog(ctx, db, p.ID); err != nil {
		return out, err
	}
	what := fmt.Sprintf("service redlock, default batch, the sweep expiring %d due orders", sweepBacklog)
	if out.during, err = b.run(ctx, what, b.steady([]string{url}, token, "redlock", 0, 0)); err != nil {
		return out, err
	}
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE product_id = ? AND status = 'expired'", p.ID).Scan(&out.expired)
	if err != nil {
		return out, fmt.Errorf("count the expired orders: %w", err)
	}
	return out, nil
}

// writeBacklog writes sweepBacklog unpaid orders of one unit of product,
// due five minutes ago, and takes their units off its stock, as a sale
// that sold it out would have.
func writeBacklog(ctx context.Context, db *sql.DB, product int64) error {
	const rows = 2000
	created, due := time.Now().Add(-20*time.Minute).UTC(), time.Now().Add(-5*time.Minute).UTC()
	for first := 0; first < sweepBacklog; first += rows {
		var q strings.Builder
		q.WriteString("INSERT INTO orders (product_id, user_id, quantity, strategy, remaining_stock, created_at, status, expires_at) VALUES ")
		args := make([]any, 0, rows*5)
		for i := first; i < first+rows; i++ {
			if i > first {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, 1, 'redlock', ?, ?, 'unpaid', ?)")
			args = append(args, product, fmt.Sprintf("backlog-%d", i), sweepBacklog-i-1, created, due)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("write the backlog: %w", err)
		}
	}
	if _, err := db.ExecContext(ctx, "UPDATE products SET stock = 0 WHERE id = ?", product); err != nil {
		return fmt.Errorf("sell the backlog's product out: %w", err)
	}
	return nil
}
