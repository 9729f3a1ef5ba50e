package driver_test

import (
	"fmt"
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
// audit holds; without the tokens every purchase is refused 401. The
// tokens of the first 40 requests are signed before the run, the others as
// they are sent. With Buyers, five buyers make every purchase and cancel,
// each with its one token.
func TestRunBuyerTokens(t *testing.T) {
	dir := t.TempDir()
	signer, err := buyer.NewKeyFiles(dir, "EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	tokens := &driver.BuyerTokens{Signer: signer, Audience: "seckill", Presign: 40}
	for _, tc := range []struct {
		lock   string
		buyers int // Config.Buyers: 0, a buyer per purchase
	}{{"redlock", 0}, {"reserve", 0}, {"redlock", 5}} {
		lock := tc.lock
		t.Run(fmt.Sprintf("%s, buyers=%d", lock, tc.buyers), func(t *testing.T) {
			in := apptest.Start(t, map[string]string{"SECKILL_BUYER_AUTH": "jwt", "SECKILL_BUYER_JWKS": filepath.Join(dir, "jwks.json"),
				"SECKILL_LOCK": lock, "SECKILL_STRATEGY_OVERRIDE": "false", "SECKILL_PER_USER_LIMIT": "0"})
			const stock = 20
			cancel := 0.25
			if lock == "reserve" {
				cancel = 0 // a reservation is cancelled once its order is written: the driver cancels orders only
			}
			rep, err := driver.Run(t.Context(), driver.Config{
				URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: stock, Requests: 80, Concurrency: 8,
				Strategies: []string{""}, BuyerTokens: tokens, Cancel: cancel, Buyers: tc.buyers,
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
			var users int64
			if err := in.Stores.DB.WithContext(t.Context()).Raw("SELECT COUNT(DISTINCT user_id) FROM orders WHERE product_id = ?", res.Audit.ProductID).Scan(&users).Error; err != nil {
				t.Fatal(err)
			}
			want := int64(res.Successes) // a buyer per order
			if tc.buyers > 0 {
				want = int64(tc.buyers)
			}
			if users != want {
				t.Errorf("the orders are of %d buyers; want %d (buyers=%d, %d orders)", users, want, tc.buyers, res.Successes)
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
