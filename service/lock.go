package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/seckill/seckill/locker"
	"github.com/seckill/seckill/service/failure"
)

// lockKey is the Redis key (or local key) of a product's lock under a
// strategy's lock kind. Each kind keeps keys of its own, so that one never
// blocks another: a setnx holder that died leaves its key without expiry,
// by the classic recipe, and token and redlock must not wait on it. (The
// fence they write under is shared: it is what keeps them exact together.)
func (s *Seckill) lockKey(kind string, productID int64) string {
	return s.cfg.KeyPrefix + "lock:" + kind + ":product:" + strconv.FormatInt(productID, 10)
}

// lock takes st's lock for the product, waiting until ctx ends.
func (s *Seckill) lock(ctx context.Context, st Strategy, productID int64) (locker.Lease, error) {
	lk, ok := s.lockers[st.Name]
	if !ok {
		return nil, failure.ErrUnavailable.Because(fmt.Errorf("strategy %s has no lock configured", st.Name))
	}
	lease, err := lk.Lock(ctx, s.lockKey(st.Name, productID))
	switch {
	case err == nil:
		return lease, nil
	case errors.Is(err, locker.ErrUnavailable):
		return nil, failure.Errorf(failure.CodeUnavailable, "too few Redis nodes answer for the strategy's lock").Because(err)
	}
	return nil, failure.ErrLockTimeout.Because(err)
}

// unlockBudget bounds giving a lock back.
const unlockBudget = 2 * time.Second

// unlock gives the lease back on a context the buyer hanging up cannot
// cancel. An error matters only when the hold failed too (sold is the
// hold's error): once orders are committed, a lock that could not be given
// back still expires at its TTL, so it is reported, not returned.
func (s *Seckill) unlock(ctx context.Context, st Strategy, productID int64, lease locker.Lease, sold error) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockBudget)
	defer cancel()
	err := lease.Unlock(uctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, locker.ErrNotHeld):
		// The lease ran out while we worked: someone else may have held
		// the lock too. Fencing decided whether our write counted.
		s.metrics.LockFailed(st.Name, "expired")
		s.log.WarnContext(ctx, "lease expired before unlock", "strategy", st.Name, "product", productID, "err", err)
		return nil
	case sold != nil:
		return err
	}
	s.metrics.LockFailed(st.Name, "unlock_error")
	s.log.ErrorContext(ctx, "unlock failed", "strategy", st.Name, "product", productID, "err", err)
	return nil
}

// expired says which of the purchases that joined the line at arrived
// have waited longer than their lock wait by now.
func (s *Seckill) expired(st Strategy, arrived []time.Time, now time.Time) []bool {
	out := make([]bool, len(arrived))
	for i, a := range arrived {
		out[i] = now.After(a.Add(s.cfg.LockWait))
		if out[i] {
			s.metrics.LockFailed(st.Name, "timeout")
		}
	}
	return out
}
