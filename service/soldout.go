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
// stock it has seen since the product's last reset. Stock only falls
// between resets, so a purchase of more than that is sold out without
// touching the database or Redis. A refresher reads every remembered
// product's stock again every stockRefresh, so that a reset on another
// instance reopens the sale here within that time; a reset on this instance
// does at once. The database stays the last word: a stale memory can only
// cost a sale, never oversell.
//
// A reset is also announced on the Redis nodes (a channel of the key
// prefix, "stock"), so that every instance hears of it at once; the
// refresher is what a lost message falls back on.
//
// So that a replayed request of a sold-out product still answers with its
// order, the memory also keeps the request IDs of the product's orders once
// it has seen it at zero (they are final then, until a reset): a request ID
// among them is looked up, any other is sold out.

// stockRefresh is how often the memory re-reads the stock it remembers.
const stockRefresh = 250 * time.Millisecond

// maxRememberedOrders bounds the request IDs kept per sold-out product;
// past it, requests with IDs are looked up in the database.
const maxRememberedOrders = 100_000

type stockMemory struct {
	mu   sync.Mutex
	seen map[int64]int64
	// orders holds, per product seen at zero, the ID of the order each
	// request ID made; nil until loaded.
	orders map[int64]map[string]int64
}

func newStockMemory() *stockMemory {
	return &stockMemory{seen: make(map[int64]int64), orders: make(map[int64]map[string]int64)}
}

// soldOut reports whether a purchase of q units of the product is sure to
// be sold out.
func (m *stockMemory) soldOut(product, q int64) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	stock, ok := m.seen[product]
	return stock, ok && q > stock
}

// knows reports whether the product's stock has been seen.
func (m *stockMemory) knows(product int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.seen[product]
	return ok
}

// saw records stock seen by a read or a write: the memory keeps the least.
func (m *stockMemory) saw(product, stock int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.seen[product]; !ok || stock < old {
		m.seen[product] = stock
	}
}

// set records a product's stock as it is now (a reset, or the refresher's
// read): it may rise.
func (m *stockMemory) set(product, stock int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.seen[product]; ok && stock > old {
		delete(m.orders, product) // a reset: the orders went with it
	}
	m.seen[product] = stock
}

// reset records the stock a reset set: the product's orders are gone.
func (m *stockMemory) reset(product, stock int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[product] = stock
	delete(m.orders, product)
}

// products returns the products remembered.
func (m *stockMemory) products() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]int64, 0, len(m.seen))
	for id := range m.seen {
		ids = append(ids, id)
	}
	return ids
}

// refresh re-reads the stock of every remembered product, every
// stockRefresh, until ctx ends.
func (s *Seckill) refresh(ctx context.Context) {
	t := time.NewTicker(stockRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := s.memory.products()
		if len(ids) == 0 {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, stockRefresh*4)
		var rows []model.Product
		err := s.db.WithContext(rctx).Select("id", "stock").Where("id IN ?", ids).Find(&rows).Error
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "refresh the stock memory", "err", err)
			}
			continue
		}
		for _, p := range rows {
			s.memory.set(p.ID, p.Stock)
			s.metrics.stock(p.ID, p.Stock)
		}
	}
}

// stockChannel is the channel stock resets are announced on.
func (s *Seckill) stockChannel() string { return s.cfg.KeyPrefix + "stock" }

// announceReset tells every instance, through every Redis node, that the
// product's stock was reset to stock. A node that does not take it is
// logged: its instances learn of the reset from their refresher.
func (s *Seckill) announceReset(ctx context.Context, product, stock int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	msg := strconv.FormatInt(product, 10) + ":" + strconv.FormatInt(stock, 10)
	for i, c := range s.redis {
		if err := c.Publish(ctx, s.stockChannel(), msg).Err(); err != nil {
			s.log.WarnContext(ctx, "announce a stock reset", "node", i, "product", product, "err", err)
		}
	}
}

// listenResets applies the resets announced on node c until ctx ends.
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
		id, stock, ok := strings.Cut(msg.Payload, ":")
		product, err1 := strconv.ParseInt(id, 10, 64)
		left, err2 := strconv.ParseInt(stock, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			s.log.WarnContext(ctx, "a stock reset announcement that does not parse", "payload", msg.Payload)
			continue
		}
		s.memory.reset(product, left)
		s.metrics.stock(product, left)
	}
}

// answerSoldOut answers a purchase the memory knows is sold out: sold out,
// unless its request ID made an order of the product, which it replays. It
// bounds its own database calls (there are none when the memory can tell).
func (s *Seckill) answerSoldOut(ctx context.Context, p Purchase, stock int64) (Receipt, error) {
	out := soldOut(p.ProductID, stock)
	if p.RequestID == "" {
		return Receipt{}, out
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
	s.memory.mu.Lock()
	stock, seen := s.memory.seen[product]
	orders, loaded := s.memory.orders[product]
	s.memory.mu.Unlock()
	if !seen || stock > 0 {
		return 0, false, nil
	}
	if !loaded {
		// One load for every buyer that asks at once, on a context of its
		// own: one buyer's deadline must not fail the others'.
		v, err, _ := s.ordersOnce.Do(fmt.Sprint(product), func() (any, error) {
			lctx, cancel := s.dbCtx(context.WithoutCancel(ctx), 0)
			defer cancel()
			return s.loadOrders(lctx, product)
		})
		if err != nil {
			return 0, false, err
		}
		orders = v.(map[string]int64)
	}
	if orders == nil {
		return 0, false, nil // too many to remember: look it up
	}
	return orders[requestID], true, nil
}

// loadOrders reads the request IDs of a sold-out product's orders into the
// memory; nil, remembered too, when there are more than it keeps.
func (s *Seckill) loadOrders(ctx context.Context, product int64) (map[string]int64, error) {
	var rows []model.Order
	err := s.db.WithContext(ctx).Select("id", "request_id").
		Where("product_id = ? AND request_id IS NOT NULL", product).
		Limit(maxRememberedOrders + 1).Find(&rows).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, storeErr("read the request IDs of a sold-out product", err)
	}
	var orders map[string]int64 // nil: too many, remembered as such
	if len(rows) <= maxRememberedOrders {
		orders = make(map[string]int64, len(rows))
		for _, o := range rows {
			orders[string(*o.RequestID)] = o.ID
		}
	}
	s.memory.mu.Lock()
	defer s.memory.mu.Unlock()
	if s.memory.seen[product] <= 0 { // not reset meanwhile
		s.memory.orders[product] = orders
	}
	return orders, nil
}
