package service

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
)

// MaxStock is the largest stock a product may be given.
const MaxStock = 1_000_000_000

// Audit is the check of the stock invariant for one product.
type Audit struct {
	ProductID    int64
	InitialStock int64
	Stock        int64
	Orders       int64
	// UnitsSold are the units of orders unpaid or paid; UnitsReturned
	// those of orders cancelled or expired, back in the stock.
	UnitsSold     int64
	UnitsReturned int64
	OversoldUnits int64
	// Consistent is stock >= 0 && initial_stock - stock == units_sold.
	Consistent bool
}

// Products lists every product by ID.
func (s *Seckill) Products(ctx context.Context) ([]model.Product, error) {
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	var ps []model.Product
	if err := s.db.WithContext(ctx).Order("id").Find(&ps).Error; err != nil {
		return nil, failure.Store("list products", err)
	}
	return ps, nil
}

// Product returns the product with id.
func (s *Seckill) Product(ctx context.Context, id int64) (model.Product, error) {
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	return s.product(ctx, s.db, id)
}

func (s *Seckill) product(ctx context.Context, db *gorm.DB, id int64) (model.Product, error) {
	if id <= 0 {
		return model.Product{}, failure.Errorf(failure.CodeInvalid, "product id must be a positive integer")
	}
	var p model.Product
	err := db.WithContext(ctx).Take(&p, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.Product{}, failure.NotFound(id)
	}
	if err != nil {
		return model.Product{}, failure.Store(fmt.Sprintf("read product %d", id), err)
	}
	return p, nil
}

// CreateProduct puts a new product on sale with stock units.
func (s *Seckill) CreateProduct(ctx context.Context, name string, stock int64) (model.Product, error) {
	if n := utf8.RuneCountInString(name); n < 1 || n > 128 || !utf8.ValidString(name) {
		return model.Product{}, failure.Errorf(failure.CodeInvalid, "name must be 1 to 128 characters")
	}
	if err := checkStock(stock); err != nil {
		return model.Product{}, err
	}
	p := model.Product{Name: name, Stock: stock, InitialStock: stock}
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	if err := s.db.WithContext(ctx).Create(&p).Error; err != nil {
		return model.Product{}, failure.Store("create product", err)
	}
	return p, nil
}

// SetStock sets a product's stock and initial stock to stock and deletes
// its orders, so that a sale can be run again.
func (s *Seckill) SetStock(ctx context.Context, id, stock int64) (model.Product, error) {
	if id <= 0 {
		return model.Product{}, failure.Errorf(failure.CodeInvalid, "product id must be a positive integer")
	}
	if err := checkStock(stock); err != nil {
		return model.Product{}, err
	}
	var p model.Product
	tctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	reset := func() error {
		return s.db.WithContext(tctx).Transaction(func(tx *gorm.DB) error {
			// The product's row first, as every purchase takes it first, then
			// its orders and units: the same order of locks, no deadlock.
			var err error
			if p, err = salestore.LockProduct(tx, id); err != nil {
				return err
			}
			// The fence moves on: a lock holder from before the reset writes
			// nothing into the new sale (it gets failure.ErrLockLost).
			// So does the generation: what any instance learnt of the sale
			// before it counts for nothing in the new one.
			// And the stock is the database's again, whatever strategy
			// sold it before.
			err = tx.Model(&p).Updates(map[string]any{"stock": stock, "initial_stock": stock,
				"fence": salestore.ExprFenceBump(), "generation": gorm.Expr("generation + 1"), "returns": 0, "reserve": false, "reserve_loaded": false}).Error
			if err != nil {
				return fmt.Errorf("update stock: %w", err)
			}
			if err := tx.Where("product_id = ?", id).Delete(&model.Order{}).Error; err != nil {
				return fmt.Errorf("delete orders: %w", err)
			}
			if err := tx.Where("product_id = ?", id).Delete(&model.UserUnits{}).Error; err != nil {
				return fmt.Errorf("delete the units users hold: %w", err)
			}
			// Returns still on their way to reserve's counter go with
			// the generation they belong to.
			if err := tx.Where("product_id = ?", id).Delete(&model.ReserveReturn{}).Error; err != nil {
				return fmt.Errorf("delete the returns on their way to Redis: %w", err)
			}
			// The row is locked: nobody else moved them on meanwhile.
			p.Stock, p.InitialStock, p.Fence, p.Generation, p.Returns, p.Reserve, p.ReserveLoaded = stock, stock, p.Fence+1, p.Generation+1, 0, false, false
			return nil
		})
	}
	// A reset can be InnoDB's deadlock victim (a catalogue reset 16 at a
	// time was, in about one run in three and twice in a row; the cycle
	// was not found): the victim rolled back, so it is run again, within
	// the same deadline.
	err := reset()
	for attempt := 2; attempt <= salestore.MaxAttempts && salestore.IsDeadlock(err); attempt++ {
		err = reset()
	}
	if err != nil {
		return model.Product{}, failure.Store(fmt.Sprintf("set stock of product %d", id), err)
	}
	s.cache.Saw(id, stock, stockcache.Of(p))
	if s.reserve != nil {
		// What reserve kept of the ended generation goes too, before the
		// other instances hear of the reset (a counter they load for the
		// new one is left alone), and whether or not the admin who asked
		// is still waiting: until it goes, an instance that has not heard
		// of the reset sells from the ended generation's counter, and the
		// writers discard those reservations with it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.DBTimeout)
		err := s.reserve.Retire(rctx, id, p.Generation)
		cancel()
		if err != nil {
			s.log.WarnContext(ctx, "retire a reset product's reserve keys", "product", id, "err", err)
		}
	}
	s.cache.Announce(ctx, id, stock, stockcache.Of(p))
	return p, nil
}

func checkStock(stock int64) error {
	if stock < 0 || stock > MaxStock {
		return failure.Errorf(failure.CodeInvalid, "stock must be an integer from 0 to %d", MaxStock)
	}
	return nil
}

// Audit checks that the product's stock never went negative and that no
// unit was sold twice: initial_stock - stock must equal the units its orders
// hold.
func (s *Seckill) Audit(ctx context.Context, id int64) (Audit, error) {
	var a Audit
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		p, err := s.product(ctx, tx, id)
		if err != nil {
			return err
		}
		var sum struct {
			Orders   int64
			Units    int64
			Returned int64
		}
		err = tx.Model(&model.Order{}).Where("product_id = ?", id).
			Select("COUNT(*) AS orders, COALESCE(SUM(CASE WHEN status IN (?, ?) THEN quantity ELSE 0 END), 0) AS units, "+
				"COALESCE(SUM(CASE WHEN status IN (?, ?) THEN 0 ELSE quantity END), 0) AS returned",
				model.StatusUnpaid, model.StatusPaid, model.StatusUnpaid, model.StatusPaid).Scan(&sum).Error
		if err != nil {
			return fmt.Errorf("count orders: %w", err)
		}
		a = Audit{
			ProductID:     p.ID,
			InitialStock:  p.InitialStock,
			Stock:         p.Stock,
			Orders:        sum.Orders,
			UnitsSold:     sum.Units,
			UnitsReturned: sum.Returned,
			OversoldUnits: max(0, sum.Units-p.InitialStock),
			Consistent:    p.Stock >= 0 && p.InitialStock-p.Stock == sum.Units,
		}
		return nil
	})
	if err != nil {
		return Audit{}, failure.Store(fmt.Sprintf("audit product %d", id), err)
	}
	return a, nil
}

// Attempt is what became of a purchase attempt: its order, or under
// reserve its reservation not written yet, or why the database refused
// the reservation.
type Attempt struct {
	// Order is the order, when one carries the request ID.
	Order *model.Order
	// Reservation is the reservation waiting to be written.
	Reservation *Reservation
	// Failed is why the database refused the reservation.
	Failed *failure.Error
	// User is the buyer who made the attempt.
	User string
}

// PurchaseOf returns what became of the purchase attempt with requestID,
// under any strategy: failure.ErrPurchaseNotFound when no order and no
// reservation carries it (never made, refused, discarded by a reset, or
// lost by a Redis that lost what it acknowledged).
func (s *Seckill) PurchaseOf(ctx context.Context, requestID string) (Attempt, error) {
	return s.PurchaseOfBuyer(ctx, requestID, "")
}

// PurchaseOfBuyer is PurchaseOf to buyer user ("" for anyone): another
// buyer's attempt is not there to this one (purchase_not_found), found so
// before anything about it is asked, so that no answer tells it exists.
func (s *Seckill) PurchaseOfBuyer(ctx context.Context, requestID, user string) (Attempt, error) {
	notFound := failure.Errorf(failure.CodePurchaseNotFound, "no purchase carries request_id %q", requestID)
	mine := func(owner string) bool { return user == "" || owner == user }
	if api.CheckID(requestID) != nil {
		return Attempt{}, failure.Errorf(failure.CodeInvalid, "request_id must be 1 to %d characters of valid UTF-8, without control characters", maxIDLength)
	}
	dbCtx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	var o model.Order
	err := s.db.WithContext(dbCtx).Where("request_id = ?", requestID).Take(&o).Error
	switch {
	case err == nil && !mine(string(o.UserID)):
		return Attempt{}, notFound
	case err == nil:
		return Attempt{Order: &o, User: string(o.UserID)}, nil
	case !errors.Is(err, gorm.ErrRecordNotFound):
		return Attempt{}, failure.Store("look up request_id", err)
	case s.reserve == nil:
		return Attempt{}, notFound
	}
	product, rec, ok, err := s.reserve.Find(dbCtx, requestID)
	switch {
	case err != nil:
		return Attempt{}, failure.Store("look up request_id among the reservations", err)
	case !ok || !mine(rec.User):
		return Attempt{}, notFound
	case !rec.Pending():
		return Attempt{Failed: refusal(requestID, failure.Code(rec.Code)), User: rec.User}, nil
	}
	// Written between the two looks? The order says so.
	if err := s.db.WithContext(dbCtx).Where("request_id = ?", requestID).Take(&o).Error; err == nil {
		return Attempt{Order: &o, User: string(o.UserID)}, nil
	}
	// Pending is a promise: with SECKILL_RESERVE_ACKS, only once the
	// replicas have the reservation (a failover would lose it before).
	switch replicated, err := s.reserve.Replicated(dbCtx, product); {
	case err != nil:
		return Attempt{}, failure.Store("ask reserve's replicas for request_id", err)
	case !replicated:
		return Attempt{}, failure.ErrUnavailable.Because(fmt.Errorf("the reservation of request_id %q is on reserve's master alone, not yet on %d replicas", requestID, s.cfg.ReserveAcks.Replicas))
	}
	return Attempt{Reservation: &Reservation{Purchase: Purchase{ProductID: product, UserID: rec.User, Quantity: rec.Quantity,
		RequestID: requestID, Strategy: reserveStrategy}, Left: rec.Left}, User: rec.User}, nil
}
