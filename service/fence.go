package service

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
)

// fencing says whether p's stock write is fenced under st.
func (s *Seckill) fencing(st Strategy, p Purchase) bool {
	on := s.cfg.Fencing
	if p.Fencing != nil {
		on = *p.Fencing
	}
	return on && st.Fenced
}

// fenceWrite is what a one-purchase write does with the fence: move it on
// itself (claim, the claim folded into the write), or apply only while it
// is still token (a claim made at the grant), or neither (nil token, no
// claim: optimistic).
type fenceWrite struct {
	claim bool
	token *int64
}

// claim issues the product's next fencing token, in one short statement of
// its own: fence = fence + 1, read back from the write itself (MySQL's
// LAST_INSERT_ID(expr), SQLite's RETURNING). The token comes from the
// database that holds the stock, so it grows per product whatever happens
// to the Redis nodes, and it makes every earlier holder's token stale.
func (s *Seckill) claim(ctx context.Context, id int64) (int64, error) {
	ctx, cancel := s.dbCtx(ctx, 0)
	defer cancel()
	if !s.mysql {
		var fences []int64
		if err := s.db.WithContext(ctx).Raw(s.stmt(stmtClaimFence), id).Scan(&fences).Error; err != nil {
			return 0, storeErr(fmt.Sprintf("claim the fence of product %d", id), err)
		}
		if len(fences) == 0 {
			return 0, notFound(id)
		}
		return fences[0], nil
	}
	res, err := s.db.WithContext(ctx).ConnPool.ExecContext(ctx, s.stmt(stmtClaimFence), id)
	if err != nil {
		return 0, storeErr(fmt.Sprintf("claim the fence of product %d", id), err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, errors.Join(notFound(id), err)
	}
	token, err := res.LastInsertId()
	if err != nil {
		return 0, storeErr(fmt.Sprintf("read the fence of product %d", id), err)
	}
	return token, nil
}

// claimInWrite is the claim folded into a write: the transaction's first
// statement moves the fence on, taking the row lock until the commit, and
// the stock is read under it.
func (s *Seckill) claimInWrite(tx *gorm.DB, id int64) (int64, error) {
	res := tx.Model(&model.Product{}).Where("id = ?", id).Update("fence", exprFenceBump())
	if res.Error != nil {
		return 0, fmt.Errorf("claim the fence of product %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return 0, notFound(id)
	}
	var stock int64
	err := forUpdate(tx.Model(&model.Product{})).Where("id = ?", id).Select("stock").Scan(&stock).Error
	if err != nil {
		return 0, fmt.Errorf("read the stock of product %d: %w", id, err)
	}
	return stock, nil
}

// checkFence reads the product's stock, fence and generation under its
// row lock (SELECT ... FOR UPDATE): a fence that is no longer token means
// somebody claimed it, or the stock was reset, after this hold's claim
// (*fenceMoved), and nothing is written.
func (s *Seckill) checkFence(tx *gorm.DB, id, token int64) (int64, error) {
	var prod model.Product
	err := forUpdate(tx).Select("id", "stock", "fence", "generation").Take(&prod, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, notFound(id)
	}
	if err != nil {
		return 0, fmt.Errorf("read the stock of product %d: %w", id, err)
	}
	if prod.Fence != token {
		return 0, &fenceMoved{generation: prod.Generation}
	}
	return prod.Stock, nil
}

// fenceMoved is a fenced write's refusal: the product's fence is no longer
// the hold's token. generation is the product's generation then: a reset
// moves both. The hold decides what it answers (overtaken).
type fenceMoved struct {
	generation int64
}

func (e *fenceMoved) Error() string {
	return fmt.Sprintf("the fence moved on (generation %d)", e.generation)
}

// lockLost is the answer of a hold whose token went stale.
func (s *Seckill) lockLost(st Strategy, id, token int64) error {
	s.metrics.lockFailed(st.Name, "lost")
	return ErrLockLost.because(
		fmt.Errorf("product %d: a later holder claimed its fence, or its stock was reset, after token %d", id, token))
}
