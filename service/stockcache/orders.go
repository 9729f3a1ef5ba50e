package stockcache

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
)

// OrderOf returns the order the request ID made of a product the cache has
// seen at zero: known says the cache could tell (id 0: none). The first
// asker of a product loads its orders, once for every buyer that asks at
// once.
func (c *Cache) OrderOf(ctx context.Context, product int64, requestID string) (id int64, known bool, err error) {
	c.mu.RLock()
	e, seen := c.m[product]
	var (
		v              Version
		orders         map[string]int64
		loaded, atZero bool
	)
	if seen {
		v, orders, loaded, atZero = e.v, e.orders, e.loaded, e.stock <= 0
	}
	c.mu.RUnlock()
	if !atZero {
		return 0, false, nil
	}
	if !loaded {
		// On a context of its own: one buyer's deadline must not fail the
		// others'.
		loaded, err, _ := c.ordersOnce.Do(fmt.Sprint(product, ":", v.Gen, ":", v.Returns), func() (any, error) {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.DBTimeout)
			defer cancel()
			return c.loadOrders(lctx, product, v)
		})
		if err != nil {
			return 0, false, err
		}
		got := loaded.(generationOrders)
		if got.v != v {
			return 0, false, nil // reset or returned meanwhile: look it up
		}
		orders = got.orders
	}
	if orders == nil {
		return 0, false, nil // too many to remember: look it up
	}
	return orders[requestID], true, nil
}

// generationOrders are the request IDs of a product's orders (nil: more
// than the cache keeps) as of its version v.
type generationOrders struct {
	v      Version
	orders map[string]int64
}

// loadOrders reads the request IDs of a sold-out product's orders, with the
// version they belong to, in one snapshot, and keeps them in the cache
// while it still holds the product at zero in that version (asked for v).
// A reset or a return after the read and a new sell-out after it leave
// them out of the cache.
func (c *Cache) loadOrders(ctx context.Context, product int64, v Version) (generationOrders, error) {
	var (
		rows []model.Order
		prod model.Product
	)
	err := c.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Select("id", "generation", "returns").Take(&prod, product).Error; err != nil {
			return fmt.Errorf("read the generation of product %d: %w", product, err)
		}
		err := tx.Select("id", "request_id").
			Where("product_id = ? AND request_id IS NOT NULL", product).
			Limit(maxRememberedOrders + 1).Find(&rows).Error
		if err != nil {
			return fmt.Errorf("read the request IDs of product %d: %w", product, err)
		}
		return nil
	})
	if err != nil {
		return generationOrders{}, fmt.Errorf("read the request IDs of a sold-out product: %w", err)
	}
	got := generationOrders{v: Of(prod)}
	if len(rows) <= maxRememberedOrders {
		got.orders = make(map[string]int64, len(rows))
		for _, o := range rows {
			got.orders[string(*o.RequestID)] = o.ID
		}
	}
	if h := c.cfg.OrdersRead; h != nil {
		h(product)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[product]; ok && e.v == v && got.v == v && e.stock <= 0 {
		e.orders, e.loaded = got.orders, true
	}
	return got, nil
}
