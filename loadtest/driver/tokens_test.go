package driver

import (
	"crypto"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seckill/seckill/buyer"
)

// TestTokensSignedAhead: the tokens of the first Presign buyers are signed
// before the run, once (ES256's signatures are randomised: a token signed
// again differs), the others each time they are asked for; with buyers,
// every buyer's one token is signed before, whatever Presign says. Each
// names its buyer.
func TestTokensSignedAhead(t *testing.T) {
	key, err := buyer.GenerateKey("ES256")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := buyer.NewSigner(key, "")
	if err != nil {
		t.Fatal(err)
	}
	verifier := verifierOf(t, key, signer.KeyID())
	b := &BuyerTokens{Signer: signer, Audience: "seckill", Presign: 3}
	for _, tc := range []struct {
		buyers int
		ahead  int // the buyers whose token is signed once
		asked  int // the buyers asked for
	}{{0, 3, 6}, {5, 5, 5}} {
		token, err := b.tokenOf(t.Context(), "p-", tc.buyers)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tc.asked {
			first, err := token(i)
			if err != nil {
				t.Fatal(err)
			}
			again, err := token(i)
			if err != nil {
				t.Fatal(err)
			}
			if same := first == again; same != (i < tc.ahead) {
				t.Errorf("buyers=%d: buyer %d's token asked twice is the same: %t; want %t (signed ahead for the first %d)",
					tc.buyers, i, same, i < tc.ahead, tc.ahead)
			}
			c, err := verifier.Verify(t.Context(), first)
			if want := fmt.Sprintf("p-%d", i); err != nil || c.Subject != want {
				t.Errorf("buyers=%d: buyer %d's token names %q (%v); want %s", tc.buyers, i, c.Subject, err, want)
			}
		}
	}
}

// verifierOf verifies the tokens of key, named kid.
func verifierOf(t *testing.T, key crypto.Signer, kid string) *buyer.Verifier {
	t.Helper()
	set, err := buyer.PublicSet(map[string]crypto.Signer{kid: key})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, set, 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := buyer.NewKeys(t.Context(), file, nil)
	if err != nil {
		t.Fatal(err)
	}
	return buyer.NewVerifier(keys, "seckill", "", nil)
}
