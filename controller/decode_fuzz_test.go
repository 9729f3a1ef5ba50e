package controller

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// FuzzDecodePurchase feeds decodePurchase any body and query. It must never
// panic, refuse only with the contract's 4xx codes, and never rewrite what
// it accepts: the IDs it returns are valid UTF-8 and hold a U+FFFD only
// when the body spelled one, override parameters appear only under the
// override, and a purchase encoded again, as a client sends it
// (api.Purchase), decodes to itself. The corpus it has found is kept in
// testdata/fuzz.
func FuzzDecodePurchase(f *testing.F) {
	for _, seed := range []struct {
		body, query string
		override    bool
	}{
		{`{"user_id":"u-42","quantity":1,"request_id":"r-1"}`, "", false},
		{`{"user_id":"u-42","quantity":1}`, "strategy=token&hold_ms=20&fencing=false", true},
		{`{"user_id":"u-42","quantity":1,"quantity":100}`, "", false},
		{"{\"user_id\":\"a\xff\",\"quantity\":1}", "", false},
		{`{"user_id":"a\ud800","quantity":1}`, "", false},
		{`{"user_id":"a\ufffd","quantity":1}`, "", false},
		{`{"user_id":"😀","quantity":1}`, "", false},
		{`{"user_id":"Carol","quantity":1,"request_id":"y1 "}`, "", false},
		{`{"user_id":"a\tb","quantity":1}`, "", false},
		{`{"user_id":"a","quantity":1}`, "strategy=%zz", true},
		{`{"user_id":"a","quantity":1}`, "strategy=none&strategy=redlock", true},
		{`{"user_id":"a","quantity":1e0}`, "", false},
		{`{"user_id":"a","quantity":1} {}`, "", false},
		{`[]`, "", false},
	} {
		f.Add([]byte(seed.body), seed.query, seed.override, seed.override)
	}
	f.Fuzz(func(t *testing.T, body []byte, query string, override, admin bool) {
		p, err := decodePurchase(7, body, query, purchaseRules{override: override, admin: admin})
		if err != nil {
			if code := failure.CodeOf(err); code != failure.CodeInvalid && code != codeOverrideDisabled && code != codeUnauthorized {
				t.Fatalf("decodePurchase(%q, %q) = %v, code %s; want invalid_argument, strategy_override_disabled or unauthorized", body, query, err, code)
			}
			return
		}
		for _, id := range []string{p.UserID, p.RequestID} {
			if !utf8.ValidString(id) {
				t.Fatalf("decodePurchase(%q) accepted an ID of invalid UTF-8: %q", body, id)
			}
			if strings.ContainsRune(id, utf8.RuneError) && !bytes.Contains(body, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
				t.Fatalf("decodePurchase(%q) made a U+FFFD the body did not spell: %q", body, id)
			}
		}
		if !(override && admin) && (p.Strategy != "" || p.Work != 0 || p.Pause != 0 || p.Batch != 0 || p.Fencing != nil) {
			t.Fatalf("decodePurchase(%q, %q) without the override and the token = %+v; want no override fields", body, query, p)
		}
		if p.Work < 0 || p.Work > service.MaxHold {
			t.Fatalf("decodePurchase(%q) work (hold_ms) = %v; want 0 to %v", query, p.Work, service.MaxHold)
		}
		again, err := json.Marshal(api.Purchase{UserID: p.UserID, Quantity: p.Quantity, RequestID: p.RequestID})
		if err != nil {
			t.Fatalf("encode %+v: %v", p, err)
		}
		q, err := decodePurchase(7, again, query, purchaseRules{override: override, admin: admin})
		if err != nil || q.UserID != p.UserID || q.RequestID != p.RequestID || q.Quantity != p.Quantity {
			t.Fatalf("decodePurchase(%q) = %+v; encoded again as %s it decodes to %+v, %v", body, p, again, q, err)
		}
	})
}
