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
// writeBatch has the sale rule decide every purchase of the batch in line
// order (decide) and writes what was sold in one statement each
// (writeSale): one decrement, the users' new units and the orders. A
// duplicate request ID or a deadlock makes it decide again; a COMMIT whose
// outcome is unknown is settled (settleBatch). It returns one answer per
// purchase.

// writeBatch decides the purchases ps in line order against the stock that
// stockFor returns inside the transaction (bounded by DBTimeout plus extra,
// for what stockFor waits or works) (having taken the product's row lock:
// every writer takes it first), with which purchases' own lock waits ran
// out meanwhile (nil: none), the request IDs already used and the units
// each user holds, then writes what was sold: one decrement, the users' new
// units and the orders, in one statement each. exact says the stock was
// read under the row lock; otherwise the decrement is written whatever the
// stock is now (the unsafe strategies' flaw). A request ID that another
// purchase wrote meanwhile (a duplicate key), or a deadlock, makes it
// decide again.
func (s *Seckill) writeBatch(ctx context.Context, st Strategy, ps []Purchase, exact bool, extra time.Duration, stockFor func(tx *gorm.DB) (int64, []bool, error)) ([]answer, error) {
	// A deadlock's victim rolled back and runs again, up to five times in
	// all: batches of neighbouring hot products can deadlock in a row.
	const attempts = 5
	id := ps[0].ProductID
	gen := s.memory.generation(id)
	for attempt := 1; ; attempt++ {
		var d decided
		tctx, cancel := s.dbCtx(ctx, extra)
		err := s.transaction(tctx, func(tx *gorm.DB) error {
			stock, expired, err := stockFor(tx)
			if err != nil {
				return err
			}
			d, err = s.decideAndWrite(tx, st, ps, expired, stock, exact)
			return err
		})
		cancel()
		switch {
		case uncommitted(err):
			return s.settleBatch(ctx, ps, d, err)
		case err == nil:
			s.wrote(id, d.left, gen)
			return d.answers, nil
		case !retryable(err) || attempt == attempts:
			return nil, err
		}
	}
}

// settleBatch answers the purchases of a batch d decided whose COMMIT
// failed with cause (see settle). Committed: every answer stands as
// decided. Rolled back: nothing was written, and the whole hold fails
// (unavailable), its sold-out answers too, which may have counted on its
// own sales. Not known: the purchases it was to sell, and those replaying
// them, answer outcome_unknown; those that replayed an earlier order keep
// that answer; the rest were decided on a stock nobody can vouch for and
// wrote nothing: unavailable.
func (s *Seckill) settleBatch(ctx context.Context, ps []Purchase, d decided, cause error) ([]answer, error) {
	var ids []string
	for _, i := range d.sold {
		ids = append(ids, ps[i].RequestID)
	}
	if len(ids) == 0 {
		// No order to write: every answer was decided on the stock read
		// under the row lock, whatever became of the COMMIT.
		return d.answers, nil
	}
	_, committed, err := s.settle(ctx, ids, cause)
	switch {
	case err == nil && committed:
		return d.answers, nil
	case err == nil:
		return nil, storeErr(fmt.Sprintf("commit %d orders of product %d (rolled back)", len(ids), ps[0].ProductID), cause)
	}
	writes := d.writes()
	for i, a := range d.answers {
		switch {
		case writes[i]:
			d.answers[i] = answer{err: outcomeUnknown(ps[i], errors.Join(cause, err))}
		case a.r.Replayed:
		default:
			d.answers[i] = answer{err: ErrUnavailable.because(cause)}
		}
	}
	return d.answers, nil
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

// decideAndWrite is writeBatch's transaction once the stock is known.
func (s *Seckill) decideAndWrite(tx *gorm.DB, st Strategy, ps []Purchase, expired []bool, stock int64, exact bool) (decided, error) {
	used, err := usedRequestIDs(tx, ps)
	if err != nil {
		return decided{}, err
	}
	units, err := s.unitsHeld(tx, ps)
	if err != nil {
		return decided{}, err
	}
	d := s.decide(st, ps, expired, stock, used, units)
	if len(d.orders) == 0 {
		return d, nil
	}
	return d, s.writeSale(tx, ps, &d, exact)
}

// decided is a batch as the sale rule decided it: an answer per purchase,
// and what it sells. orders[k] is the order of purchase sold[k]; purchase
// i replays purchase firstOf[i] of the same batch (same request ID); total
// is the units sold, left the stock they leave and units the units of the
// users sold to, after the sale. The answers of those sold and of those
// replaying them are final once the orders are written (finish).
type decided struct {
	answers     []answer
	orders      []model.Order
	sold        []int
	firstOf     map[int]int
	left, total int64
	units       map[string]int64
}

// decide asks the sale rule (package sale) to answer the purchases in line
// order, against stock, the orders already made with their request IDs
// (used) and the units each user holds, and answers those it does not
// sell: a replay, a refusal. A purchase whose own lock wait ran out before
// the hold got the row lock (expired[i]) answers lock_timeout and is left
// out.
func (s *Seckill) decide(st Strategy, ps []Purchase, expired []bool, stock int64, used map[string]model.Order, units map[string]int64) decided {
	id := ps[0].ProductID
	state := sale.State{Product: id, Stock: stock, Limit: s.cfg.PerUserLimit, Units: units}
	if len(used) > 0 {
		state.Used = make(map[string]sale.Prior, len(used))
		for rid, o := range used {
			state.Used[rid] = sale.Prior{Product: o.ProductID, User: string(o.UserID), Quantity: o.Quantity}
		}
	}
	d := decided{answers: make([]answer, len(ps))}
	rule := make([]sale.Purchase, 0, len(ps))
	in := make([]int, 0, len(ps)) // in[k] is rule[k]'s index in ps
	for i, p := range ps {
		if expired != nil && expired[i] {
			d.answers[i].err = ErrLockTimeout.because(fmt.Errorf("row lock of product %d: its wait ran out", id))
			continue
		}
		rule = append(rule, sale.Purchase{RequestID: p.RequestID, User: p.UserID, Quantity: p.Quantity})
		in = append(in, i)
	}
	out := sale.Decide(state, rule)
	d.left, d.total, d.units = out.Left, out.Sold, out.Units
	for k, v := range out.Decisions {
		i := in[k]
		switch v.Verdict {
		case sale.Sold:
			d.orders = append(d.orders, newOrder(ps[i], st.Name, v.Left))
			d.sold = append(d.sold, i)
		case sale.ReplayOf:
			if d.firstOf == nil {
				d.firstOf = map[int]int{}
			}
			d.firstOf[i] = in[v.Of]
		default:
			d.answers[i].r, d.answers[i].err = s.refusal(ps[i], v, used[ps[i].RequestID])
		}
	}
	return d
}

// finish gives the purchases sold their orders, final now, their IDs
// included, and those replaying them theirs.
func (d *decided) finish() {
	for k, i := range d.sold {
		d.answers[i] = answer{r: Receipt{Order: d.orders[k]}}
	}
	for i, first := range d.firstOf {
		d.answers[i] = answer{r: Receipt{Order: d.answers[first].r.Order, Replayed: true}}
	}
}

// writes says, per purchase, whether its answer is an order d writes: it
// was sold, or it replays one sold in the batch.
func (d *decided) writes() []bool {
	w := make([]bool, len(d.answers))
	for _, i := range d.sold {
		w[i] = true
	}
	for i := range d.firstOf {
		w[i] = true
	}
	return w
}

// soldUsers are the users d sells to, each once, in line order.
func (d *decided) soldUsers(ps []Purchase) []string {
	var users []string
	seen := map[string]bool{}
	for _, i := range d.sold {
		if u := ps[i].UserID; !seen[u] {
			seen[u] = true
			users = append(users, u)
		}
	}
	return users
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
// stock when exact), the users' new units and the orders; then the answers
// of those sold and of those replaying them are final (finish). d.left
// becomes the stock it leaves.
func (s *Seckill) writeSale(tx *gorm.DB, ps []Purchase, d *decided, exact bool) error {
	id := ps[0].ProductID
	q := tx.Model(&model.Product{}).Where("id = ?", id)
	if exact {
		q = q.Where("stock >= ?", d.total)
	}
	res := q.Update("stock", exprDecrement(d.total))
	if res.Error != nil {
		return fmt.Errorf("decrement the stock of product %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("decrement the stock of product %d by %d: the row changed under its lock", id, d.total)
	}
	if !exact {
		// Unfenced: another holder may have written since the stock was
		// read; the orders say what the stock really became.
		var after int64
		if err := tx.Model(&model.Product{}).Where("id = ?", id).Select("stock").Scan(&after).Error; err != nil {
			return fmt.Errorf("read the stock of product %d: %w", id, err)
		}
		for i := range d.orders {
			d.orders[i].RemainingStock += after - d.left
		}
		d.left = after
	}
	if err := s.setUnits(tx, id, d.soldUsers(ps), d.units); err != nil {
		return err
	}
	if err := tx.Create(&d.orders).Error; err != nil {
		return fmt.Errorf("write %d orders: %w", len(d.orders), err)
	}
	d.finish()
	return nil
}

// usedRequestIDs returns the orders already made with the purchases'
// request IDs, by request ID.
func usedRequestIDs(tx *gorm.DB, ps []Purchase) (map[string]model.Order, error) {
	var ids []string
	for _, p := range ps {
		if p.RequestID != "" && !p.serverRequestID {
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
// product's rows: two batches of neighbouring hot products then deadlocked
// inserting into the gaps each had locked (a 10,000-product catalogue
// answered 15 purchases 503, each batch a victim 5 times). On TiDB a plain
// read sees the transaction's start, before the row lock's wait (a
// pessimistic batch let users buy twice): there it is a locking read,
// which reads the latest commit and locks only the keys it names.
func (s *Seckill) unitsHeld(tx *gorm.DB, ps []Purchase) (map[string]int64, error) {
	units := map[string]int64{}
	if s.cfg.PerUserLimit <= 0 {
		return units, nil
	}
	var users []string
	for _, p := range ps {
		users = append(users, p.UserID)
	}
	if s.lockingReads {
		tx = forUpdate(tx)
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
func (s *Seckill) setUnits(tx *gorm.DB, productID int64, users []string, units map[string]int64) error {
	if s.cfg.PerUserLimit <= 0 {
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
