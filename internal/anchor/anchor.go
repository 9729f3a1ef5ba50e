// Package anchor is the purchase the benchmarks measure the service
// against: the recipe a team writes first, a transaction per unit, the
// conditional decrement and the order's INSERT, no lock and no cache.
// bench-sale runs it on 1 and 64 connections; make bench-writers beside
// reserve's writers.
package anchor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Buy buys one unit of product for user in a transaction of its own:
// UPDATE products SET stock = stock - 1 WHERE id = ? AND stock >= 1, then
// the order's INSERT, then COMMIT.
func Buy(ctx context.Context, db *sql.DB, product, user int64) (err error) {
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
