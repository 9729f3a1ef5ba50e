package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/store"
)

// TestOpenMySQLPoolSize: the pool keeps at most the connections it is given
// (DefaultMySQLMaxConns without the option): with all of them taken, one
// more waits; the server sees no more than that many from the pool.
func TestOpenMySQLPoolSize(t *testing.T) {
	dsn := testenv.MySQL(t)
	for _, tc := range []struct {
		opts []store.MySQLOption
		want int
	}{
		{nil, store.DefaultMySQLMaxConns},
		{[]store.MySQLOption{store.MySQLMaxConns(3)}, 3},
		{[]store.MySQLOption{store.MySQLMaxConns(0)}, store.DefaultMySQLMaxConns},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		db, closeDB, err := store.OpenSQL(ctx, dsn, tc.opts...)
		if err != nil {
			cancel()
			t.Fatalf("OpenSQL = %v", err)
		}
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		if got := sqlDB.Stats().MaxOpenConnections; got != tc.want {
			t.Errorf("pool of OpenSQL(%d options) allows %d connections; want %d", len(tc.opts), got, tc.want)
		}
		if tc.want == 3 {
			var held []*sql.Conn
			for i := range 3 {
				c, err := sqlDB.Conn(ctx)
				if err != nil {
					t.Fatalf("connection %d of 3: %v", i+1, err)
				}
				held = append(held, c)
			}
			short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := sqlDB.Conn(short)
			stop()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a 4th connection from a pool of 3 = %v; want it to wait (context deadline exceeded)", err)
			}
			for _, c := range held {
				if err := c.Close(); err != nil {
					t.Errorf("return a connection: %v", err)
				}
			}
		}
		if err := closeDB(); err != nil {
			t.Errorf("close: %v", err)
		}
		cancel()
	}
}
