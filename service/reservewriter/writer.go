// Package reservewriter is the reserve strategy's writers, the database's
// side of reserve. Every instance set up for reserve runs one; together
// they are one consumer group on the streams of reservations: each
// reservation is read by one writer, written to the database (those of many
// products in one transaction, Config.WriteMany, idempotently by request
// ID), and acknowledged after the COMMIT, or after its refusal is
// recorded. What a
// writer read and did not acknowledge (it died, or its database call
// failed) another claims once it has been idle for writerClaimIdle. Every
// so often a writer holds the counters of the products it wrote against
// the database (reconcile).
package reservewriter

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/metrics"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/service/salestore"
)

// Config is what a writer reads, writes and tells.
type Config struct {
	// DB holds the orders; every call is bounded by DBTimeout.
	DB        *gorm.DB
	DBTimeout time.Duration
	// Reserve is the reserve strategy's Redis side: its streams, records
	// and counters.
	Reserve *reserve.Store
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// Consumer names this writer in the group.
	Consumer string
	// Write writes reservations of one product, taken in generation gen,
	// in line order, in one transaction of the sale store, and answers
	// each with its order or the reason the database refused it; a
	// *salestore.GenerationGone says a reset discarded them all.
	Write func(ctx context.Context, gen int64, rs []salestore.Reservation) ([]salestore.Answer, error)
	// WriteMany writes batches of different products as Write writes one,
	// all in one transaction of the sale store: written[i] is bs[i]'s
	// answers, or its own refusal (a *salestore.GenerationGone); an error
	// is the whole transaction's.
	WriteMany func(ctx context.Context, bs []Batch) (written []Written, err error)
}

// Batch is reservations of one product, taken in generation Gen, in line
// order.
type Batch struct {
	Gen          int64
	Reservations []salestore.Reservation
}

// Written is what became of a Batch: an answer per reservation, or the
// batch's own refusal.
type Written struct {
	Answers []salestore.Answer
	Err     error
}

// Writer writes the reservations of reserve to the database.
type Writer struct {
	cfg Config
}

// New returns a writer over cfg; Run runs it.
func New(cfg Config) *Writer {
	return &Writer{cfg: cfg}
}

const (
	// writerBatch is the most reservations a writer reads at once.
	writerBatch = 2048
	// writerBlock is how long a read waits for reservations when there
	// are none.
	writerBlock = 100 * time.Millisecond
	// writerClaimIdle is how long a reservation stays with a writer that
	// has not acknowledged it before another takes it over.
	writerClaimIdle = 5 * time.Second
	// writerClaimEvery is how often a writer looks for such reservations,
	// and drops what is written from the streams.
	writerClaimEvery = time.Second
	// writerPause is how long a writer waits after an error before it
	// reads again.
	writerPause = time.Second
	// reconcileEvery is how often a writer holds the counters of the
	// products it wrote against the database (reconcile).
	reconcileEvery = 10 * time.Second
	// writerParallel is the most transactions a writer runs at once, each
	// of many products (WriteMany); a pool of fewer than twice as many
	// connections runs half as many as it has.
	writerParallel = 8
	// writerProducts is the most products of one transaction.
	writerProducts = 128
	// writerMaxFailures is how many times a writer tries to write an entry
	// that the database answers with an error (not an outage) before it
	// moves it to the dead letters.
	writerMaxFailures = 3
)

// Run is this instance's writer, until ctx ends.
func (s *Writer) Run(ctx context.Context) {
	s.joinWriters(ctx)
	w := &writer{failures: map[string]int{}, touched: map[int64]bool{}}
	lastClaim, lastCheck := time.Now(), time.Now()
	for ctx.Err() == nil {
		var es []reserve.Entry
		var err error
		if time.Since(lastCheck) >= reconcileEvery {
			lastCheck = time.Now()
			s.reconcileWritten(ctx, w.written(reconcileBatch))
		}
		if time.Since(lastClaim) >= writerClaimEvery {
			lastClaim = time.Now()
			s.tidy(ctx)
			es, err = s.cfg.Reserve.Claim(ctx, s.cfg.Consumer, writerClaimIdle, writerBatch)
		}
		if err == nil && len(es) == 0 {
			es, err = s.cfg.Reserve.Read(ctx, s.cfg.Consumer, writerBatch, writerBlock)
		}
		if err == nil && len(es) > 0 {
			err = s.write(ctx, w, es)
		}
		switch {
		case err == nil || ctx.Err() != nil:
		case reserve.NoGroup(err):
			// The Redis lost the group (restarted without its data): join
			// again, or nothing is ever read.
			s.cfg.Log.WarnContext(ctx, "the reserve writers' group is gone (Redis lost its data?): joining again", "err", err)
			s.joinWriters(ctx)
		default:
			// What was read stays pending: this writer claims it again, or
			// another does.
			s.cfg.Log.WarnContext(ctx, "write reservations", "err", err)
			sleep(ctx, writerPause)
		}
	}
}

// writer is what a writer remembers between its reads: how many times
// the database refused to write each entry with an error other than an
// outage's, and the products it wrote since it last reconciled them.
type writer struct {
	mu       sync.Mutex // the products' transactions run side by side
	failures map[string]int
	touched  map[int64]bool
}

// failed counts a failure of entry id and returns how many it has had.
func (w *writer) failed(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failures[id]++
	return w.failures[id]
}

// forget forgets the failures of entry id.
func (w *writer) forget(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.failures, id)
}

// wrote notes that the writer wrote reservations of product id.
func (w *writer) wrote(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.touched[id] = true
}

// written returns up to n of the products written since they were last
// returned, and forgets those.
func (w *writer) written(n int) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int64
	for id := range w.touched {
		if len(out) == n {
			break
		}
		out = append(out, id)
		delete(w.touched, id)
	}
	return out
}

// tidy drops what the writers have written from the streams and counts
// what they have not (seckill_reserve_pending).
func (s *Writer) tidy(ctx context.Context) {
	n, err := s.cfg.Reserve.Tidy(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.WarnContext(ctx, "tidy the reserve streams", "err", err)
		}
		return
	}
	s.cfg.Metrics.ReservePending(n)
}

// joinWriters joins the writers' group, trying again every second until
// it has or ctx ends.
func (s *Writer) joinWriters(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.cfg.Reserve.Join(ctx)
		if err == nil {
			return
		}
		s.cfg.Log.WarnContext(ctx, "join the reserve writers", "err", err)
		sleep(ctx, time.Second)
	}
}

// writeGroup writes reservations of one product and generation in one
// transaction, then records the refused ones and acknowledges them all. A
// transaction the database answers with an error other than an outage's
// is tried again one reservation at a time, so that one that cannot be
// written holds none of the others back; one that fails writerMaxFailures
// times goes to the dead letters, recorded as failed.
func (s *Writer) writeGroup(ctx context.Context, w *writer, gen int64, group []reserve.Entry) error {
	as, err := s.cfg.Write(ctx, gen, reservations(group))
	var gone *salestore.GenerationGone
	switch {
	case errors.As(err, &gone):
		// Discarded with their generation's orders.
		return s.cfg.Reserve.Ack(ctx, group)
	case err != nil && len(group) > 1 && !salestore.Outage(err):
		for _, e := range group {
			if err := s.writeGroup(ctx, w, gen, []reserve.Entry{e}); err != nil {
				return err
			}
		}
		return nil
	case err != nil && !salestore.Outage(err):
		e := group[0]
		if w.failed(e.ID) < writerMaxFailures {
			return err
		}
		w.forget(e.ID)
		s.cfg.Log.ErrorContext(ctx, "a reservation the database would not write: moved to the dead letters, recorded as failed",
			"request_id", e.RequestID, "product", e.Product, "attempts", writerMaxFailures, "err", err)
		if err := s.cfg.Reserve.Dead(ctx, e, string(failure.CodeUnavailable), err.Error()); err != nil {
			return err
		}
		s.cfg.Metrics.ReserveDead()
		return nil
	case err != nil:
		return err
	}
	return s.settle(ctx, w, group, as)
}

// settle records the refused reservations of a group written (answers
// as), and acknowledges them all.
func (s *Writer) settle(ctx context.Context, w *writer, group []reserve.Entry, as []salestore.Answer) error {
	var done settled
	if err := s.record(ctx, w, group, as, &done); err != nil {
		return err
	}
	return s.ack(ctx, w, &done)
}

// settled is the reservations that their writes settled, to acknowledge
// at once: written (their orders committed), refused (recorded), or
// discarded by a reset.
type settled struct {
	entries  []reserve.Entry
	written  []bool
	products []int64 // those written to
}

// discard adds reservations a reset discarded.
func (d *settled) discard(group []reserve.Entry) {
	d.entries = append(d.entries, group...)
	d.written = append(d.written, make([]bool, len(group))...)
}

// record records the refused reservations of a group written (answers as)
// and adds the group to done, to acknowledge. An answer that is neither an
// order nor a refusal leaves the group out, pending.
func (s *Writer) record(ctx context.Context, w *writer, group []reserve.Entry, as []salestore.Answer, done *settled) error {
	for i, a := range as {
		switch code := failure.CodeOf(a.Err); {
		case a.Err == nil:
		case refused(code):
			if err := s.cfg.Reserve.Fail(ctx, group[i], string(code)); err != nil {
				return err
			}
			s.cfg.Metrics.ReserveFailed(code)
			s.cfg.Log.WarnContext(ctx, "a reservation the database refused: recorded as failed",
				"request_id", group[i].RequestID, "product", group[i].Product, "code", code)
		default:
			return a.Err // not known to be refused: leave it pending
		}
	}
	for i, e := range group {
		done.entries = append(done.entries, e)
		done.written = append(done.written, as[i].Err == nil)
		if as[i].Err == nil {
			w.forget(e.ID)
		}
	}
	done.products = append(done.products, group[0].Product)
	return nil
}

// ack acknowledges what done holds, in one call, and counts what was
// written and how long after its reservation.
func (s *Writer) ack(ctx context.Context, w *writer, done *settled) error {
	if len(done.entries) == 0 {
		return nil
	}
	if err := s.cfg.Reserve.Ack(ctx, done.entries); err != nil {
		return err
	}
	now, written := time.Now(), 0
	for i, e := range done.entries {
		if !done.written[i] {
			continue
		}
		written++
		if t, ok := e.Made(); ok {
			s.cfg.Metrics.ReserveLag(now.Sub(t))
		}
	}
	s.cfg.Metrics.ReserveWritten(written)
	for _, id := range done.products {
		w.wrote(id)
	}
	return nil
}

// refused says code is the sale rule's refusal of a reservation, which
// wrote nothing and never will: the only answers a reservation is
// recorded as failed for. Any other (unavailable, outcome_unknown) leaves
// it pending, to be written again: it may have been written.
func refused(code failure.Code) bool {
	return code == failure.CodeSoldOut || code == failure.CodeLimitExceeded || code == failure.CodeRequestIDReused
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
