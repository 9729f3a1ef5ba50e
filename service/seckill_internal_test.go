package service

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/store"
)

// newOnMySQL is a Seckill of the internal tests over the MySQL database of
// dsn, migrated, with no lock and no Redis; with portable set, its sale
// store takes the portable form (GORM's statements one at a time), as on a
// Galera node. Both close when tb ends.
func newOnMySQL(tb testing.TB, dsn string, cfg Config, portable bool) (*Seckill, *gorm.DB) {
	tb.Helper()
	s, db := newOnMySQLWith(tb, dsn, cfg, nil)
	if portable {
		s.sales.Close()
		s.sales = salestore.Portable(db, s.saleCfg)
	}
	return s, db
}

// newOnMySQLWith is newOnMySQL's MySQL form with the Redis nodes nodes.
func newOnMySQLWith(tb testing.TB, dsn string, cfg Config, nodes []redis.UniversalClient) (*Seckill, *gorm.DB) {
	tb.Helper()
	ctx := context.Background()
	db, err := store.OpenMySQL(ctx, dsn)
	if err != nil {
		tb.Fatalf("OpenMySQL: %v", err)
	}
	tb.Cleanup(func() {
		if err := store.CloseSQL(db); err != nil {
			tb.Errorf("close database: %v", err)
		}
	})
	if err := model.Migrate(ctx, db); err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	s := New(db, nil, nodes, cfg, NewMetrics(prometheus.NewRegistry()), slog.New(slog.DiscardHandler))
	tb.Cleanup(s.Close)
	return s, db
}
