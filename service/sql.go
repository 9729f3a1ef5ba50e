package service

import (
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The statements a purchase writes by hand, in one place. Where MySQL (or
// MariaDB) and the embedded SQLite spell one differently, the statement is
// a dialect and the two spellings sit side by side; s.stmt picks the
// store's. What GORM builds takes its locking read (forUpdate), its
// decrement and its fence's move (exprDecrement, exprFenceBump) from the
// helpers at the end of this file.

// dialect is one statement as each store spells it.
type dialect struct {
	mysql, embedded string
}

// stmt is d as s's store spells it.
func (s *Seckill) stmt(d dialect) string {
	if s.mysql {
		return d.mysql
	}
	return d.embedded
}

// stmtClaimFence moves a product's fence on by one and reads the new fence
// back from the write itself: in LAST_INSERT_ID on MySQL, by RETURNING on
// the embedded store. Args: product ID.
var stmtClaimFence = dialect{
	mysql:    "UPDATE products SET fence = LAST_INSERT_ID(fence + 1) WHERE id = ?",
	embedded: "UPDATE products SET fence = fence + 1 WHERE id = ? RETURNING fence",
}

// stmtDecrement takes q from a product's stock if at least q is left, and
// says what it left: in LAST_INSERT_ID on MySQL (never negative here), by
// RETURNING on the embedded store. Its first hole is decrementClaims or
// nothing, its second decrementFenced or nothing (see decrementSQL). Args:
// q, now, product ID, q, then the token when fenced.
var stmtDecrement = dialect{
	mysql:    "UPDATE products SET stock = LAST_INSERT_ID(stock - ?)%s, updated_at = ? WHERE id = ? AND stock >= ?%s",
	embedded: "UPDATE products SET stock = stock - ?%s, updated_at = ? WHERE id = ? AND stock >= ?%s RETURNING stock",
}

const (
	// decrementClaims makes stmtDecrement claim the fence itself.
	decrementClaims = ", fence = fence + 1"
	// decrementFenced makes stmtDecrement apply only while the fence is
	// still the hold's token.
	decrementFenced = " AND fence = ?"
)

// stmtRaiseUnits raises a user's units (product, user, units, limit) in
// one conditional upsert; it changes no row when the sum would pass the
// limit (on MySQL the pool counts rows changed, not rows matched).
var stmtRaiseUnits = dialect{
	mysql: "INSERT INTO user_units (product_id, user_id, units) VALUES (?, ?, ?) " +
		"ON DUPLICATE KEY UPDATE units = IF(units + VALUES(units) <= ?, units + VALUES(units), units)",
	embedded: "INSERT INTO user_units (product_id, user_id, units) VALUES (?, ?, ?) " +
		"ON CONFLICT (product_id, user_id) DO UPDATE SET units = units + excluded.units WHERE units + excluded.units <= ?",
}

// The one-trip purchase's statements (MySQL only; see onetrip.go), sent as
// one multi-statement joined by "; ": stmtBegin, the decrement, the units,
// stmtOrderOneTrip; then stmtCommit or stmtRollback.
const (
	stmtBegin    = "START TRANSACTION"
	stmtCommit   = "COMMIT"
	stmtRollback = "ROLLBACK"
	// stmtOrderOneTrip writes the order, its remaining stock the one the
	// decrement left in LAST_INSERT_ID(). Args: product ID, user ID,
	// quantity, request ID (or NULL), strategy, created at.
	stmtOrderOneTrip = "INSERT INTO orders (product_id, user_id, quantity, request_id, strategy, remaining_stock, created_at) " +
		"VALUES (?, ?, ?, ?, ?, LAST_INSERT_ID(), ?)"
)

// decrementSQL is stmtDecrement for s's store: the stock of product id
// decremented by q if at least q is left, the fence moved on (fw.claim) or
// checked (fw.token), the stock left in LAST_INSERT_ID on MySQL and
// returned on the embedded store.
func (s *Seckill) decrementSQL(id, q int64, fw fenceWrite) (string, []any) {
	claims, fenced := "", ""
	if fw.claim {
		claims = decrementClaims
	}
	args := []any{q, time.Now(), id, q}
	if fw.token != nil {
		fenced = decrementFenced
		args = append(args, *fw.token)
	}
	return fmt.Sprintf(s.stmt(stmtDecrement), claims, fenced), args
}

// forUpdate makes tx's read a locking read: SELECT ... FOR UPDATE (which
// SQLite drops).
func forUpdate(tx *gorm.DB) *gorm.DB {
	return tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
}

// exprFenceBump is the fence moved on by one, as GORM writes it.
func exprFenceBump() clause.Expr {
	return gorm.Expr("fence + 1")
}

// exprDecrement is the stock less q, as GORM writes it.
func exprDecrement(q int64) clause.Expr {
	return gorm.Expr("stock - ?", q)
}

// The three-trip batch's statements (MySQL only; see batchtrip.go). The
// first trip: stmtBegin, stmtStockForUpdate, then stmtUsedRequestIDs and
// stmtUnitsHeld, each followed by its list of values ("(?, ?, ...)"). The
// second: the decrement, stmtSetUnits
// with its rows ("(?, ?, ?), ...") and stmtSetUnitsUpdate, stmtOrders with
// its rows. Then stmtCommit.
const (
	// stmtStockForUpdate reads a product's stock under its row lock.
	// Args: product ID.
	stmtStockForUpdate = "SELECT stock FROM products WHERE id = ? FOR UPDATE"
	// stmtUsedRequestIDs finds which of a list of request IDs have an
	// order.
	stmtUsedRequestIDs = "SELECT request_id FROM orders WHERE request_id IN "
	// stmtUnitsHeld reads the units of a product that a list of users
	// hold. Args: product ID, then the users.
	stmtUnitsHeld = "SELECT user_id, units FROM user_units WHERE product_id = ? AND user_id IN "
	// stmtSetUnits and stmtSetUnitsUpdate write users' new units. Args
	// per row: product ID, user ID, units.
	stmtSetUnits       = "INSERT INTO user_units (product_id, user_id, units) VALUES "
	stmtSetUnitsUpdate = " ON DUPLICATE KEY UPDATE units = VALUES(units)"
	// stmtOrders writes orders. Args per row: product ID, user ID,
	// quantity, request ID (or NULL), strategy, remaining stock, created
	// at.
	stmtOrders = "INSERT INTO orders (product_id, user_id, quantity, request_id, strategy, remaining_stock, created_at) VALUES "
)
