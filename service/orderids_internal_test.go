package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/salestore"
)

// TestBatchOrderIDs: the orders of one batch, on a server that steps IDs by
// 3 from 2 (a Galera Cluster's second node does), get the IDs of their own
// rows in each way the MySQL form learns them: counted by the session's
// step from the ID the INSERT reports (InnoDB), and read back by request
// ID (TiDB, which may leave gaps); and in the portable form.
func TestBatchOrderIDs(t *testing.T) {
	server := testenv.StartMariaDB(t, "--auto-increment-increment=3", "--auto-increment-offset=2", "--innodb-autoinc-lock-mode=2")
	for _, form := range []string{"counted", "read back", "portable"} {
		t.Run(form, func(t *testing.T) {
			ctx := context.Background()
			s, db := newOnMySQL(t, testenv.DatabaseDSN(t, server.DSN, testenv.RandomName("seckill_test_")), Config{Fencing: true}, form == "portable")
			if form == "read back" {
				s.sales.Close()
				cfg := s.saleCfg
				cfg.ReadBackIDs = true
				s.sales = salestore.Open(s.db, cfg)
			}
			prod, err := s.CreateProduct(ctx, "stepped", 100)
			if err != nil {
				t.Fatalf("CreateProduct: %v", err)
			}
			st, _ := LookupStrategy("redlock")
			for batch := range 3 {
				h := hold{ps: make([]Purchase, 7), arrived: make([]time.Time, 7)}
				for i := range h.ps {
					h.ps[i] = Purchase{ProductID: prod.ID, UserID: fmt.Sprintf("u-%d-%d", batch, i), Quantity: 1,
						RequestID: fmt.Sprintf("r-%d-%d", batch, i), Strategy: st.Name}
					h.arrived[i] = time.Now()
				}
				as, err := st.way.hold(s, ctx, st, h)
				if err != nil {
					t.Fatalf("hold = %v", err)
				}
				for i, a := range as {
					var row model.Order
					if err := db.WithContext(ctx).Where("request_id = ?", h.ps[i].RequestID).Take(&row).Error; err != nil {
						t.Fatalf("read the order of %s: %v", h.ps[i].RequestID, err)
					}
					if a.Err != nil || a.R.Order.ID != row.ID {
						t.Errorf("purchase %s answered order %d, %v; its row is order %d", h.ps[i].RequestID, a.R.Order.ID, a.Err, row.ID)
					}
				}
			}
		})
	}
}
