package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/config"
)

// OpenBuyers returns the verifier of buyers' tokens under
// SECKILL_BUYER_AUTH=jwt (nil under open): its JWK Set read now, from
// SECKILL_BUYER_JWKS or found by discovery at SECKILL_BUYER_ISSUER, and
// again every 10 minutes until ctx ends. A set that cannot be read, or
// holds no usable key, is an error naming the variable.
func OpenBuyers(ctx context.Context, cfg config.Config, log *slog.Logger) (*buyer.Verifier, error) {
	if cfg.BuyerAuth != config.BuyerJWT {
		return nil, nil
	}
	source := cfg.BuyerJWKS
	if source == "" {
		var err error
		if source, err = buyer.Discover(ctx, cfg.BuyerIssuer, nil); err != nil {
			return nil, fmt.Errorf("config: SECKILL_BUYER_ISSUER %q: %w", cfg.BuyerIssuer, err)
		}
	}
	keys, err := buyer.NewKeys(ctx, source, nil)
	if err != nil {
		return nil, fmt.Errorf("config: SECKILL_BUYER_JWKS %q: %w", source, err)
	}
	if buyer.PlainHTTP(source) || buyer.PlainHTTP(cfg.BuyerIssuer) {
		log.Warn("the buyers' keys are read over plain HTTP: anyone on the path could replace them and sign "+
			"tokens for any buyer; serve them over https", "source", source, "issuer", cfg.BuyerIssuer)
	}
	go keys.Run(ctx, buyer.Refresh, func(err error) {
		log.Warn("the buyers' JWK Set could not be read again; the keys read before stay", "source", source, "err", err)
	})
	return buyer.NewVerifier(keys, cfg.BuyerAudience, cfg.BuyerIssuer, nil), nil
}
