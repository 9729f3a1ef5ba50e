package store_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/store"
)

// item and sale are a small stand-in for the service's tables.
type item struct {
	ID    int64
	Name  string
	Stock int
}

type sale struct {
	ID     int64
	ItemID int64 `gorm:"index"`
	Buyer  string
}

// openEmbeddedSQL opens the embedded database, migrates the test tables and
// closes it when t ends. It returns the path of the database file.
func openEmbeddedSQL(t *testing.T) (*gorm.DB, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, closeDB, err := store.OpenSQL(ctx, "")
	if err != nil {
		t.Fatalf("OpenSQL(\"\") = %v; want the embedded database", err)
	}
	t.Cleanup(func() {
		if err := closeDB(); err != nil {
			t.Errorf("close embedded database: %v", err)
		}
	})
	if err := db.WithContext(ctx).AutoMigrate(&item{}, &sale{}); err != nil {
		t.Fatalf("AutoMigrate = %v", err)
	}
	var file string
	if err := db.WithContext(ctx).Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file).Error; err != nil {
		t.Fatalf("database file: %v", err)
	}
	return db, file
}

func TestOpenSQLEmbeddedSettings(t *testing.T) {
	db, file := openEmbeddedSQL(t)
	if file == "" {
		t.Fatal("embedded database has no file; want a file in a temporary directory")
	}
	if name := db.Dialector.Name(); name != "sqlite" {
		t.Errorf("Dialector.Name() = %q; want sqlite", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"busy_timeout", "10000"},
		{"synchronous", "1"}, // NORMAL
		{"foreign_keys", "1"},
	} {
		var got string
		if err := db.WithContext(ctx).Raw("PRAGMA " + tc.pragma).Scan(&got).Error; err != nil {
			t.Fatalf("PRAGMA %s: %v", tc.pragma, err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %q; want %q", tc.pragma, got, tc.want)
		}
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	if got := sqlDB.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("MaxOpenConnections = %d; want 1", got)
	}
}

func TestOpenSQLEmbeddedCloserRemovesFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, closeDB, err := store.OpenSQL(ctx, "")
	if err != nil {
		t.Fatalf("OpenSQL(\"\") = %v", err)
	}
	if err := db.WithContext(ctx).AutoMigrate(&item{}); err != nil {
		t.Fatalf("AutoMigrate = %v", err)
	}
	var file string
	if err := db.WithContext(ctx).Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file).Error; err != nil {
		t.Fatalf("database file: %v", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("stat %s while open: %v", file, err)
	}
	if err := closeDB(); err != nil {
		t.Fatalf("close = %v; want nil", err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s after close = %v; want it removed", file, err)
	}
	if err := db.WithContext(ctx).Exec("SELECT 1").Error; err == nil {
		t.Error("query after close succeeded; want an error")
	}
}

// TestSQLiteConcurrentTransactions runs read-check-write transactions from
// 20 goroutines: with one connection, WAL and a busy timeout none of them may
// answer "database is locked", and none of the decrements may be lost.
func TestSQLiteConcurrentTransactions(t *testing.T) {
	db, _ := openEmbeddedSQL(t)
	const (
		workers = 20
		perG    = 10
		stock   = 1000
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	it := item{Name: "widget", Stock: stock}
	if err := db.WithContext(ctx).Create(&it).Error; err != nil {
		t.Fatalf("Create = %v", err)
	}

	var g errgroup.Group
	for w := range workers {
		g.Go(func() error {
			for range perG {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
					var cur item
					// SQLite has no FOR UPDATE: GORM must leave the clause out, not fail.
					if err := tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).First(&cur, it.ID).Error; err != nil {
						return err
					}
					if err := tx.Model(&item{}).Where("id = ?", it.ID).Update("stock", cur.Stock-1).Error; err != nil {
						return err
					}
					return tx.Create(&sale{ItemID: it.ID, Buyer: string(rune('a' + w))}).Error
				})
				cancel()
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("concurrent transaction = %v; want nil (no \"database is locked\")", err)
	}

	var got item
	if err := db.WithContext(ctx).First(&got, it.ID).Error; err != nil {
		t.Fatal(err)
	}
	var sales int64
	if err := db.WithContext(ctx).Model(&sale{}).Count(&sales).Error; err != nil {
		t.Fatal(err)
	}
	if want := stock - workers*perG; got.Stock != want || sales != workers*perG {
		t.Errorf("after %d transactions: stock %d, sales %d; want stock %d, sales %d",
			workers*perG, got.Stock, sales, want, workers*perG)
	}
}

// TestSQLitePoolQueryInsideTransactionWaits shows the trap of the single
// connection that OpenSQL documents: a query on the pool instead of on the
// transaction, inside the transaction, waits for a connection that the
// transaction holds, until its context ends.
func TestSQLitePoolQueryInsideTransactionWaits(t *testing.T) {
	db, _ := openEmbeddedSQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		inner, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		var n int64
		return db.WithContext(inner).Model(&item{}).Count(&n).Error // db, not tx
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("pool query inside a transaction = %v; want context.DeadlineExceeded", err)
	}
}
