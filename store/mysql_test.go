package store_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// TestOpenSQLMySQL opens a real MariaDB/MySQL database through OpenSQL,
// migrates a table and reads back a row.
func TestOpenSQLMySQL(t *testing.T) {
	dsn := testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, closeDB, err := store.OpenSQL(ctx, dsn)
	if err != nil {
		t.Fatalf("OpenSQL(mysql) = %v", err)
	}
	t.Cleanup(func() {
		if err := closeDB(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if name := db.Dialector.Name(); name != "mysql" {
		t.Errorf("Dialector.Name() = %q; want mysql", name)
	}
	if err := db.WithContext(ctx).AutoMigrate(&item{}); err != nil {
		t.Fatalf("AutoMigrate = %v", err)
	}
	want := item{Name: "widget", Stock: 7}
	if err := db.WithContext(ctx).Create(&want).Error; err != nil {
		t.Fatalf("Create = %v", err)
	}
	var got item
	if err := db.WithContext(ctx).First(&got, want.ID).Error; err != nil {
		t.Fatalf("First = %v", err)
	}
	if got != want {
		t.Errorf("First = %+v; want %+v", got, want)
	}
}

// TestOpenMySQLCreatesDatabase opens a database that does not exist yet and
// checks that OpenMySQL created it (and that opening it again is harmless).
func TestOpenMySQLCreatesDatabase(t *testing.T) {
	cfg, err := mysql.ParseDSN(testenv.MySQLServerDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	server, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	name := testenv.RandomName("seckill_test_")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := server.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	exists := func() bool {
		t.Helper()
		var n int
		err := server.QueryRowContext(ctx,
			"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n)
		if err != nil {
			t.Fatalf("look up database %s: %v", name, err)
		}
		return n == 1
	}
	if exists() {
		t.Fatalf("database %s exists before the test", name)
	}

	cfg.DBName = name
	for i := range 2 {
		db, err := store.OpenMySQL(ctx, cfg.FormatDSN())
		if err != nil {
			t.Fatalf("OpenMySQL #%d = %v", i+1, err)
		}
		var current string
		if err := db.WithContext(ctx).Raw("SELECT DATABASE()").Scan(&current).Error; err != nil {
			t.Errorf("SELECT DATABASE() = %v", err)
		}
		if current != name {
			t.Errorf("SELECT DATABASE() = %q; want %q", current, name)
		}
		if err := store.CloseSQL(db); err != nil {
			t.Errorf("CloseSQL = %v", err)
		}
	}
	if !exists() {
		t.Errorf("database %s missing after OpenMySQL", name)
	}
}

func TestOpenMySQLErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, dsn := range []string{
		"not a dsn",
		"root@tcp(127.0.0.1:1)/seckill", // nothing listens on port 1
	} {
		_, _, err := store.OpenSQL(ctx, dsn)
		if err == nil || !strings.HasPrefix(err.Error(), "store: ") {
			t.Errorf("OpenSQL(%q) = %v; want an error starting with \"store: \"", dsn, err)
		}
	}
}
