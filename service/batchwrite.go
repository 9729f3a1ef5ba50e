package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/sale"
)

// The batch's transaction: once a hold knows the stock it sells from,
// writeBatch decides every ticket of the batch in line order (decide) and
// writes what was sold in one statement each (writeSale): one decrement,
// the users' new units and the orders. A duplicate request ID or a
// deadlock makes it decide again; a COMMIT whose outcome is unknown is
// settled (settleBatch).

// writeBatch decides every ticket in line order against the stock that
// stockFor returns inside the transaction (bounded by DBTimeout plus extra,
// for what stockFor waits or works) (having taken the product's row
// lock: every writer takes it first), the request IDs already used and the
// units each user holds, then writes what was sold: one decrement, the
// users' new units and the orders, in one statement each. exact says the
// stock was read under the row lock; otherwise the decrement is written
// whatever the stock is now (the unsafe strategies' flaw). A request ID
// that another purchase wrote meanwhile (a duplicate key), or a deadlock,
// makes it decide again.
func (s *Seckill) writeBatch(ctx context.Context, st Strategy, ts []*ticket, exact bool, extra time.Duration, stockFor func(tx *gorm.DB) (int64, error)) error {
	// A deadlock's victim rolled back and runs again. Batches of two hot
	// products whose users' rows share an index gap deadlock there (each
	// locks the gap reading rows that do not exist yet, then inserts into
	// it): with 3 attempts a 10,000-product catalogue answered a few
	// purchases in 25,000 503, all three attempts deadlocked.
	const attempts = 5
	id := ts[0].p.ProductID
	gen := s.memory.generation(id)
	for attempt := 1; ; attempt++ {
		var left int64
		tctx, cancel := s.dbCtx(ctx, extra)
		err := s.transaction(tctx, func(tx *gorm.DB) error {
			stock, err := stockFor(tx)
			if err != nil {
				return err
			}
			left, err = s.decideAndWrite(tx, st, ts, stock, exact)
			return err
		})
		cancel()
		if uncommitted(err) {
			return s.settleBatch(ctx, ts, err)
		}
		if err == nil {
			s.wrote(id, left, gen)
		}
		if !retryable(err) || attempt == attempts {
			return err
		}
	}
}

// settleBatch answers the tickets of a batch whose COMMIT failed with
// cause (see settle). Committed: every answer stands as decided. Rolled
// back: nothing was written, and the whole hold fails (unavailable), its
// sold-out answers too, which may have counted on its own sales. Not
// known: the purchases it was to sell, and those replaying them, answer
// outcome_unknown; those that replayed an earlier order keep that answer;
// the rest were decided on a stock nobody can vouch for and wrote nothing:
// unavailable.
func (s *Seckill) settleBatch(ctx context.Context, ts []*ticket, cause error) error {
	var ids []string
	for _, t := range ts {
		if t.order != nil {
			ids = append(ids, t.p.RequestID)
		}
	}
	if len(ids) == 0 {
		// No order to write: every answer was decided on the stock read
		// under the row lock, whatever became of the COMMIT.
		return nil
	}
	_, committed, err := s.settle(ctx, ids, cause)
	switch {
	case err == nil && committed:
		return nil
	case err == nil:
		return storeErr(fmt.Sprintf("commit %d orders of product %d (rolled back)", len(ids), ts[0].p.ProductID), cause)
	}
	for _, t := range ts {
		switch {
		case t.order != nil || t.first != nil:
			t.r, t.err = Receipt{}, outcomeUnknown(t.p, errors.Join(cause, err))
		case t.r.Replayed:
		default:
			t.r, t.err = Receipt{}, ErrUnavailable.because(cause)
		}
	}
	return nil
}

// retryable says a batch's transaction failed for a reason that deciding
// again fixes: another purchase wrote one of its request IDs meanwhile, or
// the database chose it as a deadlock's victim.
func retryable(err error) bool {
	return errors.Is(err, gorm.ErrDuplicatedKey) || isDeadlock(err)
}

// isDeadlock says the database chose the transaction as a deadlock's
// victim: trying it again is the cure.
func isDeadlock(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == 1213
}

// decideAndWrite is writeBatch's transaction once the stock is known. It
// returns the stock it leaves.
func (s *Seckill) decideAndWrite(tx *gorm.DB, st Strategy, ts []*ticket, stock int64, exact bool) (int64, error) {
	used, err := usedRequestIDs(tx, ts)
	if err != nil {
		return 0, err
	}
	units, err := s.unitsHeld(tx, ts)
	if err != nil {
		return 0, err
	}
	sl := s.decide(st, ts, stock, used, units)
	if len(sl.orders) == 0 {
		return stock, nil
	}
	return s.writeSale(tx, ts, sl, exact)
}

// batchSale is what a batch decided to sell: orders[i] is sold[i]'s, total
// is their quantity, left the stock they leave and units the units of the
// users sold to, after the sale.
type batchSale struct {
	orders      []model.Order
	sold        []*ticket
	left, total int64
	units       map[string]int64
}

// decide asks the sale rule (package sale) to answer the tickets in line
// order, against stock, the orders already made with their request IDs
// (used) and the units each user holds, and answers those it does not
// sell: a replay, a refusal. A ticket whose own lock wait ran out before
// the hold got the row lock answers lock_timeout and is left out.
func (s *Seckill) decide(st Strategy, ts []*ticket, stock int64, used map[string]model.Order, units map[string]int64) batchSale {
	id := ts[0].p.ProductID
	state := sale.State{Product: id, Stock: stock, Limit: s.cfg.PerUserLimit, Units: units}
	if len(used) > 0 {
		state.Used = make(map[string]sale.Prior, len(used))
		for rid, o := range used {
			state.Used[rid] = sale.Prior{Product: o.ProductID, User: string(o.UserID), Quantity: o.Quantity}
		}
	}
	ps := make([]sale.Purchase, 0, len(ts))
	in := make([]*ticket, 0, len(ts)) // in[i] is ps[i]'s ticket
	for _, t := range ts {
		t.r, t.err, t.order, t.first = Receipt{}, nil, nil, nil
		if t.expired {
			t.err = ErrLockTimeout.because(fmt.Errorf("row lock of product %d: its wait ran out", id))
			continue
		}
		ps = append(ps, sale.Purchase{RequestID: t.p.RequestID, User: t.p.UserID, Quantity: t.p.Quantity})
		in = append(in, t)
	}
	out := sale.Decide(state, ps)
	sl := batchSale{left: out.Left, total: out.Sold, units: out.Units}
	for i, d := range out.Decisions {
		t := in[i]
		switch d.Verdict {
		case sale.Sold:
			sl.orders = append(sl.orders, newOrder(t.p, st.Name, d.Left))
			sl.sold = append(sl.sold, t)
		case sale.ReplayOf:
			t.first = in[d.Of]
		default:
			t.r, t.err = s.refusal(t.p, d, used[t.p.RequestID])
		}
	}
	return sl
}

// refusal is the answer to a purchase the sale rule did not sell (d): a
// replay of prior, the order its request ID made, or an error.
func (s *Seckill) refusal(p Purchase, d sale.Decision, prior model.Order) (Receipt, error) {
	switch d.Verdict {
	case sale.Replay:
		return Receipt{Order: prior, Replayed: true}, nil
	case sale.SoldOut:
		return Receipt{}, soldOut(p.ProductID, d.Left)
	case sale.OverLimit:
		return Receipt{}, errorf(CodeLimitExceeded, "user %s has %d of product %d, the limit is %d", p.UserID, d.Units, p.ProductID, s.cfg.PerUserLimit)
	case sale.Reused:
		return Receipt{}, requestIDReused(p)
	}
	return Receipt{}, fmt.Errorf("purchase of product %d: the sale rule answered %v", p.ProductID, d.Verdict)
}

// writeSale writes what decide sold: one decrement (conditional on the
// stock when exact), the users' new units and the orders; then it answers
// the tickets sold and those replaying them. It returns the stock it
// leaves.
func (s *Seckill) writeSale(tx *gorm.DB, ts []*ticket, sl batchSale, exact bool) (int64, error) {
	id := ts[0].p.ProductID
	orders, left, total := sl.orders, sl.left, sl.total
	q := tx.Model(&model.Product{}).Where("id = ?", id)
	if exact {
		q = q.Where("stock >= ?", total)
	}
	res := q.Update("stock", exprDecrement(total))
	if res.Error != nil {
		return 0, fmt.Errorf("decrement the stock of product %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return 0, fmt.Errorf("decrement the stock of product %d by %d: the row changed under its lock", id, total)
	}
	if !exact {
		// Unfenced: another holder may have written since the stock was
		// read; the orders say what the stock really became.
		var after int64
		if err := tx.Model(&model.Product{}).Where("id = ?", id).Select("stock").Scan(&after).Error; err != nil {
			return 0, fmt.Errorf("read the stock of product %d: %w", id, err)
		}
		for i := range orders {
			orders[i].RemainingStock += after - left
		}
		left = after
	}
	if err := s.setUnits(tx, id, sl.sold, sl.units); err != nil {
		return 0, err
	}
	if err := tx.Create(&orders).Error; err != nil {
		return 0, fmt.Errorf("write %d orders: %w", len(orders), err)
	}
	sl.answer(ts)
	return left, nil
}

// answer gives the tickets sold their orders, final now, their IDs
// included, and those replaying them theirs.
func (sl batchSale) answer(ts []*ticket) {
	for i, t := range sl.sold {
		t.order = &sl.orders[i]
	}
	for _, t := range ts {
		switch {
		case t.order != nil:
			t.r = Receipt{Order: *t.order}
		case t.first != nil:
			t.r = Receipt{Order: *t.first.order, Replayed: true}
		}
	}
}

// usedRequestIDs returns the orders already made with the tickets' request
// IDs, by request ID.
func usedRequestIDs(tx *gorm.DB, ts []*ticket) (map[string]model.Order, error) {
	var ids []string
	for _, t := range ts {
		if t.p.RequestID != "" && !t.p.serverRequestID {
			ids = append(ids, t.p.RequestID)
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

// unitsHeld returns the units of the product that the tickets' users
// already hold (an empty map when there is no limit). Every writer of a
// product's units holds the product's row lock first, and this transaction
// holds it, so a read that sees the latest commit sees every write there
// is, and none can come. On InnoDB that is a plain read: its snapshot is
// taken at the first plain read, after the row lock. A locking read there
// would lock, for a user without a row yet, the index gap before the next
// product's rows: two batches of neighbouring hot products then deadlocked
// inserting into the gaps each had locked (a 10,000-product catalogue
// answered 15 purchases 503, each batch a victim 5 times). On TiDB a plain
// read sees the transaction's start, before the row lock's wait (a
// pessimistic batch let users buy twice): there it is a locking read,
// which reads the latest commit and locks only the keys it names.
func (s *Seckill) unitsHeld(tx *gorm.DB, ts []*ticket) (map[string]int64, error) {
	units := map[string]int64{}
	if s.cfg.PerUserLimit <= 0 {
		return units, nil
	}
	var users []string
	for _, t := range ts {
		users = append(users, t.p.UserID)
	}
	if s.lockingReads {
		tx = forUpdate(tx)
	}
	var rows []model.UserUnits
	err := tx.Where("product_id = ? AND user_id IN ?", ts[0].p.ProductID, users).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read the units users hold: %w", err)
	}
	for _, r := range rows {
		units[string(r.UserID)] = r.Units
	}
	return units, nil
}

// setUnits writes the new units of the users sold to.
func (s *Seckill) setUnits(tx *gorm.DB, productID int64, sold []*ticket, units map[string]int64) error {
	if s.cfg.PerUserLimit <= 0 {
		return nil
	}
	var rows []model.UserUnits
	seen := map[string]bool{}
	for _, t := range sold {
		if !seen[t.p.UserID] {
			seen[t.p.UserID] = true
			rows = append(rows, model.UserUnits{ProductID: productID, UserID: model.BinaryString(t.p.UserID), Units: units[t.p.UserID]})
		}
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
