package service

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
)

// The database's side of the reserve strategy (the Redis side is package
// reserve). A product's stock lives in the database after its creation and
// every reset; the first reserve purchase moves it into Redis, and from
// then until the next reset the product sells only under reserve: the sale
// stores read the mark under the row lock (and the two-round-trip
// purchase's decrement is conditional on it), and answer any other
// strategy strategy_conflict, nothing written. Reserve may take over a
// product that other strategies have sold since the reset: their sales are
// in the stock it moves.

// moveToReserve marks the product as selling under reserve in its
// generation and returns it as it is then: the stock to load into Redis
// and its generation. Moving it again in the same generation changes
// nothing.
func (s *Seckill) moveToReserve(ctx context.Context, id int64) (model.Product, error) {
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	var p model.Product
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := forUpdate(tx).Take(&p, id).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			return notFound(id)
		case err != nil:
			return fmt.Errorf("lock product %d: %w", id, err)
		case p.Reserve:
			return nil
		}
		if err := tx.Model(&p).Update("reserve", true).Error; err != nil {
			return fmt.Errorf("mark product %d as selling under reserve: %w", id, err)
		}
		p.Reserve = true
		return nil
	})
	if err != nil {
		return model.Product{}, storeErr(fmt.Sprintf("move product %d to reserve", id), err)
	}
	return p, nil
}

// Reservation is one reservation of the reserve strategy, as its stream
// holds it: the purchase, and the stock its counter in Redis left, which
// its order carries as its remaining stock (what the buyer was answered).
type Reservation struct {
	Purchase
	Left int64
}

// writeReservations writes reservations of one product, taken in
// generation gen, in line order, in one transaction of the sale store: the
// rule decides each against the database's stock, the buyers' units and
// the request IDs already used, so that the database never goes below 0
// whatever Redis says, and writing one again writes nothing more (its
// answer is its order, replayed). Each answer is the reservation's order,
// or the reason the database refused it (sold_out, limit_exceeded,
// request_id_reused). A *generationGone error says a reset discarded them
// all: nothing is written.
func (s *Seckill) writeReservations(ctx context.Context, gen int64, rs []Reservation) ([]answer, error) {
	st := Strategy{Name: reserveStrategy}
	ps := make([]Purchase, len(rs))
	for i, r := range rs {
		ps[i] = r.Purchase
		ps[i].Strategy = st.Name
	}
	id := ps[0].ProductID
	cacheGen := s.cache.Generation(id)
	d, err := s.sales.sell(ctx, ps, stockRead{reserveGen: &gen}, func(stock int64, expired []bool, used map[string]model.Order, units map[string]int64) decided {
		d := s.decide(st, ps, expired, stock, used, units)
		for k, i := range d.sold {
			d.orders[k].RemainingStock = rs[i].Left
		}
		return d
	})
	if err != nil {
		return nil, err
	}
	if d.final {
		s.wrote(id, d.left, cacheGen)
	}
	return d.answers, nil
}

// reserveStrategy is the name of the reserve strategy, which its orders
// carry.
const reserveStrategy = "reserve"
