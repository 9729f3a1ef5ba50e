package service

import (
	"fmt"

	"github.com/seckill/seckill/service/failure"
)

// fencing says whether p's stock write is fenced under st.
func (s *Seckill) fencing(st Strategy, p Purchase) bool {
	on := s.cfg.Fencing
	if p.Fencing != nil {
		on = *p.Fencing
	}
	return on && st.way.fenced
}

// lockLost is the answer of a hold whose token went stale.
func (s *Seckill) lockLost(st Strategy, id, token int64) error {
	s.metrics.LockFailed(st.Name, "lost")
	return failure.ErrLockLost.Because(
		fmt.Errorf("product %d: a later holder claimed its fence, or its stock was reset, after token %d", id, token))
}
