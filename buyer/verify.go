// Package buyer says who is buying: it verifies a buyer's token, a JWT
// signed by the identity provider with a key of its JWK Set (RS256, ES256
// or EdDSA), and returns the buyer it names (its sub). The JOSE work is
// go-jose's (github.com/go-jose/go-jose/v4): parsing the compact form
// with the algorithms allowed, verifying the signature, reading and
// checking the claims. This package chooses the key (by kid, of the
// algorithm the key is for) and keeps the key set fresh (Keys).
package buyer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Leeway is how far apart the provider's clock and this one may be: exp,
// nbf and iat are checked with it.
const Leeway = 60 * time.Second

// algorithms are the signature algorithms a buyer's token may use.
func algorithms() []jose.SignatureAlgorithm {
	return []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}
}

// Reason is why a token was refused, as seckill_auth_failures_total's
// reason label names it.
type Reason string

// The reasons.
const (
	ReasonMissing   Reason = "missing"       // no token
	ReasonMalformed Reason = "malformed"     // not a compact JWS, or its claims do not read
	ReasonAlgorithm Reason = "algorithm"     // not RS256, ES256 or EdDSA, or not the key's
	ReasonKey       Reason = "unknown_key"   // no kid, or none the set holds
	ReasonSignature Reason = "signature"     // the signature does not verify
	ReasonExpired   Reason = "expired"       // exp passed, or missing
	ReasonEarly     Reason = "not_yet_valid" // nbf or iat ahead
	ReasonAudience  Reason = "audience"      // aud does not name the service
	ReasonIssuer    Reason = "issuer"        // iss is not the issuer
	ReasonSubject   Reason = "subject"       // no sub
)

// Reasons are every reason, for metrics that start at 0.
func Reasons() []Reason {
	return []Reason{ReasonMissing, ReasonMalformed, ReasonAlgorithm, ReasonKey, ReasonSignature,
		ReasonExpired, ReasonEarly, ReasonAudience, ReasonIssuer, ReasonSubject}
}

// Refused is a token that is not valid, and why.
type Refused struct {
	Reason Reason
	Err    error
}

func (e *Refused) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("buyer: token refused: %s", e.Reason)
	}
	return fmt.Sprintf("buyer: token refused: %s: %v", e.Reason, e.Err)
}

func (e *Refused) Unwrap() error { return e.Err }

func refused(r Reason, err error) error { return &Refused{Reason: r, Err: err} }

// ReasonOf is the reason err refused a token, "" when it is not a refusal.
func ReasonOf(err error) Reason {
	var r *Refused
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

// Verifier checks buyers' tokens.
type Verifier struct {
	keys  *Keys
	cache *cache
	// Audience must be among a token's aud; Issuer, when not empty, is
	// its iss.
	audience, issuer string
	now              func() time.Time
}

// NewVerifier returns a verifier of tokens signed with keys, for audience
// and, when not empty, issuer. now is the clock (nil: time.Now).
func NewVerifier(keys *Keys, audience, issuer string, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{keys: keys, cache: newCache(DefaultCacheSize), audience: audience, issuer: issuer, now: now}
}

// Claims are what a valid token says.
type Claims struct {
	Subject string
	Expiry  time.Time
}

// Verify returns the claims of token if it is valid; else a *Refused. A
// token verified before, under the same reading of the key set and before
// its exp, is answered from memory: a buyer's retries cost no signature
// check.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	if token == "" {
		return Claims{}, refused(ReasonMissing, nil)
	}
	read := v.keys.reads.Load()
	if c, ok := v.cache.get(token, v.now(), read); ok {
		return c, nil
	}
	c, err := v.verify(ctx, token)
	if err == nil {
		v.cache.put(token, c, read)
	}
	return c, err
}

// verify checks token in full.
func (v *Verifier) verify(ctx context.Context, token string) (Claims, error) {
	tok, err := jwt.ParseSigned(token, algorithms())
	if err != nil {
		// go-jose refuses any other algorithm (none, HS256) here.
		var alg *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &alg) {
			return Claims{}, refused(ReasonAlgorithm, err)
		}
		return Claims{}, refused(ReasonMalformed, err)
	}
	if len(tok.Headers) != 1 {
		return Claims{}, refused(ReasonMalformed, fmt.Errorf("%d signatures", len(tok.Headers)))
	}
	h := tok.Headers[0]
	if h.KeyID == "" {
		return Claims{}, refused(ReasonKey, errors.New("no kid"))
	}
	key, ok, err := v.keys.lookup(ctx, h.KeyID)
	if !ok {
		return Claims{}, refused(ReasonKey, errors.Join(fmt.Errorf("kid %q", h.KeyID), err))
	}
	// The key verifies the one algorithm it is for: an ES256 key named
	// under an RS256 header, or any key under HS256, is refused.
	if alg := algorithmOf(key); string(alg) != h.Algorithm {
		return Claims{}, refused(ReasonAlgorithm, fmt.Errorf("kid %q is a %s key, the token says %s", h.KeyID, alg, h.Algorithm))
	}
	var c jwt.Claims
	if err := tok.Claims(key.Key, &c); err != nil {
		return Claims{}, refused(ReasonSignature, err)
	}
	return v.check(c)
}

// check holds verified claims to the contract.
func (v *Verifier) check(c jwt.Claims) (Claims, error) {
	if c.Expiry == nil {
		return Claims{}, refused(ReasonExpired, errors.New("no exp"))
	}
	err := c.ValidateWithLeeway(jwt.Expected{Issuer: v.issuer, AnyAudience: jwt.Audience{v.audience}, Time: v.now()}, Leeway)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return Claims{}, refused(ReasonExpired, err)
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return Claims{}, refused(ReasonEarly, err)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return Claims{}, refused(ReasonAudience, err)
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return Claims{}, refused(ReasonIssuer, err)
	case err != nil:
		return Claims{}, refused(ReasonMalformed, err)
	case c.Subject == "":
		return Claims{}, refused(ReasonSubject, errors.New("no sub"))
	}
	return Claims{Subject: c.Subject, Expiry: c.Expiry.Time()}, nil
}
