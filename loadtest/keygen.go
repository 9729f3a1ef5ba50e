package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/seckill/seckill/buyer"
)

// keygen writes a new ES256 key for buyers' tokens to dir/key.pem and its
// JWK Set to dir/jwks.json (its kid the key's thumbprint), and says how to
// use them.
func keygen(dir string, stdout io.Writer) error {
	signer, err := buyer.NewKeyFiles(dir, "ES256")
	if err != nil {
		return err
	}
	pem, set := filepath.Join(dir, "key.pem"), filepath.Join(dir, "jwks.json")
	_, err = fmt.Fprintf(stdout, "wrote %s (ES256, kid %s) and %s\n"+
		"  the service: SECKILL_BUYER_AUTH=jwt SECKILL_BUYER_JWKS=%s\n"+
		"  the driver:  go run ./loadtest -buyer-key %s ...\n", pem, signer.KeyID(), set, set, pem)
	return err
}
