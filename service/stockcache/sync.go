package stockcache

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/model"
)

// Run keeps the cache fresh until ctx ends: it re-reads what the cache
// could answer sold out from every Refresh, and applies the resets
// announced on every Redis node.
func (c *Cache) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { c.refresh(ctx) })
	for _, node := range c.cfg.Redis {
		wg.Go(func() { c.listen(ctx, node) })
	}
	wg.Wait()
}

// refresh re-reads, every Refresh until ctx ends, the stock of the
// remembered products the cache can answer sold out (low). Re-reading the
// others would change no answer: a catalogue of 10,000 products, each with
// plenty left, cost a tenth of the instance's CPU in re-reads.
func (c *Cache) refresh(ctx context.Context) {
	t := time.NewTicker(Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := c.low()
		if len(ids) == 0 {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, Refresh*4)
		var rows []model.Product
		err := c.cfg.DB.WithContext(rctx).Select("id", "stock", "generation").Where("id IN ?", ids).Find(&rows).Error
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.cfg.Log.WarnContext(ctx, "refresh the stock cache", "err", err)
			}
			continue
		}
		for _, p := range rows {
			c.Saw(p.ID, p.Stock, p.Generation)
		}
	}
}

// Message is the announcement of a reset: "product:stock:generation".
func Message(product, stock, gen int64) string {
	return strconv.FormatInt(product, 10) + ":" + strconv.FormatInt(stock, 10) + ":" + strconv.FormatInt(gen, 10)
}

// parseMessage reads Message's form.
func parseMessage(msg string) (product, stock, gen int64, err error) {
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

// Announce tells every instance, through every Redis node, that the
// product's stock was reset to stock in generation gen. A node that does
// not take it is logged: its instances learn of the reset from their
// refresher.
func (c *Cache) Announce(ctx context.Context, product, stock, gen int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	msg := Message(product, stock, gen)
	for i, node := range c.cfg.Redis {
		if err := node.Publish(ctx, c.cfg.Channel, msg).Err(); err != nil {
			c.cfg.Log.WarnContext(ctx, "announce a stock reset", "node", i, "product", product, "err", err)
		}
	}
}

// listen applies the resets announced on node until ctx ends. Each reset
// is heard once per node: the generation makes the copies, and any
// announcement older than what the cache knows, change nothing.
func (c *Cache) listen(ctx context.Context, node redis.UniversalClient) {
	sub := node.Subscribe(ctx, c.cfg.Channel)
	// Closing the subscription is what ends its channel.
	stop := context.AfterFunc(ctx, func() {
		if err := sub.Close(); err != nil {
			c.cfg.Log.Warn("close the stock reset subscription", "err", err)
		}
	})
	defer stop()
	for msg := range sub.Channel() {
		product, stock, gen, err := parseMessage(msg.Payload)
		if err != nil {
			c.cfg.Log.WarnContext(ctx, "a stock reset announcement that does not parse", "err", err)
			continue
		}
		c.Saw(product, stock, gen)
		if h := c.cfg.ResetHeard; h != nil {
			h(product, gen)
		}
	}
}
