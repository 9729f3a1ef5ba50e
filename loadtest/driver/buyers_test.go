package driver_test

import (
	"path/filepath"
	"testing"

	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// TestRunBuyerTokens: against instances under SECKILL_BUYER_AUTH=jwt the
// driver signs each buyer's token (-buyer-key): its purchases and its
// cancels are the buyers', the promises of reserve are drained, and the
// audit holds; without the tokens every purchase is refused 401.
func TestRunBuyerTokens(t *testing.T) {
	dir := t.TempDir()
	key, err := buyer.GenerateKey("EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	kid, err := buyer.WriteKey(dir, key)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := buyer.NewSigner(key, kid)
	if err != nil {
		t.Fatal(err)
	}
	tokens := &driver.BuyerTokens{Signer: signer, Audience: "seckill"}
	for _, lock := range []string{"redlock", "reserve"} {
		t.Run(lock, func(t *testing.T) {
			in := apptest.Start(t, map[string]string{"SECKILL_BUYER_AUTH": "jwt", "SECKILL_BUYER_JWKS": filepath.Join(dir, "jwks.json"),
				"SECKILL_LOCK": lock, "SECKILL_STRATEGY_OVERRIDE": "false"})
			const stock = 20
			cancel := 0.25
			if lock == "reserve" {
				cancel = 0 // a reservation is cancelled once its order is written: the driver cancels orders only
			}
			rep, err := driver.Run(t.Context(), driver.Config{
				URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: stock, Requests: 80, Concurrency: 8,
				Strategies: []string{""}, BuyerTokens: tokens, Cancel: cancel,
			})
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			res := rep.Results[0]
			if res.Successes < stock || res.Outcomes[report.OutcomeOther4xx] != 0 || !res.Audit.Consistent || !res.CountsAgree {
				t.Errorf("%d sold, outcomes %v, audit %+v; want the stock sold by the buyers' tokens, none refused", res.Successes, res.Outcomes, res.Audit)
			}
			if c := res.Cancels; cancel > 0 && (c == nil || c.Sent == 0 || c.Returned != c.Sent) {
				t.Errorf("cancels %+v; want every buyer's cancel answered 200", c)
			}
			if p := res.Promises; lock == "reserve" && (p == nil || p.Broken() != 0 || p.Kept != res.Successes) {
				t.Errorf("promises %+v; want every 202 kept", p)
			}

			rep, err = driver.Run(t.Context(), driver.Config{
				URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: stock, Requests: 10, Concurrency: 2, Strategies: []string{""},
			})
			if err != nil {
				t.Fatalf("Run without tokens = %v", err)
			}
			if res := rep.Results[0]; res.Successes != 0 || res.Outcomes[report.OutcomeOther4xx] != 10 {
				t.Errorf("without tokens: %d sold, outcomes %v; want all 10 refused (401)", res.Successes, res.Outcomes)
			}
		})
	}
}
