package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
)

// seckill is the recipe's script: one buyer, one unit, if any is left and
// the buyer has none yet; the order goes to the stream.
var seckill = redis.NewScript(`
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then return 1 end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 2 end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], '*', 'userId', ARGV[1], 'voucherId', ARGV[2], 'id', ARGV[3])
return 0`)

// group and consumer read the stream of orders.
const (
	group    = "g1"
	consumer = "c1"
)

// keys names the recipe's Redis keys under a prefix.
type keys struct{ prefix string }

func (k keys) stock(id int64) string  { return fmt.Sprintf("%sstock:%d", k.prefix, id) }
func (k keys) buyers(id int64) string { return fmt.Sprintf("%sorder:%d", k.prefix, id) }
func (k keys) stream() string         { return k.prefix + "stream.orders" }

// shop is the recipe: Redis sells, MySQL learns of it from the stream.
type shop struct {
	rdb  *redis.Client
	db   *sql.DB
	log  *slog.Logger
	keys keys
	next atomic.Int64 // the next order ID
}

// productID reads the route's product ID, or answers 400.
func productID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		c.JSON(http.StatusBadRequest, gin.H{"error": "bad product id"})
		return 0, false
	}
	return id, true
}

func (s *shop) handleSeckill(c *gin.Context) {
	id, ok := productID(c)
	if !ok {
		return
	}
	var body struct {
		UserID string `json:"user_id"`
	}
	if err := c.ShouldBindJSON(&body); err != nil || body.UserID == "" {
		c.JSON(http.StatusBadRequest, gin.H{"error": "bad body"})
		return
	}
	oid := s.next.Add(1)
	n, err := seckill.Run(c, s.rdb, []string{s.keys.stock(id), s.keys.buyers(id), s.keys.stream()}, body.UserID, id, oid).Int()
	switch {
	case err != nil:
		c.JSON(http.StatusServiceUnavailable, gin.H{"error": err.Error()})
	case n == 1:
		c.JSON(http.StatusConflict, gin.H{"error": "sold out"})
	case n == 2:
		c.JSON(http.StatusConflict, gin.H{"error": "already bought"})
	default:
		c.JSON(http.StatusOK, gin.H{"order_id": oid})
	}
}

func (s *shop) handleStock(c *gin.Context) {
	id, ok := productID(c)
	if !ok {
		return
	}
	var body struct {
		Stock int64 `json:"stock"`
	}
	if err := c.ShouldBindJSON(&body); err != nil || body.Stock < 0 {
		c.JSON(http.StatusBadRequest, gin.H{"error": "bad body"})
		return
	}
	ctx := c.Request.Context()
	_, err := s.db.ExecContext(ctx, `REPLACE INTO voucher (id, stock) VALUES (?, ?)`, id, body.Stock)
	if err == nil {
		_, err = s.db.ExecContext(ctx, `DELETE FROM voucher_order WHERE voucher_id = ?`, id)
	}
	if err == nil {
		err = s.rdb.Set(ctx, s.keys.stock(id), body.Stock, 0).Err()
	}
	if err == nil {
		err = s.rdb.Del(ctx, s.keys.buyers(id)).Err()
	}
	if err != nil {
		c.JSON(http.StatusServiceUnavailable, gin.H{"error": err.Error()})
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "stock": body.Stock})
}

func (s *shop) handleWritten(c *gin.Context) {
	id, ok := productID(c)
	if !ok {
		return
	}
	var orders, stock int64
	ctx := c.Request.Context()
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM voucher_order WHERE voucher_id = ?`, id).Scan(&orders)
	if err == nil {
		err = s.db.QueryRowContext(ctx, `SELECT stock FROM voucher WHERE id = ?`, id).Scan(&stock)
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		c.JSON(http.StatusServiceUnavailable, gin.H{"error": err.Error()})
		return
	}
	c.JSON(http.StatusOK, gin.H{"orders": orders, "stock": stock})
}

// consume is the repositories' order handler: read up to ten orders, write
// each in a transaction of its own, acknowledge it. An order that fails is
// left pending, as theirs are.
func (s *shop) consume(ctx context.Context) {
	for ctx.Err() == nil {
		res, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer,
			Streams: []string{s.keys.stream(), ">"}, Count: 10, Block: 2 * time.Second}).Result()
		if err != nil {
			if !errors.Is(err, redis.Nil) && ctx.Err() == nil {
				s.log.Warn("read the stream", "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for _, m := range res[0].Messages {
			if err := s.write(ctx, m.Values); err != nil {
				s.log.Warn("write an order", "id", m.ID, "err", err)
				continue
			}
			if err := s.rdb.XAck(ctx, s.keys.stream(), group, m.ID).Err(); err != nil {
				s.log.Warn("acknowledge an order", "id", m.ID, "err", err)
			}
		}
	}
}

// write writes one order and takes its unit from the product's row.
func (s *shop) write(ctx context.Context, v map[string]any) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	r, err := tx.ExecContext(ctx, `UPDATE voucher SET stock = stock - 1 WHERE id = ? AND stock > 0`, v["voucherId"])
	if err == nil {
		var n int64
		if n, err = r.RowsAffected(); err == nil && n != 1 {
			err = errors.New("no stock left in MySQL")
		}
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO voucher_order (id, user_id, voucher_id) VALUES (?, ?, ?)`, v["id"], v["userId"], v["voucherId"])
	}
	if err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// clear deletes the recipe's keys from Redis when it stops.
func (s *shop) clear(ctx context.Context) error {
	var cursor uint64
	for {
		ks, next, err := s.rdb.Scan(ctx, cursor, s.keys.prefix+"*", 1000).Result()
		if err != nil {
			return fmt.Errorf("clear the keys: %w", err)
		}
		if len(ks) > 0 {
			if err := s.rdb.Del(ctx, ks...).Err(); err != nil {
				return fmt.Errorf("clear the keys: %w", err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}
