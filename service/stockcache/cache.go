// Package stockcache is what one instance of the service has seen of each
// product's stock: per product, the least stock seen in the product's
// current reset generation (model.Product.Generation). Stock only falls
// within a generation, so a purchase of more than that is sold out without
// touching the database or Redis. A refresher reads the stock and
// generation of every remembered product with less than api.MaxQuantity
// left again every Refresh, so that a reset on another instance reopens the
// sale here within that time; a reset on this instance does at once. The
// database stays the last word: a stale cache can only cost a sale, never
// oversell.
//
// A reset is also announced on the Redis nodes (Announce, on a channel of
// the instance's key prefix), so that every instance hears of it at once;
// the refresher is what a lost message falls back on.
//
// Everything the cache learns carries the version of the stock it belongs
// to (Version: the generation and the returns of units since its reset): a
// newer version replaces what it knew, the same one can only lower the
// stock, an older one is ignored. So a reset announcement that arrives
// late, after a newer reset, or a write that committed before a reset or a
// return of units and reports after it, never marks the new sale sold out.
// A return is announced as a reset is; a cancel's return also holds the
// product's sold-out answers on every instance from before its COMMIT
// until its new stock is heard (Hold, HoldHeard).
//
// So that a replayed request of a sold-out product still answers with its
// order, the cache also keeps the request IDs of the product's orders once
// it has seen it at zero (they are final then, until the next reset): a
// request ID among them is looked up, any other is sold out (OrderOf). They
// are read together with the generation they belong to, and kept only while
// it is still the product's.
package stockcache

import (
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"
	"gorm.io/gorm"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/model"
)

// Refresh is how often the cache re-reads the stock it could answer sold
// out from.
const Refresh = 250 * time.Millisecond

// maxRememberedOrders bounds the request IDs kept per sold-out product;
// past it, requests with IDs are looked up in the database.
const maxRememberedOrders = 100_000

// UnknownGeneration is the generation of a product the cache has not seen.
const UnknownGeneration = -1

// Version orders what is known of a product's stock: its generation (its
// resets, model.Product.Generation), then the returns of units since the
// last one (model.Product.Returns). Within one version the stock only
// falls.
type Version struct {
	Gen, Returns int64
}

// Unknown is the version of a product the cache has not seen.
var Unknown = Version{Gen: UnknownGeneration}

// Of is the version of a product as read from its row.
func Of(p model.Product) Version {
	return Version{Gen: p.Generation, Returns: p.Returns}
}

// Before says v is older than w.
func (v Version) Before(w Version) bool {
	return v.Gen < w.Gen || v.Gen == w.Gen && v.Returns < w.Returns
}

// Config is what a Cache reads, writes and tells.
type Config struct {
	// DB holds the products and orders; every read of it is bounded by
	// DBTimeout.
	DB        *gorm.DB
	DBTimeout time.Duration
	// Redis are the nodes resets are announced on, on Channel.
	Redis   []redis.UniversalClient
	Channel string
	// SoldOut is the answer to a purchase of a product with stock left,
	// too few.
	SoldOut func(product, stock int64) error
	// Seen, when not nil, is told every stock the cache takes (a gauge).
	Seen func(product, stock int64)
	Log  *slog.Logger

	// OrdersRead and ResetHeard, when not nil, are points where a test
	// forces an interleaving: OrdersRead runs in OrderOf between the read
	// of a sold-out product's request IDs and keeping them; ResetHeard
	// after an announced reset was applied, or ignored.
	OrdersRead func(product int64)
	ResetHeard func(product, gen int64)
}

// Cache is one instance's cache of stock.
type Cache struct {
	cfg Config
	// mu guards m and every entry in it, read under its read lock and
	// changed only under its write lock: every purchase reads it
	// (SoldOutAnswer), so buyers of different products, or of one sold-out
	// product, do not wait on one another.
	mu         sync.RWMutex
	m          map[int64]*entry
	ordersOnce singleflight.Group
	// holds are the running holds of each product's sold-out answers, by
	// token, until when (Hold), guarded by mu as m is.
	holds map[int64]map[string]time.Time
}

// entry is what the cache knows of one product.
type entry struct {
	// stock is the least stock seen in version v.
	stock int64
	v     Version
	// out is the sold-out answer for stock (Config.SoldOut's), made when
	// the stock is seen, below api.MaxQuantity, so that the purchases it
	// answers share it rather than each making its own; nil for more
	// stock, which no purchase is sold out of.
	out error
	// orders maps the request IDs of the generation's orders to their
	// order IDs, once loaded at zero (loaded); nil and loaded when there
	// are more than the cache keeps.
	orders map[string]int64
	loaded bool
}

// New returns an empty cache; Run keeps it fresh.
func New(cfg Config) *Cache {
	return &Cache{cfg: cfg, m: make(map[int64]*entry), holds: make(map[int64]map[string]time.Time)}
}

// SoldOut reports whether a purchase of q units of the product is sure to
// be sold out (never while it is held: Hold), and the stock the cache has
// seen.
func (c *Cache) SoldOut(product, q int64) (stock int64, out bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e, ok := c.m[product]; ok {
		return e.stock, q > e.stock && !c.heldLocked(product)
	}
	return 0, false
}

// SoldOutAnswer returns the answer to a purchase of q units of the product
// when the cache is sure it is sold out (never while it is held: Hold),
// nil otherwise: Config.SoldOut's for the stock the cache has seen, made
// once per stock.
func (c *Cache) SoldOutAnswer(product, q int64) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.m[product]
	switch {
	case !ok || q <= e.stock || c.heldLocked(product):
		return nil
	case e.out != nil:
		return e.out
	}
	return c.cfg.SoldOut(product, e.stock)
}

// Knows reports whether the product's stock has been seen.
func (c *Cache) Knows(product int64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.m[product]
	return ok
}

// Generation is the generation the cache holds the product's stock for;
// UnknownGeneration when it holds none.
func (c *Cache) Generation(product int64) int64 {
	return c.At(product).Gen
}

// At is the version the cache holds the product's stock for; Unknown when
// it holds none. A write reads it before it begins and reports what it left
// with it (Saw), so that a write that raced a reset or a return cannot
// lower the stock they made.
func (c *Cache) At(product int64) Version {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if e, ok := c.m[product]; ok {
		return e.v
	}
	return Unknown
}

// Saw records stock seen (by a read, a committed write, a reset, a return)
// in version v: a newer version replaces what the cache knew, its orders
// included; the same one keeps the least stock; an older one, or an
// unknown one, changes nothing.
func (c *Cache) Saw(product, stock int64, v Version) {
	if c.observe(product, stock, v) && c.cfg.Seen != nil {
		c.cfg.Seen(product, stock)
	}
}

// observe is Saw's change to the cache; it reports whether it made one.
func (c *Cache) observe(product, stock int64, v Version) bool {
	if v.Gen < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[product]
	switch {
	case !ok || e.v.Before(v):
		c.m[product] = &entry{stock: stock, v: v, out: c.answerAt(product, stock)}
		return true
	case v == e.v && stock < e.stock:
		e.stock, e.out = stock, c.answerAt(product, stock)
		return true
	}
	return false
}

// answerAt is an entry's sold-out answer (entry.out) for stock.
func (c *Cache) answerAt(product, stock int64) error {
	if stock >= api.MaxQuantity {
		return nil
	}
	return c.cfg.SoldOut(product, stock)
}

// low returns the products remembered with less stock than one purchase
// may ask for (api.MaxQuantity): the only ones the cache can answer sold
// out.
func (c *Cache) low() []int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var ids []int64
	for id, e := range c.m {
		if e.stock < api.MaxQuantity {
			ids = append(ids, id)
		}
	}
	return ids
}
