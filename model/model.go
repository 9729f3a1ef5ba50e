// Package model holds the GORM structs of the tables (the two the contract
// names, user_units and reserve_returns) and their migration, nothing else:
// no queries, no HTTP shapes.
package model

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// Product is a thing on sale and its stock.
type Product struct {
	ID           int64  `gorm:"primaryKey"`
	Name         string `gorm:"size:128;not null"`
	Stock        int64  `gorm:"not null"`
	InitialStock int64  `gorm:"not null"`
	// Fence is the product's fencing token: a fenced lock holder moves it
	// on (fence + 1) when it is granted the lock, or in its write's first
	// statement, and its write applies only while the fence is still its
	// own; a stock reset moves it too. A holder overtaken by a later
	// holder's claim, or by a reset, writes nothing.
	Fence int64 `gorm:"not null;default:0"`
	// Generation counts the product's stock resets. What an instance
	// remembers of the stock (the stock cache), the request IDs of a
	// sold-out product's orders and the reset announcements all carry it,
	// so that nothing learnt of an older sale overwrites a newer one.
	Generation int64 `gorm:"not null;default:0"`
	// Reserve says the product's stock was moved into Redis for the
	// reserve strategy in this generation: until the next reset it sells
	// only under reserve, and the other strategies write nothing.
	Reserve bool `gorm:"not null;default:false"`
	// ReserveLoaded says a counter was loaded into Redis for this
	// generation: a later load that finds no counter at all knows Redis
	// lost it.
	ReserveLoaded bool `gorm:"not null;default:false"`
	// Returns counts the returns of units (a cancel, an expiry) since the
	// last reset: stock only falls between two, so what an instance
	// remembers of the stock carries it with the generation, and a stock
	// seen before a return never hides the units it gave back.
	Returns   int64 `gorm:"not null;default:0"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// BinaryString is a string the database stores and compares byte for byte,
// as Go does: no case folding, no accent folding, no trailing-space padding,
// every 4-byte character its own. It is VARBINARY on MySQL and MariaDB
// (whose default collations fold all of these) and TEXT on SQLite (whose
// default collation is already binary).
type BinaryString string

// GormDBDataType gives the column type per database.
func (BinaryString) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Dialector.Name() == "mysql" {
		return "VARBINARY(256)" // 64 characters of up to 4 bytes
	}
	return "TEXT"
}

// Order is one successful purchase.
type Order struct {
	ID        int64        `gorm:"primaryKey"`
	ProductID int64        `gorm:"not null;index:idx_orders_product_user,priority:1"`
	UserID    BinaryString `gorm:"not null;index:idx_orders_product_user,priority:2"`
	Quantity  int64        `gorm:"not null"`
	// RequestID is unique where present: the buyer's, or one the service
	// made for a purchase that came without (so that every order can be
	// looked up when a COMMIT's outcome is unknown). It may be NULL: the
	// column allows it, and an order written by another program may have
	// none.
	RequestID *BinaryString `gorm:"uniqueIndex"`
	Strategy  string        `gorm:"size:16;not null"`
	// RemainingStock is the product's stock right after this order, kept
	// so that a replayed request answers with the first order as it was.
	RemainingStock int64 `gorm:"not null"`
	// Status is the order's state (StatusUnpaid, ...): written unpaid
	// when orders wait for their payment (SECKILL_PAYMENT_TIMEOUT), paid
	// otherwise. The due index (status, expires_at) is what the expiry
	// sweep reads: the unpaid orders whose time has come, and no others.
	Status string `gorm:"size:9;not null;default:paid;index:idx_orders_due,priority:1"`
	// ExpiresAt is when an unpaid order expires; nil for any other.
	ExpiresAt *time.Time `gorm:"index:idx_orders_due,priority:2"`
	CreatedAt time.Time
}

// The states of an order.
const (
	StatusUnpaid    = "unpaid"
	StatusPaid      = "paid"
	StatusCancelled = "cancelled"
	StatusExpired   = "expired"
)

// HoldsUnits says an order in state status holds its units: unpaid or
// paid. The units of a cancelled or expired order are back in the stock.
func HoldsUnits(status string) bool {
	return status == StatusUnpaid || status == StatusPaid
}

// UserUnits is how many units of a product one user holds. The per-user
// limit is checked and raised on this row, under its row lock, in the
// transaction that writes the order, so that two purchases of one user can
// never both pass it, whatever instance or strategy sells them. It has no
// AUTO_INCREMENT column: a one-trip purchase reads the stock it left from
// LAST_INSERT_ID() after writing this row (service/salestore/onetrip.go).
type UserUnits struct {
	ProductID int64        `gorm:"primaryKey;autoIncrement:false"`
	UserID    BinaryString `gorm:"primaryKey"`
	Units     int64        `gorm:"not null"`
}

// ReserveReturn is a return of units of a product that sells under
// reserve, written in the transaction that returns them to the database's
// stock and deleted once its counter in Redis has them back too: the
// outbox between the two stores. A return whose instance died between
// them is found here and finished by any instance (service/orders).
type ReserveReturn struct {
	OrderID    int64 `gorm:"primaryKey;autoIncrement:false"`
	ProductID  int64 `gorm:"not null;index"`
	Generation int64 `gorm:"not null"`
	// Returns is the product's count of returns with this one
	// (Product.Returns): the counter's version once it has the units.
	Returns   int64        `gorm:"not null"`
	UserID    BinaryString `gorm:"not null"`
	Quantity  int64        `gorm:"not null"`
	CreatedAt time.Time
}

// migrateLock names the MySQL advisory lock that serialises migrations of
// one database: instances that start at once take turns, and all but the
// first find the tables in place.
const migrateLock = "CONCAT('seckill_migrate_', MD5(DATABASE()))"

// Migrate creates or updates the tables. On MySQL it holds a named lock
// (GET_LOCK) while it does, so that any number of instances may start at
// once against an empty database; the server drops the lock if the
// instance dies.
func Migrate(ctx context.Context, db *gorm.DB) error {
	db = db.WithContext(ctx)
	if db.Dialector.Name() != "mysql" {
		return migrate(db)
	}
	return db.Connection(func(conn *gorm.DB) (err error) {
		var got *int64
		if err := conn.Raw("SELECT GET_LOCK(" + migrateLock + ", 60)").Scan(&got).Error; err != nil {
			return fmt.Errorf("model: migrate: take the migration lock: %w", err)
		}
		if got == nil || *got != 1 {
			return fmt.Errorf("model: migrate: the migration lock was not granted within 60s")
		}
		defer func() {
			if rerr := conn.Exec("DO RELEASE_LOCK(" + migrateLock + ")").Error; rerr != nil && err == nil {
				err = fmt.Errorf("model: migrate: release the migration lock: %w", rerr)
			}
		}()
		return migrate(conn)
	})
}

func migrate(db *gorm.DB) error {
	if err := db.AutoMigrate(&Product{}, &Order{}, &UserUnits{}, &ReserveReturn{}); err != nil {
		return fmt.Errorf("model: migrate: %w", err)
	}
	return nil
}
