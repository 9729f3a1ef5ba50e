package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
)

// The sold-out memory: each instance remembers, per product, the least
// stock it has seen in the product's current reset generation
// (model.Product.Generation). Stock only falls within a generation, so a
// purchase of more than that is sold out without touching the database or
// Redis. A refresher reads the stock and generation of every remembered
// product with less than MaxQuantity left again every stockRefresh, so that
// a reset on another instance reopens the sale here within that time; a
// reset on this instance does at once. The
// database stays the last word: a stale memory can only cost a sale, never
// oversell.
//
// A reset is also announced on the Redis nodes (a channel of the key
// prefix, "stock"), so that every instance hears of it at once; the
// refresher is what a lost message falls back on.
//
// Everything the memory learns carries the generation it belongs to: a
// newer generation replaces what it knew, the same one can only lower the
// stock, an older one is ignored. So a reset announcement that arrives late,
// after a newer reset, or a write that committed before a reset and reports
// after it, never marks the new sale sold out.
//
// So that a replayed request of a sold-out product still answers with its
// order, the memory also keeps the request IDs of the product's orders once
// it has seen it at zero (they are final then, until the next reset): a
// request ID among them is looked up, any other is sold out. They are read
// together with the generation they belong to, and kept only while it is
// still the product's.

// stockRefresh is how often the memory re-reads the stock it remembers.
const stockRefresh = 250 * time.Millisecond

// maxRememberedOrders bounds the request IDs kept per sold-out product;
// past it, requests with IDs are looked up in the database.
const maxRememberedOrders = 100_000

// unknownGeneration is the generation of a product the memory has not seen.
const unknownGeneration = -1

// stockEntry is what the memory knows of one product.
type stockEntry struct {
	// stock is the least stock seen in generation gen.
	stock, gen int64
	// out is the sold-out answer for stock (soldOut's), made when the
	// stock is seen, below MaxQuantity, so that the purchases it answers
	// share it rather than each making its own; nil for more stock, which
	// no purchase is sold out of. Like stock, it is only changed under the
	// write lock.
	out error
	// orders maps the request IDs of the generation's orders to their
	// order IDs, once loaded at zero (loaded); nil and loaded when there
	// are more than the memory keeps.
	orders map[string]int64
	loaded bool
}

// stockMemory is the memory of every product. Its map and every stockEntry in
// it are read under mu's read lock and changed only under its write lock
// (observe, loadOrders): every purchase reads it (soldOutAnswer), so
// buyers of different products, or of one sold-out product, do not wait on
// one another.
type stockMemory struct {
	mu sync.RWMutex
	m  map[int64]*stockEntry
}

func newStockMemory() *stockMemory {
	return &stockMemory{m: make(map[int64]*stockEntry)}
}

// soldOut reports whether a purchase of q units of the product is sure to
// be sold out, and the stock the memory has seen.
func (m *stockMemory) soldOut(product, q int64) (int64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if e, ok := m.m[product]; ok {
		return e.stock, q > e.stock
	}
	return 0, false
}

// soldOutAnswer returns the answer to a purchase of q units of the product
// when the memory is sure it is sold out, nil otherwise: soldOut's answer
// for the stock the memory has seen, made once per stock (see stockEntry.out).
func (m *stockMemory) soldOutAnswer(product, q int64) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.m[product]
	switch {
	case !ok || q <= e.stock:
		return nil
	case e.out != nil:
		return e.out
	}
	return soldOut(product, e.stock)
}

// soldOutAnswerAt is a stockEntry's sold-out answer (stockEntry.out) for stock.
func soldOutAnswerAt(product, stock int64) error {
	if stock >= MaxQuantity {
		return nil
	}
	return soldOut(product, stock)
}

// knows reports whether the product's stock has been seen.
func (m *stockMemory) knows(product int64) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.m[product]
	return ok
}

// generation is the generation the memory holds the product's stock for;
// unknownGeneration when it has not seen it. A write takes it before it
// begins and reports what it left with it (observe), so that a write that
// raced a reset cannot lower the new sale's stock.
func (m *stockMemory) generation(product int64) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if e, ok := m.m[product]; ok {
		return e.gen
	}
	return unknownGeneration
}

// observe records stock seen (by a read, a committed write, a reset) in
// generation gen: a newer generation replaces what the memory knew, its
// orders included; the same one keeps the least stock; an older one, or an
// unknown one, changes nothing. It reports whether it changed the memory.
func (m *stockMemory) observe(product, stock, gen int64) bool {
	if gen < 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[product]
	switch {
	case !ok || gen > e.gen:
		m.m[product] = &stockEntry{stock: stock, gen: gen, out: soldOutAnswerAt(product, stock)}
		return true
	case gen == e.gen && stock < e.stock:
		e.stock, e.out = stock, soldOutAnswerAt(product, stock)
		return true
	}
	return false
}

// low returns the products remembered with less stock than one purchase
// may ask for (MaxQuantity): the only ones the memory can answer sold out.
func (m *stockMemory) low() []int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var ids []int64
	for id, e := range m.m {
		if e.stock < MaxQuantity {
			ids = append(ids, id)
		}
	}
	return ids
}

// refresh re-reads, every stockRefresh until ctx ends, the stock of the
// remembered products the memory can answer sold out (low). Re-reading the
// others would change no answer: a catalogue of 10,000 products, each with
// plenty left, cost a tenth of the instance's CPU in re-reads.
func (s *Seckill) refresh(ctx context.Context) {
	t := time.NewTicker(stockRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := s.memory.low()
		if len(ids) == 0 {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, stockRefresh*4)
		var rows []model.Product
		err := s.db.WithContext(rctx).Select("id", "stock", "generation").Where("id IN ?", ids).Find(&rows).Error
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "refresh the stock memory", "err", err)
			}
			continue
		}
		for _, p := range rows {
			s.sawStock(p.ID, p.Stock, p.Generation)
		}
	}
}

// sawStock records a product's stock as read, or as left by a committed
// write, in generation gen (a write's: the memory's generation when the
// write began).
func (s *Seckill) sawStock(product, stock, gen int64) {
	if s.memory.observe(product, stock, gen) {
		s.metrics.stock(product, stock)
	}
}

// stockChannel is the channel stock resets are announced on.
func (s *Seckill) stockChannel() string { return s.cfg.KeyPrefix + "stock" }

// resetMessage is the announcement of a reset: "product:stock:generation".
func resetMessage(product, stock, gen int64) string {
	return strconv.FormatInt(product, 10) + ":" + strconv.FormatInt(stock, 10) + ":" + strconv.FormatInt(gen, 10)
}

// parseResetMessage reads resetMessage's form.
func parseResetMessage(msg string) (product, stock, gen int64, err error) {
	parts := strings.Split(msg, ":")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("%q is not product:stock:generation", msg)
	}
	var nums [3]int64
	for i, part := range parts {
		if nums[i], err = strconv.ParseInt(part, 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("%q is not product:stock:generation: %w", msg, err)
		}
	}
	return nums[0], nums[1], nums[2], nil
}

// announceReset tells every instance, through every Redis node, that the
// product's stock was reset to stock in generation gen. A node that does
// not take it is logged: its instances learn of the reset from their
// refresher.
func (s *Seckill) announceReset(ctx context.Context, product, stock, gen int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	msg := resetMessage(product, stock, gen)
	for i, c := range s.redis {
		if err := c.Publish(ctx, s.stockChannel(), msg).Err(); err != nil {
			s.log.WarnContext(ctx, "announce a stock reset", "node", i, "product", product, "err", err)
		}
	}
}

// listenResets applies the resets announced on node c until ctx ends. Each
// reset is heard once per node: the generation makes the copies, and any
// announcement older than what the memory knows, change nothing.
func (s *Seckill) listenResets(ctx context.Context, c redis.UniversalClient) {
	sub := c.Subscribe(ctx, s.stockChannel())
	// Closing the subscription is what ends its channel.
	stop := context.AfterFunc(ctx, func() {
		if err := sub.Close(); err != nil {
			s.log.Warn("close the stock reset subscription", "err", err)
		}
	})
	defer stop()
	for msg := range sub.Channel() {
		product, stock, gen, err := parseResetMessage(msg.Payload)
		if err != nil {
			s.log.WarnContext(ctx, "a stock reset announcement that does not parse", "err", err)
			continue
		}
		s.sawStock(product, stock, gen)
		if h := s.cfg.hooks.resetHeard; h != nil {
			h(product, gen)
		}
	}
}

// answerSoldOut answers a purchase the memory knows is sold out, having
// seen stock left: sold out, unless its request ID made an order of the
// product, which it replays (answerOut).
func (s *Seckill) answerSoldOut(ctx context.Context, p Purchase, stock int64) (Receipt, error) {
	return s.answerOut(ctx, p, soldOut(p.ProductID, stock))
}

// answerOut answers a purchase the memory knows is sold out: out, unless
// its request ID made an order of the product, which it replays. It bounds
// its own database calls (there are none when the memory can tell).
func (s *Seckill) answerOut(ctx context.Context, p Purchase, out error) (Receipt, error) {
	if p.RequestID == "" || p.serverRequestID {
		return Receipt{}, out // an ID made for this purchase made no order yet
	}
	id, known, err := s.orderOfRequest(ctx, p.ProductID, p.RequestID)
	if err != nil {
		return Receipt{}, err
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
			return Receipt{}, storeErr("read a replayed order", err)
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

// orderOfRequest returns the order the request ID made of a product the
// memory has seen at zero: known says the memory could tell (id 0: none).
func (s *Seckill) orderOfRequest(ctx context.Context, product int64, requestID string) (id int64, known bool, err error) {
	s.memory.mu.RLock()
	e, seen := s.memory.m[product]
	var (
		gen            int64
		orders         map[string]int64
		loaded, atZero bool
	)
	if seen {
		gen, orders, loaded, atZero = e.gen, e.orders, e.loaded, e.stock <= 0
	}
	s.memory.mu.RUnlock()
	if !atZero {
		return 0, false, nil
	}
	if !loaded {
		// One load for every buyer that asks at once, on a context of its
		// own: one buyer's deadline must not fail the others'.
		v, err, _ := s.ordersOnce.Do(fmt.Sprint(product, ":", gen), func() (any, error) {
			lctx, cancel := s.dbCtx(context.WithoutCancel(ctx), 0)
			defer cancel()
			return s.loadOrders(lctx, product, gen)
		})
		if err != nil {
			return 0, false, err
		}
		got := v.(generationOrders)
		if got.gen != gen {
			return 0, false, nil // reset meanwhile: look it up
		}
		orders = got.orders
	}
	if orders == nil {
		return 0, false, nil // too many to remember: look it up
	}
	return orders[requestID], true, nil
}

// generationOrders are the request IDs of a product's orders (nil: more
// than the memory keeps) as of its generation gen.
type generationOrders struct {
	gen    int64
	orders map[string]int64
}

// loadOrders reads the request IDs of a sold-out product's orders, with the
// generation they belong to, in one snapshot, and keeps them in the memory
// while it still holds the product at zero in that generation (asked for
// gen). A reset after the read and a new sell-out in the next generation
// leave them out of the memory.
func (s *Seckill) loadOrders(ctx context.Context, product, gen int64) (generationOrders, error) {
	var (
		rows []model.Order
		prod model.Product
	)
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Select("id", "generation").Take(&prod, product).Error; err != nil {
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
		return generationOrders{}, storeErr("read the request IDs of a sold-out product", err)
	}
	got := generationOrders{gen: prod.Generation}
	if len(rows) <= maxRememberedOrders {
		got.orders = make(map[string]int64, len(rows))
		for _, o := range rows {
			got.orders[string(*o.RequestID)] = o.ID
		}
	}
	if h := s.cfg.hooks.ordersRead; h != nil {
		h(product)
	}
	s.memory.mu.Lock()
	defer s.memory.mu.Unlock()
	if e, ok := s.memory.m[product]; ok && e.gen == gen && got.gen == gen && e.stock <= 0 {
		e.orders, e.loaded = got.orders, true
	}
	return got, nil
}
