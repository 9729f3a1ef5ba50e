package buyer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The issuing side, for the driver and the tests: what an identity
// provider does, with go-jose signing. The service never signs a token.

// Signer signs buyers' tokens with one private key.
type Signer struct {
	signer jose.Signer
	kid    string
	alg    jose.SignatureAlgorithm
}

// NewSigner returns a signer with key (RSA, EC P-256 or Ed25519) under
// kid; an empty kid is the key's RFC 7638 thumbprint.
func NewSigner(key crypto.Signer, kid string) (*Signer, error) {
	pub := jose.JSONWebKey{Key: key.Public()}
	alg := algorithmOf(pub)
	if alg == "" {
		return nil, fmt.Errorf("buyer: a %T key signs none of RS256, ES256 and EdDSA", key)
	}
	if kid == "" {
		var err error
		if kid, err = Thumbprint(key.Public()); err != nil {
			return nil, err
		}
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid))
	if err != nil {
		return nil, fmt.Errorf("buyer: %w", err)
	}
	return &Signer{signer: s, kid: kid, alg: alg}, nil
}

// KeyID is the kid the signer's tokens carry.
func (s *Signer) KeyID() string { return s.kid }

// Algorithm is the signer's algorithm.
func (s *Signer) Algorithm() string { return string(s.alg) }

// Token signs claims (the registered ones, plus extra when not nil).
func (s *Signer) Token(c jwt.Claims, extra any) (string, error) {
	b := jwt.Signed(s.signer).Claims(c)
	if extra != nil {
		b = b.Claims(extra)
	}
	tok, err := b.Serialize()
	if err != nil {
		return "", fmt.Errorf("buyer: sign: %w", err)
	}
	return tok, nil
}

// BuyerToken is a token for sub, for audience (and issuer, when not
// empty), issued now and valid for ttl.
func (s *Signer) BuyerToken(sub, audience, issuer string, now time.Time, ttl time.Duration) (string, error) {
	return s.Token(jwt.Claims{Subject: sub, Audience: jwt.Audience{audience}, Issuer: issuer,
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl))}, nil)
}

// Thumbprint is pub's RFC 7638 thumbprint (SHA-256, base64url).
func Thumbprint(pub crypto.PublicKey) (string, error) {
	tp, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("buyer: thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// PublicSet is the JWK Set of the public halves of keys, each under its
// kid and with its algorithm.
func PublicSet(keys map[string]crypto.Signer) ([]byte, error) {
	var set jose.JSONWebKeySet
	for kid, k := range keys {
		jwk := jose.JSONWebKey{Key: k.Public(), KeyID: kid, Use: "sig"}
		jwk.Algorithm = string(algorithmOf(jwk))
		set.Keys = append(set.Keys, jwk)
	}
	return json.Marshal(set)
}

// GenerateKey makes a private key for alg: RS256 (RSA 2048), ES256 (P-256)
// or EdDSA (Ed25519).
func GenerateKey(alg string) (crypto.Signer, error) {
	switch jose.SignatureAlgorithm(alg) {
	case jose.RS256:
		return rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("buyer: no key for %q: want RS256, ES256 or EdDSA", alg)
}

// ReadPrivateKey reads a PEM private key: PKCS #8 (RSA, EC P-256,
// Ed25519), PKCS #1 (RSA) or SEC 1 (EC).
func ReadPrivateKey(path string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("buyer: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("buyer: %s holds no PEM block", path)
	}
	var k any
	switch blk.Type {
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("buyer: %s: %w", path, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("buyer: %s: a %T is no signing key", path, k)
	}
	return s, nil
}

// NewKeyFiles makes a key of alg (GenerateKey), writes it and its JWK Set
// to dir (WriteKey) and returns its signer, whose kid is the key's
// thumbprint: a provider of one key, for the driver's -keygen and tests.
func NewKeyFiles(dir, alg string) (*Signer, error) {
	key, err := GenerateKey(alg)
	if err != nil {
		return nil, err
	}
	kid, err := WriteKey(dir, key)
	if err != nil {
		return nil, err
	}
	return NewSigner(key, kid)
}

// WriteKey writes key to dir as key.pem (PKCS #8) and its public half as
// the JWK Set jwks.json, under its thumbprint as kid, and returns the
// kid.
func WriteKey(dir string, key crypto.Signer) (string, error) {
	kid, err := Thumbprint(key.Public())
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("buyer: %w", err)
	}
	set, err := PublicSet(map[string]crypto.Signer{kid: key})
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("buyer: %w", err)
	}
	err = errors.Join(
		os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600),
		os.WriteFile(filepath.Join(dir, "jwks.json"), set, 0o644))
	if err != nil {
		return "", fmt.Errorf("buyer: %w", err)
	}
	return kid, nil
}
