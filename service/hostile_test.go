package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/store"
)

// hostileIDs are IDs built to reach past their string: a multibyte lead
// byte before a quote (which gbk, big5, sjis and cp932 would read as one
// character, swallowing the escape), and plain SQL.
var hostileIDs = []string{
	"中' OR 1=1; DROP TABLE orders; -- ",
	"\xe4\xb8\xad\\' UNION SELECT 1 -- ",
	"bad'); DELETE FROM products; --",
	"ﾟ'\"`;#",
}

// TestMultibyteCharsetRefused: a DSN that names a charset other than
// utf8mb4, or a collation, is refused before any connection is made.
func TestMultibyteCharsetRefused(t *testing.T) {
	dsn := testenv.MySQL(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, param := range []string{"charset=gbk", "charset=big5", "charset=sjis", "charset=cp932", "collation=gbk_chinese_ci"} {
		_, err := store.OpenMySQL(context.Background(), dsn+sep+param)
		if !errors.Is(err, store.ErrUnsafeCharset) {
			t.Errorf("OpenMySQL(%s) = %v; want %v", param, err, store.ErrUnsafeCharset)
		}
	}
	db, err := store.OpenMySQL(context.Background(), dsn+sep+"charset=utf8mb4")
	if err != nil {
		t.Fatalf("OpenMySQL(charset=utf8mb4) = %v; want nil", err)
	}
	if err := store.CloseSQL(db); err != nil {
		t.Error(err)
	}
}

// TestHostileIDs: on every strategy, one purchase at a time (the one-trip
// and step-by-step paths) and many at once (the batch), IDs built to reach
// past their string are stored and answered byte for byte, and a replay
// finds them.
func TestHostileIDs(t *testing.T) {
	f := newFixture(t, nil)
	for _, strategy := range strategies {
		t.Run(strategy, func(t *testing.T) {
			in := f.instance(settings{Strategy: strategy, Fencing: true})
			prod := in.product(t, 100)
			var attempts []attempt
			for i, id := range hostileIDs {
				for _, batch := range []int{1, 0} {
					rid := fmt.Sprintf("%s#%s%d/%d", id, strategy, i, batch)
					attempts = append(attempts, attempt{svc: in.svc, p: service.Purchase{ProductID: prod.ID,
						UserID: rid, Quantity: 1, RequestID: rid, Batch: batch}})
				}
			}
			for _, res := range purchaseAll(context.Background(), attempts) {
				if res.err != nil {
					t.Errorf("Purchase(%s) = %v; want an order", show(res.p), res.err)
					continue
				}
				var o model.Order
				if err := f.db.Where("request_id = ?", res.p.RequestID).Take(&o).Error; err != nil ||
					string(o.UserID) != res.p.UserID || o.ID != res.r.Order.ID {
					t.Errorf("Purchase(%s): stored %+v, %v; want user %q, order %d", show(res.p), o, err, res.p.UserID, res.r.Order.ID)
				}
				again, err := in.svc.Purchase(context.Background(), res.p)
				if err != nil || !again.Replayed || again.Order.ID != res.r.Order.ID {
					t.Errorf("replay of Purchase(%s) = %+v, %v; want order %d", show(res.p), again, err, res.r.Order.ID)
				}
			}
			in.wantAudit(t, consistentAudit(prod.ID, 100, int64(len(attempts))))
		})
	}
}
