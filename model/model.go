// Package model holds the GORM structs of the tables the contract names and
// their migration, nothing else: no queries, no HTTP shapes.
package model

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Product is a thing on sale and its stock.
type Product struct {
	ID           int64  `gorm:"primaryKey"`
	Name         string `gorm:"size:128;not null"`
	Stock        int64  `gorm:"not null"`
	InitialStock int64  `gorm:"not null"`
	// Fence is the fencing token of the latest lock holder that claimed the
	// product; a stock write under fencing applies only while it is still
	// the writer's own.
	Fence     int64 `gorm:"not null;default:0"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Order is one successful purchase.
type Order struct {
	ID        int64  `gorm:"primaryKey"`
	ProductID int64  `gorm:"not null;index:idx_orders_product_user,priority:1"`
	UserID    string `gorm:"size:64;not null;index:idx_orders_product_user,priority:2"`
	Quantity  int64  `gorm:"not null"`
	// RequestID is unique where present; NULL when the buyer sent none.
	RequestID *string `gorm:"size:64;uniqueIndex"`
	Strategy  string  `gorm:"size:16;not null"`
	// RemainingStock is the product's stock right after this order, kept
	// so that a replayed request answers with the first order as it was.
	RemainingStock int64 `gorm:"not null"`
	CreatedAt      time.Time
}

// Migrate creates or updates the tables.
func Migrate(ctx context.Context, db *gorm.DB) error {
	if err := db.WithContext(ctx).AutoMigrate(&Product{}, &Order{}); err != nil {
		return fmt.Errorf("model: migrate: %w", err)
	}
	return nil
}
