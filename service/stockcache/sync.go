package stockcache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/every"
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
	every.Run(ctx, Refresh, c.reread)
}

// reread reads the stock of the remembered products the cache can answer
// sold out again.
func (c *Cache) reread(ctx context.Context) {
	ids := c.low()
	if len(ids) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, Refresh*4)
	defer cancel()
	var rows []model.Product
	err := c.cfg.DB.WithContext(rctx).Select("id", "stock", "generation", "returns").Where("id IN ?", ids).Find(&rows).Error
	if err != nil {
		if ctx.Err() == nil {
			c.cfg.Log.WarnContext(ctx, "refresh the stock cache", "err", err)
		}
		return
	}
	for _, p := range rows {
		c.Saw(p.ID, p.Stock, Of(p))
	}
}

// Message is the announcement of a reset or a return of units:
// "product:stock:generation:returns".
func Message(product, stock int64, v Version) string {
	return message(product, strconv.FormatInt(stock, 10), v)
}

// unknownStock is the stock of an announcement that says only that a
// version begins (Reopen): more than any purchase asks for.
const unknownStock = "-"

func message(product int64, stock string, v Version) string {
	return strconv.FormatInt(product, 10) + ":" + stock + ":" +
		strconv.FormatInt(v.Gen, 10) + ":" + strconv.FormatInt(v.Returns, 10)
}

// parseMessage reads Message's form, with an acknowledgement's token after
// it (":token", see AnnounceHeard) or not, and the one before returns were
// (product:stock:generation, from an instance of an earlier release
// during a rolling upgrade).
func parseMessage(msg string) (product, stock int64, v Version, ack string, err error) {
	parts := strings.Split(msg, ":")
	if len(parts) == 5 && parts[4] != "" {
		ack, parts = parts[4], parts[:4]
	}
	if len(parts) != 3 && len(parts) != 4 {
		return 0, 0, v, "", fmt.Errorf("%q is not product:stock:generation:returns", msg)
	}
	var nums [4]int64
	if parts[1] == unknownStock {
		nums[1], parts[1] = math.MaxInt64, "0"
	}
	for i, part := range parts {
		if i == 1 && nums[1] == math.MaxInt64 {
			continue
		}
		if nums[i], err = strconv.ParseInt(part, 10, 64); err != nil {
			return 0, 0, v, "", fmt.Errorf("%q is not product:stock:generation:returns: %w", msg, err)
		}
	}
	return nums[0], nums[1], Version{Gen: nums[2], Returns: nums[3]}, ack, nil
}

// ackKey is the list a listener pushes to once it has applied an
// announcement that asked for its acknowledgement (token).
func (c *Cache) ackKey(token string) string { return c.cfg.Channel + ":ack:" + token }

// ackTTL bounds the life of an acknowledgement list nobody waits on.
const ackTTL = 10 * time.Second

// Reopen says that version v of the product's stock begins, its stock
// not known yet: the cache answers no purchase of it sold out until a
// reading of v (or a newer version) says what is left, and what it learns
// of an older version changes nothing. A cancel that finds its order
// cancelled by another call announces it (ReopenHeard).
func (c *Cache) Reopen(product int64, v Version) {
	c.observe(product, math.MaxInt64, v)
}

// ReopenHeard tells every instance, through every Redis node, that version
// v of the product's stock begins (Reopen), and waits, at most wait, until
// every instance it reached has applied it (publishHeard). It says whether
// all of them did: an instance that did not (its subscription down, or
// slow) falls back on its refresher, within Refresh.
func (c *Cache) ReopenHeard(ctx context.Context, product int64, v Version, wait time.Duration) bool {
	c.Reopen(product, v)
	token, err := newToken()
	if err != nil {
		c.cfg.Log.WarnContext(ctx, "announce a product's stock", "product", product, "err", err)
		return false
	}
	return c.publishHeard(ctx, product, message(product, unknownStock, v)+":"+token, token, wait)
}

// HoldHeard holds the product's sold-out answers on every instance
// (Hold) for at most hold, through every Redis node, and waits, at most
// wait, until every instance it reached has applied it (publishHeard). It
// returns the hold's token, for Returned or Unhold, and whether every
// instance heard. A return of units holds them before its units can be
// bought, so that no instance answers sold_out from what it saw before
// them, and without the product's row lock, which no sale then waits on.
func (c *Cache) HoldHeard(ctx context.Context, product int64, hold, wait time.Duration) (token string, heard bool) {
	token, err := newToken()
	if err != nil {
		c.cfg.Log.WarnContext(ctx, "hold a product's sold-out answers", "product", product, "err", err)
		return "", false
	}
	c.Hold(product, token, hold)
	msg := holdPrefix + strconv.FormatInt(product, 10) + ":" + strconv.FormatInt(hold.Milliseconds(), 10) + ":" + token
	return token, c.publishHeard(ctx, product, msg, token, wait)
}

// Returned tells every instance, through every Redis node, that the
// product's stock is stock in version v after a return of units, and ends
// its hold token (HoldHeard): on each node the stock comes first, so an
// instance that ends the hold knows the new version.
func (c *Cache) Returned(ctx context.Context, product, stock int64, v Version, token string) {
	c.Saw(product, stock, v)
	c.Unhold(ctx, product, token, Message(product, stock, v))
}

// Unhold ends the product's hold token on every instance, after msgs, for
// a return that gave nothing back or failed.
func (c *Cache) Unhold(ctx context.Context, product int64, token string, msgs ...string) {
	c.release(product, token)
	msgs = append(msgs, releasePrefix+strconv.FormatInt(product, 10)+":"+token)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	for i, node := range c.cfg.Redis {
		_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, msg := range msgs {
				p.Publish(ctx, c.cfg.Channel, msg)
			}
			return nil
		})
		if err != nil {
			// Its instances' holds run out by themselves.
			c.cfg.Log.WarnContext(ctx, "announce a product's stock", "node", i, "product", product, "err", err)
		}
	}
}

// newToken is an announcement's own token, for its acknowledgements.
func newToken() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("draw an announcement's token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// publishHeard publishes msg, which asks for acknowledgements under
// token, on every node, and waits, at most wait, until every instance the
// announcement reached on some node has applied it: each listener pushes
// to a list of the announcement's own once it has, and the announcer pops
// as many as PUBLISH said it reached, node by node. It says whether all of
// them did.
func (c *Cache) publishHeard(ctx context.Context, product int64, msg, token string, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	heard := true
	for i, node := range c.cfg.Redis {
		reached, err := node.Publish(ctx, c.cfg.Channel, msg).Result()
		if err != nil {
			c.cfg.Log.WarnContext(ctx, "announce a product's stock", "node", i, "product", product, "err", err)
			heard = false
			continue
		}
		for ; reached > 0; reached-- {
			left := time.Until(deadlineOf(ctx))
			if left <= 0 {
				heard = false
				break
			}
			// BLPOP's timeout is whole milliseconds at least.
			if err := node.BLPop(ctx, max(left, time.Millisecond), c.ackKey(token)).Err(); err != nil {
				if ctx.Err() == nil && !errors.Is(err, redis.Nil) {
					c.cfg.Log.WarnContext(ctx, "wait for the instances to hear of a product's stock", "node", i, "product", product, "err", err)
				}
				heard = false
				break
			}
		}
	}
	return heard
}

// deadlineOf is ctx's deadline (it has one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// Announce tells every instance, through every Redis node, that the
// product's stock is stock in version v: a reset, or units returned. A
// node that does not take it is logged: its instances learn of it from
// their refresher.
func (c *Cache) Announce(ctx context.Context, product, stock int64, v Version) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	msg := Message(product, stock, v)
	for i, node := range c.cfg.Redis {
		if err := node.Publish(ctx, c.cfg.Channel, msg).Err(); err != nil {
			c.cfg.Log.WarnContext(ctx, "announce a product's stock", "node", i, "product", product, "err", err)
		}
	}
}

// acknowledge tells the announcer of token, on node, that this instance
// applied its announcement.
func (c *Cache) acknowledge(ctx context.Context, node redis.UniversalClient, token string) {
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	key := c.ackKey(token)
	_, err := node.Pipelined(actx, func(p redis.Pipeliner) error {
		p.RPush(actx, key, 1)
		p.Expire(actx, key, ackTTL)
		return nil
	})
	if err != nil && ctx.Err() == nil {
		c.cfg.Log.WarnContext(ctx, "acknowledge a stock announcement", "err", err)
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
		c.apply(ctx, node, msg.Payload)
	}
}

// apply applies one announcement heard on node, and acknowledges it when
// it asks.
func (c *Cache) apply(ctx context.Context, node redis.UniversalClient, payload string) {
	if h, ok, err := parseHold(payload); ok {
		switch {
		case err != nil:
			c.cfg.Log.WarnContext(ctx, "a stock announcement that does not parse", "err", err)
		case h.hold > 0:
			c.Hold(h.product, h.token, h.hold)
			c.acknowledge(ctx, node, h.token)
		default:
			c.release(h.product, h.token)
		}
		return
	}
	product, stock, v, ack, err := parseMessage(payload)
	if err != nil {
		c.cfg.Log.WarnContext(ctx, "a stock announcement that does not parse", "err", err)
		return
	}
	if stock == math.MaxInt64 {
		c.Reopen(product, v)
	} else {
		c.Saw(product, stock, v)
	}
	if ack != "" {
		c.acknowledge(ctx, node, ack)
	}
	if h := c.cfg.ResetHeard; h != nil {
		h(product, v.Gen)
	}
}
