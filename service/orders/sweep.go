package orders

import (
	"context"
	"errors"
	"time"

	"github.com/seckill/seckill/internal/every"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/metrics"
)

// SweepEvery is how often each instance looks for unpaid orders whose
// time has come: a due order waits no longer than that, and the time its
// return takes, while any instance runs.
const SweepEvery = 250 * time.Millisecond

// sweepBatch bounds the due orders one look returns, oldest first: a
// backlog after an outage is swept over the next looks.
const sweepBatch = 512

// Sweep expires, every SweepEvery until ctx ends, the unpaid orders whose
// time has come. Every instance sweeps: they find the same due orders,
// and the returns' row locks let each order's units come back once.
func (s *Service) Sweep(ctx context.Context) {
	every.Run(ctx, SweepEvery, func(ctx context.Context) {
		if _, err := s.SweepOnce(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Log.WarnContext(ctx, "expire unpaid orders", "err", err)
		}
		if err := s.finishReturns(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Log.WarnContext(ctx, "reserve: finish the returns on their way to Redis", "err", err)
		}
	})
}

// SweepOnce expires the unpaid orders whose time has come, up to
// sweepBatch of them, oldest first, and returns how many this call
// expired.
func (s *Service) SweepOnce(ctx context.Context) (int, error) {
	var dueOrders []model.Order
	rctx, cancel := s.dbCtx(ctx)
	err := s.cfg.DB.WithContext(rctx).Select("id", "product_id").
		Where("status = ? AND expires_at <= ?", model.StatusUnpaid, s.now()).
		Order("expires_at").Limit(sweepBatch).Find(&dueOrders).Error
	cancel()
	if err != nil {
		return 0, failure.Store("find the unpaid orders due", err)
	}
	byProduct := map[int64][]int64{}
	var products []int64
	for _, o := range dueOrders {
		if _, ok := byProduct[o.ProductID]; !ok {
			products = append(products, o.ProductID)
		}
		byProduct[o.ProductID] = append(byProduct[o.ProductID], o.ID)
	}
	expired := 0
	var errs []error
	for _, id := range products {
		n, err := s.returnUnits(ctx, id, byProduct[id], metrics.ReturnExpiry)
		expired += n
		if err != nil && !errors.Is(err, failure.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return expired, errors.Join(errs...)
}
