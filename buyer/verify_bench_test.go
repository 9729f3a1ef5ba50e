package buyer

import (
	"context"
	"testing"
	"time"
)

// benchVerifier is a verifier of alg's tokens and a fresh token of it.
func benchVerifier(b *testing.B, alg string) (*Verifier, string) {
	b.Helper()
	p := newProvider(b)
	c := &clock{t: time.Now()}
	s := p.add(b, alg)
	keys, err := NewKeys(context.Background(), p.srv.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := s.Token(claims("bench", c.now()), nil)
	if err != nil {
		b.Fatal(err)
	}
	return NewVerifier(keys, audience, issuer, c.now), tok
}

// BenchmarkVerify is the verify of a fresh token alone (the cache left
// out), per algorithm: the library's parse, signature check and claims,
// and this package's key choice (the figure bench-sale's jwt rows are held
// against).
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		b.Run(alg, func(b *testing.B) {
			v, tok := benchVerifier(b, alg)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.verify(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyCached is a buyer's retry with the same token: answered
// from the cache of verified tokens.
func BenchmarkVerifyCached(b *testing.B) {
	v, tok := benchVerifier(b, "RS256")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSign is what the driver spends on a buyer's token.
func BenchmarkSign(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		b.Run(alg, func(b *testing.B) {
			p := newProvider(b)
			s := p.add(b, alg)
			now := time.Now()
			for b.Loop() {
				if _, err := s.BuyerToken("bench", audience, issuer, now, time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
