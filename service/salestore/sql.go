package salestore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The statements the MySQL form of the sale store writes by hand, in one
// place (the portable form lets GORM build its own, with ForUpdate and
// the expressions at the end of this file). Each statement's arguments are
// listed beside it; a list of values is appended as sqlList or sqlRows
// spell it.

const (
	stmtBegin    = "START TRANSACTION"
	stmtCommit   = "COMMIT"
	stmtRollback = "ROLLBACK"

	// stmtClaimFence moves a product's fence on by one and leaves the new
	// fence in LAST_INSERT_ID. Args: product ID.
	stmtClaimFence = "UPDATE products SET fence = LAST_INSERT_ID(fence + 1) WHERE id = ?"

	// stmtDecrement takes q from a product's stock if at least q is left
	// and the stock is the database's (not moved to reserve), and leaves
	// the stock it left in LAST_INSERT_ID (never negative here);
	// stmtDecrementClaiming moves the fence on as well. Args: q, now,
	// product ID, q.
	stmtDecrement         = "UPDATE products SET stock = LAST_INSERT_ID(stock - ?), updated_at = ? WHERE id = ? AND stock >= ? AND NOT reserve"
	stmtDecrementClaiming = "UPDATE products SET stock = LAST_INSERT_ID(stock - ?), fence = fence + 1, updated_at = ? WHERE id = ? AND stock >= ? AND NOT reserve"

	// stmtRaiseUnits raises a user's units in one conditional upsert; it
	// changes no row when the sum would pass the limit (the pool counts
	// rows changed, not rows matched: see mysqlForm). Args: product ID,
	// user ID, units, limit.
	stmtRaiseUnits = "INSERT INTO user_units (product_id, user_id, units) VALUES (?, ?, ?) " +
		"ON DUPLICATE KEY UPDATE units = IF(units + VALUES(units) <= ?, units + VALUES(units), units)"

	// stmtProductForUpdate reads a product's stock, fence, generation,
	// returns and whether it sells under reserve, under its row lock. Args:
	// product ID.
	stmtProductForUpdate = "SELECT stock, fence, generation, returns, reserve FROM products WHERE id = ? FOR UPDATE"
	// stmtProductsForUpdate, a list of product IDs, then
	// stmtProductsForUpdateOrder: stmtProductForUpdate for many products,
	// each row's ID first, their locks taken in ascending order. Args: the
	// product IDs.
	stmtProductsForUpdate      = "SELECT id, stock, fence, generation, returns, reserve FROM products WHERE id IN "
	stmtProductsForUpdateOrder = " ORDER BY id FOR UPDATE"
	// stmtUnitsHeldOf, rows of a product and a user, then ")": the units
	// that users hold of products. Args per row: product ID, user ID.
	stmtUnitsHeldOf = "SELECT product_id, user_id, units FROM user_units WHERE (product_id, user_id) IN ("
	// stmtManyDecrement, a "WHEN ? THEN ?" per product, then
	// stmtManyDecrementWhere and the list of the products: the decrement
	// of many products in one UPDATE. Args: each product's ID and units
	// sold, now, the product IDs.
	stmtManyDecrement      = "UPDATE products SET stock = stock - CASE id"
	stmtManyDecrementWhere = " END, updated_at = ? WHERE id IN "
	// stmtUnitsHeld reads the units of a product that a list of users
	// hold. Args: product ID, then the users.
	stmtUnitsHeld = "SELECT user_id, units FROM user_units WHERE product_id = ? AND user_id IN "

	// stmtSaleDecrement, then decrementClaims or nothing, then
	// stmtSaleDecrementWhere, then decrementExact or nothing: a sale's
	// decrement. Args: the units sold, now, product ID, then the units
	// sold again when exact.
	stmtSaleDecrement      = "UPDATE products SET stock = stock - ?"
	decrementClaims        = ", fence = fence + 1"
	stmtSaleDecrementWhere = ", updated_at = ? WHERE id = ?"
	decrementExact         = " AND stock >= ?"

	// stmtSetUnits and stmtSetUnitsUpdate write users' new units. Args
	// per row: product ID, user ID, units.
	stmtSetUnits       = "INSERT INTO user_units (product_id, user_id, units) VALUES "
	stmtSetUnitsUpdate = " ON DUPLICATE KEY UPDATE units = VALUES(units)"
	// stmtIncrement reads the step between the IDs AUTO_INCREMENT gives in
	// this session. No args.
	stmtIncrement = "SELECT @@SESSION.auto_increment_increment"
	// stmtOrderIDs reads back the IDs of orders a transaction wrote, by
	// request ID. Args: the request IDs.
	stmtOrderIDs = "SELECT id, request_id FROM orders WHERE request_id IN "
)

// unitsSQL is stmtUnitsHeld for n users: a locking read when locking (see
// Config.LockingReads and sqlSales.unitsHeld).
func unitsSQL(n int, locking bool) string {
	q := stmtUnitsHeld + sqlList(n)
	if locking {
		q += " FOR UPDATE"
	}
	return q
}

// sqlList is n placeholders as an SQL list: "(?, ?, ?)" for n = 3.
func sqlList(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// sqlRows is n rows of width placeholders each, as VALUES lists them:
// "(?, ?), (?, ?)" for n = 2, width = 2.
func sqlRows(n, width int) string {
	return strings.TrimSuffix(strings.Repeat(sqlList(width)+", ", n), ", ")
}

// ForUpdate makes tx's read a locking read: SELECT ... FOR UPDATE (which
// SQLite drops: it has one writer at a time).
func ForUpdate(tx *gorm.DB) *gorm.DB {
	return tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
}

// ExprFenceBump is the fence moved on by one, as GORM writes it.
func ExprFenceBump() clause.Expr {
	return gorm.Expr("fence + 1")
}

// exprDecrement is the stock less q, as GORM writes it.
func exprDecrement(q int64) clause.Expr {
	return gorm.Expr("stock - ?", q)
}

// LockProduct reads product id under its row lock (SELECT ... FOR
// UPDATE) in transaction tx: a
// *failure.Error product_not_found when there is none.
func LockProduct(tx *gorm.DB, id int64) (model.Product, error) {
	var p model.Product
	err := ForUpdate(tx).Take(&p, id).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return p, failure.NotFound(id)
	case err != nil:
		return p, fmt.Errorf("lock product %d: %w", id, err)
	}
	return p, nil
}

// ReturnsOf reads the returns of product id on their way to its counter,
// in transaction tx.
func ReturnsOf(tx *gorm.DB, id int64) ([]model.ReserveReturn, error) {
	var rs []model.ReserveReturn
	if err := tx.Where("product_id = ?", id).Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("read the returns of product %d on their way to Redis: %w", id, err)
	}
	return rs, nil
}

// ReturnIDs are the orders of returns rs.
func ReturnIDs(rs []model.ReserveReturn) []int64 {
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.OrderID
	}
	return ids
}
