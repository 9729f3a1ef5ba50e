package service

import (
	"context"
	"errors"
	"time"

	"github.com/seckill/seckill/service/reserve"
)

// The reserve strategy's writer. Every instance set up for reserve runs
// one; together they are one consumer group on the streams of
// reservations: each reservation is read by one writer, written to the
// database (writeReservations: many of one product in one transaction,
// idempotently by request ID), and acknowledged after the COMMIT, or after
// its refusal is recorded. What a writer read and did not acknowledge (it
// died, or its database call failed) another claims once it has been idle
// for writerClaimIdle.

const (
	// writerBatch is the most reservations a writer reads at once.
	writerBatch = 512
	// writerBlock is how long a read waits for reservations when there
	// are none.
	writerBlock = 100 * time.Millisecond
	// writerClaimIdle is how long a reservation stays with a writer that
	// has not acknowledged it before another takes it over.
	writerClaimIdle = 5 * time.Second
	// writerClaimEvery is how often a writer looks for such reservations.
	writerClaimEvery = time.Second
)

// runWriter is this instance's writer, until ctx ends.
func (s *Seckill) runWriter(ctx context.Context) {
	s.joinWriters(ctx)
	lastClaim := time.Now()
	for ctx.Err() == nil {
		var es []reserve.Entry
		var err error
		if time.Since(lastClaim) >= writerClaimEvery {
			lastClaim = time.Now()
			es, err = s.reserve.Claim(ctx, s.cfg.Consumer, writerClaimIdle, writerBatch)
		}
		if err == nil && len(es) == 0 {
			es, err = s.reserve.Read(ctx, s.cfg.Consumer, writerBatch, writerBlock)
		}
		if err == nil && len(es) > 0 {
			err = s.write(ctx, es)
		}
		switch {
		case err == nil || ctx.Err() != nil:
		case reserve.NoGroup(err):
			// The Redis lost the group (restarted without its data): join
			// again, or nothing is ever read.
			s.log.WarnContext(ctx, "the reserve writers' group is gone: joining again", "err", err)
			s.joinWriters(ctx)
		default:
			// What was read stays pending: this writer claims it again, or
			// another does.
			s.log.WarnContext(ctx, "write reservations", "err", err)
			sleep(ctx, writerBlock)
		}
	}
}

// joinWriters joins the writers' group, trying again every second until
// it has or ctx ends.
func (s *Seckill) joinWriters(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.reserve.Join(ctx)
		if err == nil {
			return
		}
		s.log.WarnContext(ctx, "join the reserve writers", "err", err)
		sleep(ctx, time.Second)
	}
}

// write writes the entries read, a transaction per product and
// generation, and acknowledges each once the database holds it, refused it
// (recorded first) or a reset discarded it. An error leaves the entries of
// the products not yet written pending.
func (s *Seckill) write(ctx context.Context, es []reserve.Entry) error {
	type key struct{ product, gen int64 }
	var order []key
	groups := map[key][]reserve.Entry{}
	var bad []reserve.Entry
	for _, e := range es {
		if e.Bad != nil {
			s.log.ErrorContext(ctx, "a reserve stream entry that is not a reservation: acknowledged, never written",
				"stream", e.Stream, "id", e.ID, "err", e.Bad)
			bad = append(bad, e)
			continue
		}
		k := key{e.Product, e.Generation}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	if len(bad) > 0 {
		if err := s.reserve.Ack(ctx, bad); err != nil {
			return err
		}
	}
	for _, k := range order {
		group := groups[k]
		rs := make([]Reservation, len(group))
		for i, e := range group {
			rs[i] = Reservation{Purchase: Purchase{ProductID: e.Product, UserID: e.User, Quantity: e.Quantity, RequestID: e.RequestID}, Left: e.Left}
		}
		as, err := s.writeReservations(ctx, k.gen, rs)
		var gone *generationGone
		switch {
		case errors.As(err, &gone):
			// Discarded with their generation's orders.
		case err != nil:
			return err
		default:
			for i, a := range as {
				switch code := ErrorCode(a.err); {
				case a.err == nil:
				case refused(code):
					if err := s.reserve.Fail(ctx, group[i], string(code)); err != nil {
						return err
					}
				default:
					return a.err // not known to be refused: leave it pending
				}
			}
		}
		if err := s.reserve.Ack(ctx, group); err != nil {
			return err
		}
	}
	return nil
}

// refused says code is the sale rule's refusal of a reservation, which
// wrote nothing and never will: the only answers a reservation is
// recorded as failed for. Any other (unavailable, outcome_unknown) leaves
// it pending, to be written again: it may have been written.
func refused(code Code) bool {
	return code == CodeSoldOut || code == CodeLimitExceeded || code == CodeRequestIDReused
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
