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
