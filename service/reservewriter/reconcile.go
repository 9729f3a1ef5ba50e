package reservewriter

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/salestore"
)

// Reconciling reserve's counters with the database. A product's counter in
// Redis must equal its stock in the database less the units of the
// reservations the writers have not written yet. A Redis that loses some of
// what it acknowledged breaks that: restarted from an AOF synced every
// second, or failed over to a replica that lagged, it may hold a counter
// from before some reservations it no longer has (too high: the database
// refuses what it cannot honour, as failed promises), or reservations'
// records without their stream entries (too low: units nobody will ever
// buy). A counter lost whole is derived again when it is next loaded
// (by the service); reconcile checks one that is there.

// reconcileBatch is the most products a writer reconciles at once.
const reconcileBatch = 16

// reconciled is what reconcile found of a product's counter: how far it
// was moved (0: it agreed) and how many reservations of the generation
// Redis still had records of but neither the stream nor the database held
// (lost promises: their buyers find them pending for ever, or, once a
// reset forgets them, not at all).
type reconciled struct {
	delta, lost int64
}

// reconcile holds product id's counter against the database and the
// reservations waiting, under the product's row lock (no writer commits
// meanwhile), and moves it where they say it must be.
func (s *Writer) reconcile(ctx context.Context, id int64) (reconciled, error) {
	var r reconciled
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	defer cancel()
	err := s.cfg.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		p, err := salestore.LockProduct(tx, id)
		switch {
		case err != nil:
			return err
		case !p.Reserve || !p.ReserveLoaded:
			return nil
		}
		// Returns on their way to the counter: the database's stock has
		// their units, and the counter will when they get there.
		returns, err := salestore.ReturnsOf(tx, id)
		if err != nil {
			return err
		}
		snap, err := s.cfg.Reserve.Check(ctx, id, p.Generation, salestore.ReturnIDs(returns))
		switch {
		case err != nil:
			return err
		case !snap.Present || snap.Generation != p.Generation:
			return nil // not loaded in this generation: the next purchase loads it
		}
		var coming int64
		for _, r := range returns {
			if !snap.Refunded[r.OrderID] {
				coming += r.Quantity
			}
		}
		written, err := writtenOf(tx, id, slices.Collect(maps.Keys(snap.Waiting)))
		if err != nil {
			return err
		}
		var waiting int64
		for rid, q := range snap.Waiting {
			if !written[rid] {
				waiting += q
			}
		}
		// Never below 0: reservations beyond the database's stock are
		// refused sold_out when written, and give nothing back.
		r.delta = max(0, p.Stock-waiting-coming) - snap.Stock
		if r.delta == 0 {
			return nil
		}
		if r.delta > 0 {
			if r.lost, err = s.lostReservations(ctx, tx, id, p.Generation, snap.Waiting); err != nil {
				return err
			}
		}
		stock, changed, err := s.cfg.Reserve.Adjust(ctx, id, p.Generation, r.delta)
		if err != nil || !changed {
			r = reconciled{}
			return err
		}
		s.cfg.Metrics.ReserveCorrected(r.delta, r.lost)
		s.cfg.Log.WarnContext(ctx, "reserve: the product's counter disagreed with the database and the reservations waiting: moved (Redis lost some of what it acknowledged?)",
			"product", id, "generation", p.Generation, "database_stock", p.Stock, "waiting_units", waiting,
			"counter_was", snap.Stock, "moved_by", r.delta, "counter", stock, "reservations_lost", r.lost)
		return nil
	})
	if err != nil {
		return reconciled{}, failure.Store(fmt.Sprintf("reconcile the counter of product %d", id), err)
	}
	return r, nil
}

// lostReservations counts the product's reservations that Redis has
// pending records of and neither the stream (waiting, and a second look
// for those made since) nor the database holds.
func (s *Writer) lostReservations(ctx context.Context, tx *gorm.DB, id, gen int64, waiting map[string]int64) (int64, error) {
	recs, err := s.cfg.Reserve.PendingRecords(ctx, id)
	if err != nil {
		return 0, err
	}
	written, err := writtenOf(tx, id, recs)
	if err != nil {
		return 0, err
	}
	var missing []string
	for _, rid := range recs {
		if _, ok := waiting[rid]; !ok && !written[rid] {
			missing = append(missing, rid)
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	// Reservations made after the first look have records and entries:
	// they are not lost. (None is written meanwhile: the row is locked.)
	again, err := s.cfg.Reserve.Check(ctx, id, gen, nil)
	if err != nil {
		return 0, err
	}
	var lost int64
	for _, rid := range missing {
		if _, ok := again.Waiting[rid]; !ok {
			lost++
		}
	}
	return lost, nil
}

// writtenOf says which of the request IDs rids have an order of product id.
func writtenOf(tx *gorm.DB, id int64, rids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for chunk := range slices.Chunk(rids, 1000) {
		var got []string
		err := tx.Model(&model.Order{}).Where("product_id = ? AND request_id IN ?", id, chunk).Pluck("request_id", &got).Error
		if err != nil {
			return nil, fmt.Errorf("read which reservations of product %d are written: %w", id, err)
		}
		for _, rid := range got {
			out[rid] = true
		}
	}
	return out, nil
}

// reconcileWritten reconciles the products ids (those a writer wrote).
func (s *Writer) reconcileWritten(ctx context.Context, ids []int64) {
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if _, err := s.reconcile(ctx, id); err != nil && ctx.Err() == nil {
			s.cfg.Log.WarnContext(ctx, "reconcile a reserve counter", "product", id, "err", err)
		}
	}
}

// Reconcile holds product id's counter against the database and the
// reservations waiting, as the writers do every so often: how far it moved
// the counter, and how many reservations it found lost.
func (s *Writer) Reconcile(ctx context.Context, id int64) (delta, lost int64, err error) {
	r, err := s.reconcile(ctx, id)
	return r.delta, r.lost, err
}
