package salestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/stockcache"
)

// sqlSales is the portable form of the sale store: GORM's statements one
// at a time, in a transaction of database/sql. A sale reads the product
// under its row lock, the orders of its request IDs and the units its users
// hold; the rule decides; one decrement, the users' new units and the
// orders are written; nine round trips in all. It has no cheaper form for
// a single purchase.
type sqlSales struct {
	sqlBase
}

// Portable is db's sale store in the portable form, whatever the database
// (Open chooses it where the MySQL form cannot run).
func Portable(db *gorm.DB, cfg Config) Store {
	return &sqlSales{sqlBase{db: db, cfg: cfg}}
}

func (q *sqlSales) Buy(context.Context, Purchase, bool) (model.Order, bool, error) {
	return model.Order{}, false, nil
}

func (q *sqlSales) Close() {}

// Form is "portable".
func (q *sqlSales) Form() string { return "portable" }

// Claim moves the product's fence on and reads it back, in a transaction
// of its own.
func (q *sqlSales) Claim(ctx context.Context, id int64) (token int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, q.cfg.DBTimeout)
	defer cancel()
	err = RetryDeadlocks(ctx, q.cfg, func() error {
		return q.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			res := tx.Model(&model.Product{}).Where("id = ?", id).Update("fence", ExprFenceBump())
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return failure.NotFound(id)
			}
			return tx.Model(&model.Product{}).Where("id = ?", id).Select("fence").Scan(&token).Error
		})
	})
	if err != nil && failure.CodeOf(err) != failure.CodeNotFound {
		return 0, failure.Store(fmt.Sprintf("claim the fence of product %d", id), err)
	}
	return token, err
}

func (q *sqlSales) Sell(ctx context.Context, ps []Purchase, r Read, decide DecideFunc) (Sale, error) {
	return q.retrying(ctx, ps, r.Extra, func(ctx context.Context) (d Sale, err error) {
		err = q.transaction(ctx, func(tx *gorm.DB) error {
			d, err = q.sellIn(ctx, tx, ps, r, decide)
			return err
		})
		return d, err
	})
}

// sellIn is one transaction of a sale, in tx.
func (q *sqlSales) sellIn(ctx context.Context, tx *gorm.DB, ps []Purchase, r Read, decide DecideFunc) (Sale, error) {
	id := ps[0].ProductID
	start := time.Now()
	lockCtx, cancel := r.lockContext(ctx)
	defer cancel()
	var prod model.Product
	err := ForUpdate(tx.WithContext(lockCtx)).Select("id", "stock", "fence", "generation", "returns", "reserve").Take(&prod, id).Error
	switch {
	case lockCtx.Err() != nil && ctx.Err() == nil:
		return Sale{}, &RowLockTimeout{Waited: time.Since(start), err: fmt.Errorf("row lock of product %d: %w", id, lockCtx.Err())}
	case errors.Is(err, gorm.ErrRecordNotFound):
		return Sale{}, failure.NotFound(id)
	case err != nil:
		return Sale{}, fmt.Errorf("read the stock of product %d: %w", id, err)
	}
	if err := r.owner(id, prod.Generation, prod.Reserve); err != nil {
		return Sale{}, err
	}
	if r.Token != nil && prod.Fence != *r.Token {
		return Sale{}, &FenceMoved{Generation: prod.Generation}
	}
	var expired []bool
	if r.UnderLock != nil {
		if expired, err = r.UnderLock(time.Since(start)); err != nil {
			return Sale{}, err
		}
	}
	used, err := usedRequestIDs(tx, ps)
	if err != nil {
		return Sale{}, err
	}
	units, err := q.unitsHeld(tx, ps)
	if err != nil {
		return Sale{}, err
	}
	stock := prod.Stock
	if r.Trusted != nil {
		stock = *r.Trusted
	}
	d := decide(stock, expired, used, units)
	d.afterWrite(prod.Stock, r.Trusted != nil)
	d.Read = stockcache.Of(prod)
	if len(d.Orders) == 0 {
		return d, nil
	}
	return d, q.writeSale(tx, ps, &d, r)
}

// writeSale writes what the rule sold: one decrement (claiming the fence
// when r says so; conditional on the stock unless the sale trusts a stock
// read before), the users' new units and the orders; then the answers of
// those sold and of those replaying them are final (finish).
func (q *sqlSales) writeSale(tx *gorm.DB, ps []Purchase, d *Sale, r Read) error {
	id := ps[0].ProductID
	set := map[string]any{"stock": exprDecrement(d.Total)}
	if r.Claim {
		set["fence"] = ExprFenceBump()
	}
	w := tx.Model(&model.Product{}).Where("id = ?", id)
	if r.Trusted == nil {
		w = w.Where("stock >= ?", d.Total)
	}
	res := w.Updates(set)
	if res.Error != nil {
		return fmt.Errorf("decrement the stock of product %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("decrement the stock of product %d by %d: the row changed under its lock", id, d.Total)
	}
	if err := q.setUnits(tx, id, d.soldUsers(ps), d.Units); err != nil {
		return err
	}
	now := q.db.NowFunc()
	for i := range d.Orders {
		q.cfg.openOrder(&d.Orders[i], now)
	}
	if err := tx.Create(&d.Orders).Error; err != nil {
		return fmt.Errorf("write %d orders: %w", len(d.Orders), err)
	}
	if err := readOrderIDs(tx, d.Orders); err != nil {
		return err
	}
	d.finish()
	return nil
}

// readOrderIDs reads back the IDs of orders tx wrote, by request ID. On
// MySQL GORM gives a batch's rows consecutive IDs from the first, which
// they are not when the server steps them by auto_increment_increment (a
// Galera Cluster does) or an engine leaves gaps.
func readOrderIDs(tx *gorm.DB, orders []model.Order) error {
	rids := make([]string, len(orders))
	for i, o := range orders {
		if o.RequestID == nil {
			return fmt.Errorf("order %d of %d has no request ID to read its ID by", i+1, len(orders))
		}
		rids[i] = string(*o.RequestID)
	}
	var rows []model.Order
	if err := tx.Select("id", "request_id").Where("request_id IN ?", rids).Find(&rows).Error; err != nil {
		return fmt.Errorf("read back the IDs of %d orders: %w", len(orders), err)
	}
	ids := make(map[string]int64, len(rows))
	for _, r := range rows {
		ids[string(*r.RequestID)] = r.ID
	}
	for i := range orders {
		id, found := ids[rids[i]]
		if !found {
			return fmt.Errorf("read back the IDs of %d orders: %q is not there", len(orders), rids[i])
		}
		orders[i].ID = id
	}
	return nil
}

// usedRequestIDs returns the orders already made with the purchases'
// request IDs, by request ID.
func usedRequestIDs(tx *gorm.DB, ps []Purchase) (map[string]model.Order, error) {
	var ids []string
	for _, p := range ps {
		if p.RequestID != "" && !p.ServerRequestID {
			ids = append(ids, p.RequestID)
		}
	}
	used := map[string]model.Order{}
	if len(ids) == 0 {
		return used, nil
	}
	var orders []model.Order
	if err := tx.Where("request_id IN ?", ids).Find(&orders).Error; err != nil {
		return nil, fmt.Errorf("look up request IDs: %w", err)
	}
	for _, o := range orders {
		used[string(*o.RequestID)] = o
	}
	return used, nil
}

// unitsHeld returns the units of the product that the purchases' users
// already hold (an empty map when there is no limit). Every writer of a
// product's units holds the product's row lock first, and this transaction
// holds it, so a read that sees the latest commit sees every write there
// is, and none can come. On InnoDB that is a plain read: its snapshot is
// taken at the first plain read, after the row lock. A locking read there
// would lock, for a user without a row yet, the index gap before the next
// product's rows: two batches of neighbouring hot products then deadlock
// inserting into the gaps each had locked. On TiDB a plain read sees the
// transaction's start, before the row lock's wait (a pessimistic batch let
// users buy twice): there it is a locking read, which reads the latest
// commit and locks only the keys it names (Config.LockingReads). The MySQL form
// reads them the same way (unitsSQL).
func (q *sqlSales) unitsHeld(tx *gorm.DB, ps []Purchase) (map[string]int64, error) {
	units := map[string]int64{}
	if q.cfg.Limit <= 0 {
		return units, nil
	}
	var users []string
	for _, p := range ps {
		users = append(users, p.UserID)
	}
	if q.cfg.LockingReads {
		tx = ForUpdate(tx)
	}
	var rows []model.UserUnits
	err := tx.Where("product_id = ? AND user_id IN ?", ps[0].ProductID, users).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read the units users hold: %w", err)
	}
	for _, r := range rows {
		units[string(r.UserID)] = r.Units
	}
	return units, nil
}

// setUnits writes the new units of users, the users sold to.
func (q *sqlSales) setUnits(tx *gorm.DB, productID int64, users []string, units map[string]int64) error {
	if q.cfg.Limit <= 0 {
		return nil
	}
	rows := make([]model.UserUnits, len(users))
	for i, u := range users {
		rows[i] = model.UserUnits{ProductID: productID, UserID: model.BinaryString(u), Units: units[u]}
	}
	err := tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "product_id"}, {Name: "user_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"units"}),
	}).Create(&rows).Error
	if err != nil {
		return fmt.Errorf("write the units users hold: %w", err)
	}
	return nil
}
