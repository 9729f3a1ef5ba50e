package reservewriter

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/reserve"
	"github.com/seckill/seckill/service/salestore"
)

// What a writer does with the reservations it read: grouped by product
// and generation, written many products to a transaction (Config.WriteMany),
// a few transactions side by side.

// write writes the entries read, grouped by product and generation, many
// groups to a transaction (chunks), and acknowledges each once the
// database holds it, refused it (recorded first) or a reset discarded it.
// An error leaves the entries of the groups not yet written pending.
func (s *Writer) write(ctx context.Context, w *writer, es []reserve.Entry) error {
	var order []key
	groups := map[key][]reserve.Entry{}
	for _, e := range es {
		if e.Bad != nil {
			s.cfg.Log.ErrorContext(ctx, "a reserve stream entry that is not a reservation: moved to the dead letters",
				"stream", e.Stream, "id", e.ID, "err", e.Bad)
			if err := s.cfg.Reserve.Dead(ctx, e, string(failure.CodeUnavailable), e.Bad.Error()); err != nil {
				return err
			}
			s.cfg.Metrics.ReserveDead()
			continue
		}
		k := key{e.Product, e.Generation}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	// The transactions run side by side, each of many products (a
	// catalogue's reservations are spread over many, most of them cold),
	// their rows locked in ascending order.
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, s.parallel())
		mu   sync.Mutex
		errs []error
	)
	for _, chunk := range chunks(order, groups, s.parallel()) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var err error
			if len(chunk) == 1 {
				err = s.writeGroup(ctx, w, chunk[0].gen, groups[chunk[0]])
			} else {
				err = s.writeMany(ctx, w, chunk, groups)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// key names the reservations of one product taken in one generation.
type key struct{ product, gen int64 }

// chunks splits the groups read into the transactions that write them:
// enough of them to run parallel at once, up to writerProducts products
// each. A product's second generation (a reset between its reservations)
// and a request ID's second product go alone: one transaction takes a
// product's row once, and writes a request ID once.
func chunks(order []key, groups map[key][]reserve.Entry, parallel int) [][]key {
	var many, alone []key
	products, ids := map[int64]bool{}, map[string]bool{}
	for _, k := range order {
		clash := products[k.product]
		for _, e := range groups[k] {
			clash = clash || ids[e.RequestID]
		}
		if clash {
			alone = append(alone, k)
			continue
		}
		products[k.product] = true
		for _, e := range groups[k] {
			ids[e.RequestID] = true
		}
		many = append(many, k)
	}
	size := min(writerProducts, max(1, (len(many)+parallel-1)/parallel))
	var out [][]key
	for c := range slices.Chunk(many, size) {
		out = append(out, c)
	}
	for _, k := range alone {
		out = append(out, []key{k})
	}
	return out
}

// parallel is how many transactions the writer runs at once: writerParallel,
// or half the pool's connections when it has fewer than twice as many.
func (s *Writer) parallel() int {
	if db, err := s.cfg.DB.DB(); err == nil {
		if n := db.Stats().MaxOpenConnections; n > 0 {
			return max(1, min(writerParallel, n/2))
		}
	}
	return writerParallel
}

// writeMany writes the reservations of many products, those of chunk, in
// one transaction (Config.WriteMany), then records the refused ones and
// acknowledges them all. A transaction the database answers with an error
// other than an outage's is written again a product at a time
// (writeGroup), so that what cannot be written holds none of the others
// back.
func (s *Writer) writeMany(ctx context.Context, w *writer, chunk []key, groups map[key][]reserve.Entry) error {
	bs := make([]Batch, len(chunk))
	for i, k := range chunk {
		bs[i] = Batch{Gen: k.gen, Reservations: reservations(groups[k])}
	}
	ws, err := s.cfg.WriteMany(ctx, bs)
	switch {
	case err != nil && !salestore.Outage(err):
		var errs []error
		for _, k := range chunk {
			errs = append(errs, s.writeGroup(ctx, w, k.gen, groups[k]))
		}
		return errors.Join(errs...)
	case err != nil:
		return err
	}
	var (
		errs []error
		done settled
	)
	for i, k := range chunk {
		var gone *salestore.GenerationGone
		switch {
		case errors.As(ws[i].Err, &gone):
			done.discard(groups[k]) // with their generation's orders
		case ws[i].Err != nil && !salestore.Outage(ws[i].Err):
			// Refused for a row (a store that writes each product alone):
			// alone, its bad entry goes to the dead letters in time, and
			// holds none of the others back.
			errs = append(errs, s.writeGroup(ctx, w, k.gen, groups[k]))
		case ws[i].Err != nil:
			errs = append(errs, ws[i].Err) // left pending
		default:
			errs = append(errs, s.record(ctx, w, groups[k], ws[i].Answers, &done))
		}
	}
	return errors.Join(append(errs, s.ack(ctx, w, &done))...)
}

// reservations are the reservations of entries es.
func reservations(es []reserve.Entry) []salestore.Reservation {
	rs := make([]salestore.Reservation, len(es))
	for i, e := range es {
		rs[i] = salestore.Reservation{Purchase: salestore.Purchase{ProductID: e.Product, UserID: e.User, Quantity: e.Quantity, RequestID: e.RequestID}, Left: e.Left}
	}
	return rs
}
