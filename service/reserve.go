package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/combine"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/service/salestore"
	"github.com/seckill/seckill/service/stockcache"
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

// sellReserve sells p under reserve: the script takes the units in Redis
// and queues the reservation, which the writers write to the database
// moments later; the answer is the reservation (202). The buyers of a
// product waiting on this instance at once go to Redis together, in one
// call of the script (serveReserve), as a Redlock hold serves its line. A
// product whose counter is not loaded in the generation this instance
// knows (its first reserve purchase since a reset, a reset this instance
// has not heard of, or a Redis that lost it) is moved into Redis first,
// once however many purchases ask at once.
func (s *Seckill) sellReserve(ctx context.Context, _ Strategy, p Purchase) (Receipt, error) {
	if s.reserve == nil {
		return Receipt{}, failure.Errorf(failure.CodeUnavailable, "reserve has no Redis on this instance")
	}
	a, err := s.reserveLines.Do(ctx, p.ProductID, p, s.cfg.LockWait)
	var gaveUp *combine.GaveUp
	switch {
	case errors.Is(err, combine.ErrClosed):
		return Receipt{}, failure.Errorf(failure.CodeUnavailable, "the instance is shutting down")
	case errors.As(err, &gaveUp) && errors.Is(err, combine.ErrWaitOver):
		// Never sent: the calls before it held the line that long.
		return Receipt{}, failure.ErrUnavailable.Because(errors.New("the reserve line waited on a Redis that does not answer"))
	case errors.As(err, &gaveUp):
		return Receipt{}, gaveUp.Cause // the buyer hung up before it was sent
	case err != nil:
		return Receipt{}, err
	case a.err != nil:
		return Receipt{}, a.err
	}
	id, res := p.ProductID, a.res
	switch res.Verdict {
	case reserve.Reserved:
		if res.Unacked {
			return Receipt{}, s.unacked(p)
		}
		return Receipt{Reservation: &Reservation{Purchase: p, Left: res.Left}}, nil
	case reserve.Seen:
		r, err := s.replayReservation(ctx, p, res.Record)
		if err == nil && r.Reservation != nil && res.Unacked {
			return Receipt{}, s.unacked(p) // pending still, on the master alone
		}
		return r, err
	case reserve.SoldOut, reserve.OverLimit:
		switch {
		case res.Unacked:
			// Read from reservations the replicas may not have: a failover
			// could undo them, and the answer would not hold. Nothing was
			// written.
			return Receipt{}, failure.ErrUnavailable.Because(fmt.Errorf("%s: the stock Redis read is not on %d replicas yet", purchaseOp(p), s.cfg.ReserveAcks.Replicas))
		case res.Verdict == reserve.SoldOut:
			return Receipt{}, soldOut(id, res.Left)
		}
		return Receipt{}, failure.Errorf(failure.CodeLimitExceeded, "user %s has %d of product %d, the limit is %d", p.UserID, res.Units, id, s.cfg.PerUserLimit)
	}
	return Receipt{}, failure.ErrUnavailable.Because(fmt.Errorf("%s: the product's stock was reset %d times while it was sold", purchaseOp(p), salestore.MaxAttempts))
}

// unacked is the answer to p whose reservation the master made and too
// few replicas acknowledged in time (Config.ReserveAcks): it stands on the
// master, and is written if the master lives, but a failover to a replica
// that lacks it loses it, so it is no promise (202) and not nothing
// either. A replay of the request ID answers the truth: the reservation
// (once the replicas have it) or its order, or, once lost, a new
// reservation.
func (s *Seckill) unacked(p Purchase) error {
	return salestore.OutcomeUnknown(p, fmt.Errorf("%s: fewer than %d replicas of reserve's Redis acknowledged the reservation within %v",
		purchaseOp(p), s.cfg.ReserveAcks.Replicas, s.cfg.ReserveAcks.Timeout))
}

// reserveBatch is the most purchases of one product sent to Redis in one
// call of the script.
const reserveBatch = 128

// reserveAnswer is the script's answer to one purchase of a batch, or why
// there is none.
type reserveAnswer struct {
	res reserve.Result
	err error
}

// reserveLines are an instance's reserve lines, one per product.
type reserveLines = combine.Combiner[int64, Purchase, reserveAnswer]

// serveReserve is one round of a reserve line's leader: the purchases
// waiting (up to reserveBatch) in one call of the script, loading the
// product's counter first when it is not there in the generation this
// instance knows.
func (s *Seckill) serveReserve(id int64, q *combine.Queue[Purchase, reserveAnswer]) {
	b := q.Take(func(Purchase) int { return reserveBatch })
	ps, _ := b.Requests()
	if len(ps) == 0 {
		return
	}
	items := make([]reserve.Item, len(ps))
	for i, p := range ps {
		items[i] = reserve.Item{User: p.UserID, Quantity: p.Quantity, RequestID: p.RequestID}
	}
	gen := s.cache.Generation(id)
	for range salestore.MaxAttempts {
		if gen == stockcache.UnknownGeneration {
			var err error
			if gen, err = s.generationOf(id); err != nil {
				b.AnswerAll(reserveAnswer{err: err})
				return
			}
		}
		// The call is the batch's, not any one buyer's: a buyer who hangs
		// up does not cut the others off.
		ctx, cancel := s.dbCtx(context.Background(), 0)
		rs, err := s.reserve.ReserveBatch(ctx, id, s.cfg.PerUserLimit, gen, items)
		cancel()
		if err != nil {
			out := make([]reserveAnswer, len(ps))
			for i, p := range ps {
				out[i] = reserveAnswer{err: s.scriptErr(p, err)}
			}
			b.Answer(out)
			return
		}
		if rs[0].Verdict == reserve.NotLoaded {
			gen = stockcache.UnknownGeneration
			continue
		}
		out := make([]reserveAnswer, len(rs))
		for i, r := range rs {
			out[i] = reserveAnswer{res: r}
		}
		if last := rs[len(rs)-1]; !last.Unacked && (last.Verdict == reserve.Reserved || last.Verdict == reserve.SoldOut) {
			if last.Left < MaxQuantity {
				// Low: this instance may answer the next buyers sold out
				// without asking Redis. The reading is of the counter's
				// version: one taken before units came back to it is
				// older than their return (stockcache.Version).
				s.cache.Saw(id, last.Left, stockcache.Version{Gen: gen, Returns: last.Returns})
			}
		}
		b.Answer(out)
		return
	}
	b.AnswerAll(reserveAnswer{err: failure.ErrUnavailable.Because(fmt.Errorf("purchase product %d (reserve): the product's stock was reset %d times while it was sold", id, salestore.MaxAttempts))})
}

// generationOf is the generation a product's reserve purchases are made
// in, on an instance that does not know it: the database's, once its
// counter is loaded for it (loadReserve). While the database cannot
// answer, it is the generation of the counter Redis holds, if any, so that
// every instance sells through an outage, one that has not sold the
// product before included: a counter with stock was loaded under the
// product's row lock, and a reset retires it before it tells the other
// instances, so its generation is the database's. (A reset whose
// retirement did not reach Redis leaves an ended generation's counter
// behind, and the instances that have not heard of the reset sell from it
// until they do; the writers refuse those reservations.)
func (s *Seckill) generationOf(id int64) (int64, error) {
	gen, err := s.loadReserve(context.Background(), id)
	if err == nil || failure.CodeOf(err) != failure.CodeUnavailable {
		return gen, err
	}
	ctx, cancel := s.dbCtx(context.Background(), 0)
	defer cancel()
	c, rerr := s.reserve.CounterOf(ctx, id)
	switch {
	case rerr != nil:
		return 0, errors.Join(err, rerr)
	case !c.Present:
		return 0, err // never moved to Redis, or reset since: only the database can say
	}
	s.log.Warn("reserve: the database did not answer; the product sells from its counter in Redis",
		"product", id, "generation", c.Generation, "counter", c.Stock, "err", err)
	s.cache.Saw(id, c.Stock, stockcache.Version{Gen: c.Generation, Returns: c.Returns})
	return c.Generation, nil
}

// scriptErr is the answer to p when the script's call failed: unavailable
// when it never reached Redis (the dial failed: nothing was sent, nothing
// reserved), else outcome_unknown, since the script may have run and its
// reply been lost; a replay of the request ID answers the truth (the
// script answers a request ID it has seen with its reservation).
func (s *Seckill) scriptErr(p Purchase, err error) error {
	err = fmt.Errorf("%s: %w", purchaseOp(p), err)
	if _, cluster := s.cfg.ReserveRedis.(*redis.ClusterClient); !cluster && neverSent(err) {
		// One node, no retry: the dial that failed was the only try. (A
		// cluster's client retries, and a retry's failed dial says
		// nothing of the try before it.)
		return failure.ErrUnavailable.Because(err)
	}
	return salestore.OutcomeUnknown(p, err)
}

// neverSent says err is a failure to connect: the command was never sent.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// replayReservation answers p, whose request ID made a reservation of the
// product (rec): the same reservation again while it is pending (202), its
// order once written (200), or why the database refused it. A purchase
// that is not the one the reservation was made for answers
// request_id_reused.
func (s *Seckill) replayReservation(ctx context.Context, p Purchase, rec reserve.Record) (Receipt, error) {
	if rec.User != p.UserID || rec.Quantity != p.Quantity {
		return Receipt{}, requestIDReused(p)
	}
	if !rec.Pending() {
		return Receipt{}, refusal(p.RequestID, failure.Code(rec.Code))
	}
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	r, ok, err := s.replay(ctx, s.db, p)
	switch {
	case ok && err == nil:
		return r, nil
	case ok:
		return r, err // the order of another purchase: request_id_reused
	}
	// Not written yet, or the database cannot tell now: the reservation
	// stands either way, pending.
	return Receipt{Reservation: &Reservation{Purchase: p, Left: rec.Left}, Replayed: true}, nil
}

// refusal is the error of a reservation the database refused with code.
func refusal(requestID string, code failure.Code) *failure.Error {
	var why string
	switch code {
	case failure.CodeSoldOut:
		why = "the database had fewer units left than Redis counted"
	case failure.CodeLimitExceeded:
		why = "the database's orders took the buyer past the per-user limit"
	case failure.CodeRequestIDReused:
		why = "the database holds an order of another purchase with this request_id"
	default:
		why = "the database would not write it, and it was moved to the dead letters"
	}
	return failure.Errorf(code, "the reservation of request_id %q was refused: %s; its units went back on sale", requestID, why)
}

// loadReserve moves a product's stock into Redis for the generation the
// database holds, once however many purchases ask together on this
// instance (and once however many instances do: Load keeps a counter of
// that generation), and returns the generation.
func (s *Seckill) loadReserve(ctx context.Context, id int64) (int64, error) {
	v, err, _ := s.moving.Do(strconv.FormatInt(id, 10), func() (any, error) {
		// Not the first caller's context: its buyer may hang up while the
		// others wait.
		ctx, cancel := s.dbCtx(context.WithoutCancel(ctx), 0)
		defer cancel()
		return s.moveToReserve(ctx, id)
	})
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// moveToReserve moves the product into Redis (loadMarked) and returns its
// generation: its counter loaded from the database's stock, each buyer's
// units and the request IDs of its orders (sold under another strategy
// since the reset, or written before Redis lost the counter).
func (s *Seckill) moveToReserve(ctx context.Context, id int64) (int64, error) {
	for range salestore.MaxAttempts {
		gen, marked, err := s.loadMarked(ctx, id)
		if err != nil {
			return 0, failure.Store(fmt.Sprintf("move product %d to reserve", id), err)
		}
		if marked {
			return gen, nil
		}
		// A counter of a newer generation (a reset since): look again.
	}
	return 0, failure.ErrUnavailable.Because(fmt.Errorf("move product %d to reserve: its stock was reset %d times meanwhile", id, salestore.MaxAttempts))
}

// loadMarked moves a product into Redis and returns its generation.
//
// A product not marked (never moved, or reset since) is marked as selling
// under reserve and as loaded in one transaction under its row lock, which
// also reads its stock, its buyers' units and its orders' request IDs; the
// counter is loaded after the COMMIT: a counter never exists for a product
// the other strategies may still sell, nothing of this generation can be
// written before its counter exists, and a load that fails leaves the mark
// saying "loaded", so that the next one, under the lock, counts what may be
// waiting. That load keeps a counter of a newer generation (a reset since):
// marked is then false, and the caller looks again.
//
// A product marked already has its counter loaded under its row lock,
// where the database's word goes (a counter Redis lost, or one of a
// generation the database does not know).
func (s *Seckill) loadMarked(ctx context.Context, id int64) (gen int64, marked bool, err error) {
	var (
		p       model.Product
		first   bool
		units   map[string]int64
		written []reserve.Written
	)
	err = salestore.RetryDeadlocks(ctx, s.saleCfg, func() error {
		return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var err error
			first = false // an attempt that deadlocked decided nothing
			if p, err = salestore.LockProduct(tx, id); err != nil {
				return err
			}
			if units, written, err = ordersOf(tx, id); err != nil {
				return err
			}
			returns, err := salestore.ReturnsOf(tx, id)
			if err != nil {
				return err
			}
			if !p.Reserve {
				first = true
				err := tx.Model(&p).Updates(map[string]any{"reserve": true, "reserve_loaded": true}).Error
				if err != nil {
					return fmt.Errorf("mark product %d as selling under reserve: %w", id, err)
				}
				return nil
			}
			l, err := s.reserve.Load(ctx, id, p.Stock, p.Generation, p.Returns, units, salestore.ReturnIDs(returns), written, !p.ReserveLoaded, true)
			if err != nil {
				return err
			}
			switch {
			case l.Generation != p.Generation:
				return fmt.Errorf("load product %d into Redis: the counter is of generation %d, the database's %d", id, l.Generation, p.Generation)
			case !p.ReserveLoaded:
				if err := tx.Model(&p).Update("reserve_loaded", true).Error; err != nil {
					return fmt.Errorf("mark product %d as loaded into Redis: %w", id, err)
				}
			case l.Loaded && l.Before > p.Generation:
				s.log.WarnContext(ctx, "reserve: Redis held a counter of a generation the database never reached (the database restored or recreated under it?): replaced from the database",
					"product", id, "generation", p.Generation, "redis_generation", l.Before)
			case l.Loaded && l.Before < 0:
				// No counter at all, in a generation loaded before: Redis lost
				// it (restarted without its data, or a failover to a replica
				// that had not received it). What it had not written of the
				// reservations is lost with it.
				s.metrics.ReserveRecovered()
				s.log.WarnContext(ctx, "reserve: the product's counter was gone from Redis; derived again from the database and the reservations still waiting",
					"product", id, "generation", p.Generation, "database_stock", p.Stock,
					"waiting_reservations", l.Waiting, "waiting_units", l.Taken, "counter", l.Stock)
			}
			gen, marked = p.Generation, true
			s.cache.Saw(id, l.Stock, stockcache.Version{Gen: p.Generation, Returns: l.Returns})
			return nil
		})
	})
	if err != nil || !first {
		return gen, marked, err
	}
	l, err := s.reserve.Load(ctx, id, p.Stock, p.Generation, p.Returns, units, nil, written, true, false)
	switch {
	case err != nil:
		return 0, false, err
	case l.Generation != p.Generation:
		return 0, false, nil // a reset since, or a counter the database does not know: look again, under the lock
	}
	s.cache.Saw(id, l.Stock, stockcache.Version{Gen: p.Generation, Returns: l.Returns})
	return p.Generation, true, nil
}

// ordersOf reads what the product's orders give its counter: each buyer's
// units (those of orders unpaid or paid: a returned order holds none) and
// the records of their request IDs.
func ordersOf(tx *gorm.DB, id int64) (map[string]int64, []reserve.Written, error) {
	var orders []model.Order
	if err := tx.Select("user_id", "quantity", "request_id", "remaining_stock", "status").
		Where("product_id = ?", id).Find(&orders).Error; err != nil {
		return nil, nil, fmt.Errorf("read the orders of product %d: %w", id, err)
	}
	units := map[string]int64{}
	var written []reserve.Written
	for _, o := range orders {
		if model.HoldsUnits(o.Status) {
			units[string(o.UserID)] += o.Quantity
		}
		if o.RequestID != nil {
			written = append(written, reserve.Written{RequestID: string(*o.RequestID),
				Record: reserve.Record{Quantity: o.Quantity, Left: o.RemainingStock, User: string(o.UserID)}})
		}
	}
	return units, written, nil
}

// reserveStrategy is the name of the reserve strategy, which its orders
// carry.
const reserveStrategy = "reserve"
