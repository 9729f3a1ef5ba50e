package driver

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/buyer"
)

// BuyerTokens makes each buyer's token, for instances under
// SECKILL_BUYER_AUTH=jwt (-buyer-key): sub the buyer's user_id, aud
// Audience, iss Issuer when not empty, valid for TTL from its signing.
type BuyerTokens struct {
	Signer   *buyer.Signer
	Audience string
	Issuer   string
	TTL      time.Duration
	// Presign, when above 0, has the tokens of a run's first Presign
	// requests signed before the run starts, on every core, so that a
	// dear signature (RS256's, about 1.7 ms here) does not take the CPU
	// of the run it measures; later requests' are signed as they are
	// sent. (With Config.Buyers every buyer's token is signed before.)
	Presign int
}

// DefaultBuyerTokenTTL is how long a token the driver signs is valid.
const DefaultBuyerTokenTTL = 10 * time.Minute

// Token signs a new token for the buyer userID, valid from now.
func (b *BuyerTokens) Token(userID string, now time.Time) (string, error) {
	ttl := b.TTL
	if ttl == 0 {
		ttl = DefaultBuyerTokenTTL
	}
	return b.Signer.BuyerToken(userID, b.Audience, b.Issuer, now, ttl)
}

// tokenOf returns the plan's function of the token of buyer i, whose
// user_id is prefix and i: when buyers is above 0, each buyer's one token,
// all signed now; else those of the first Presign signed now, and a new
// token each time for the others.
func (b *BuyerTokens) tokenOf(ctx context.Context, prefix string, buyers int) (func(i int) (string, error), error) {
	ahead := max(b.Presign, 0)
	if buyers > 0 {
		ahead = buyers
	}
	signed := make([]string, ahead)
	now := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		g.Go(func() error {
			for i := w; i < len(signed); i += workers {
				if err := ctx.Err(); err != nil {
					return err
				}
				tok, err := b.Token(prefix+strconv.Itoa(i), now)
				if err != nil {
					return err
				}
				signed[i] = tok
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("driver: sign the buyers' tokens ahead: %w", err)
	}
	return func(i int) (string, error) {
		if i < len(signed) {
			return signed[i], nil
		}
		return b.Token(prefix+strconv.Itoa(i), time.Now())
	}, nil
}
