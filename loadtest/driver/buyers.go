package driver

import (
	"strconv"
	"time"

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

// tokenOf returns the plan's function of the token of request i's buyer,
// whose user_id is prefix and i: a new token each time.
func (b *BuyerTokens) tokenOf(prefix string) func(i int) (string, error) {
	return func(i int) (string, error) { return b.Token(prefix+strconv.Itoa(i), time.Now()) }
}
