package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// sqlitePragmas are the connection settings of the embedded database: WAL
// so that a reader never blocks the writer, a busy timeout so that a
// connection waits for a lock instead of answering "database is locked",
// synchronous=NORMAL (safe with WAL, far fewer fsyncs) and BEGIN IMMEDIATE
// so that a transaction takes the write lock when it starts rather than
// failing to upgrade a read lock halfway through.
const sqlitePragmas = "_pragma=journal_mode(WAL)" +
	"&_pragma=busy_timeout(10000)" +
	"&_pragma=synchronous(NORMAL)" +
	"&_pragma=foreign_keys(1)" +
	"&_txlock=immediate"

// OpenSQLite opens (creating it if needed) the SQLite database in the file
// at path through github.com/glebarez/sqlite, a pure-Go driver.
//
// The pool holds exactly one connection, which SQLite needs to run
// concurrent transactions without "database is locked" errors: every
// statement and transaction waits its turn for that connection. A query
// made on the pool rather than on the transaction, inside a transaction,
// therefore waits for ever; give every context a deadline. SQLite has no
// row locks: GORM leaves out the FOR UPDATE of clause.Locking, and a
// transaction is serialised as a whole instead.
func OpenSQLite(ctx context.Context, path string) (*gorm.DB, error) {
	db, err := gorm.Open(sqlite.Open(path+"?"+sqlitePragmas), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		TranslateError:         true,
	})
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("store: sqlite pool: %w", err)
	}
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)
	sqlDB.SetConnMaxLifetime(0)
	sqlDB.SetConnMaxIdleTime(0)
	if err := sqlDB.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("store: ping sqlite %s: %w", path, errors.Join(err, sqlDB.Close()))
	}
	return db, nil
}

// Reopen opens another pool on the embedded SQLite database db is open on
// (the same file, the same settings): a second process's view of it, for a
// test or the demo to cut off on its own. Its one connection and db's take
// turns at SQLite's file lock: with BEGIN IMMEDIATE a writer waits on the
// other's transaction up to the busy timeout (10 s), long enough for the
// short writes of the demo.
func Reopen(ctx context.Context, db *gorm.DB) (*gorm.DB, error) {
	d, ok := db.Dialector.(*sqlite.Dialector)
	if !ok {
		return nil, fmt.Errorf("store: reopen: %s is not the embedded SQLite", db.Dialector.Name())
	}
	path, _, _ := strings.Cut(d.DSN, "?")
	return OpenSQLite(ctx, path)
}
