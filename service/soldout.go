package service

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
)

// The answers the stock cache (package stockcache) gives without a lock or
// a sale: a purchase of more than the cache has seen left is sold out,
// unless its request ID made an order, which it replays.

// answerSoldOut answers a purchase the stock cache knows is sold out, having
// seen stock left: sold out, unless its request ID made an order of the
// product, which it replays (answerOut).
func (s *Seckill) answerSoldOut(ctx context.Context, p Purchase, stock int64) (Receipt, error) {
	return s.answerOut(ctx, p, soldOut(p.ProductID, stock))
}

// answerOut answers a purchase the stock cache knows is sold out: out, unless
// its request ID made an order of the product, which it replays. It bounds
// its own database calls (there are none when the cache can tell).
func (s *Seckill) answerOut(ctx context.Context, p Purchase, out error) (Receipt, error) {
	if p.RequestID == "" || p.ServerRequestID {
		return Receipt{}, out // an ID made for this purchase made no order yet
	}
	id, known, err := s.cache.OrderOf(ctx, p.ProductID, p.RequestID)
	if err != nil {
		return Receipt{}, failure.Store("look up a sold-out product's orders", err)
	}
	if known && id == 0 {
		return Receipt{}, out // among the product's final orders: not there
	}
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	if known {
		var o model.Order
		err := s.db.WithContext(ctx).Take(&o, id).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return Receipt{}, out // a reset deleted it meanwhile
		}
		if err != nil {
			return Receipt{}, failure.Store("read a replayed order", err)
		}
		return replayOf(p, o)
	}
	// Not remembered (the product is not at zero, or has too many orders):
	// ask the database.
	if r, ok, err := s.replay(ctx, s.db, p); ok || err != nil {
		return r, err
	}
	return Receipt{}, out
}
