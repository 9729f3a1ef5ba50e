package controller_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/testkit/apptest"
)

const paymentSecret = "whsec-test-4f1a"

// pay sends the provider's callback for order id, signed with secret at t
// (sign false: no signature header).
func pay(t *testing.T, in *apptest.Instance, secret string, at time.Time, body string) apptest.Response {
	t.Helper()
	h := map[string]string{api.SignatureHeader: api.SignPayment(secret, at, []byte(body))}
	return in.Do(t, http.MethodPost, "/api/v1/payments", body, h)
}

func paymentBody(payment string, order int64) string {
	return fmt.Sprintf(`{"payment_id":%q,"order_id":%d}`, payment, order)
}

// buyOrders buys n units of a new product, one per buyer, and returns the
// orders' IDs.
func buyOrders(t *testing.T, in *apptest.Instance, n int) []int64 {
	t.Helper()
	id := in.Create(t, "paid by callback", int64(n))
	var ids []int64
	for i := range n {
		r := in.PostPurchase(t, id, "", fmt.Sprintf(`{"user_id":"payer-%d","quantity":1}`, i))
		if r.Status != http.StatusCreated {
			t.Fatalf("purchase = %v; want 201", r)
		}
		var o order
		apptest.Decode(t, r, &o)
		ids = append(ids, o.OrderID)
	}
	return ids
}

func orderStatus(t *testing.T, in *apptest.Instance, id int64) string {
	t.Helper()
	r := in.Admin(t, http.MethodGet, fmt.Sprintf("/api/v1/orders/%d", id), "")
	var o order
	apptest.Decode(t, r, &o)
	return o.Status
}

// TestPayments: with SECKILL_PAYMENT_SECRET an order is paid only by a
// callback signed with it, within 300 s of this clock; anything else
// answers 401 and pays nothing; a retry of a payment answers 200 and
// changes nothing; the buyer's own pay route is 403.
func TestPayments(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PAYMENT_SECRET": paymentSecret})
	ids := buyOrders(t, in, 3)
	now := time.Now()
	body := paymentBody("pay_1", ids[0])

	apptest.WantError(t, "the buyer paying", in.Do(t, http.MethodPost, fmt.Sprintf("/api/v1/orders/%d/pay", ids[0]), `{"user_id":"payer-0"}`, nil),
		http.StatusForbidden, "forbidden")
	good := api.SignPayment(paymentSecret, now, []byte(body))
	ts, v1, _ := strings.Cut(good, ",")
	for name, header := range map[string]string{
		"no signature":         "",
		"garbled":              "sha256=abc",
		"no v1":                ts,
		"v1 not hex":           ts + ",v1=zz",
		"another secret":       api.SignPayment("whsec-other", now, []byte(body)),
		"another body":         api.SignPayment(paymentSecret, now, []byte(paymentBody("pay_1", ids[1]))),
		"stale":                api.SignPayment(paymentSecret, now.Add(-301*time.Second), []byte(body)),
		"ahead":                api.SignPayment(paymentSecret, now.Add(301*time.Second), []byte(body)),
		"t changed, v1 kept":   fmt.Sprintf("t=%d,%s", now.Unix()+1, v1),
		"v1 of a shorter body": api.SignPayment(paymentSecret, now, []byte(body[:len(body)-1])),
	} {
		h := map[string]string{}
		if header != "" {
			h[api.SignatureHeader] = header
		}
		r := in.Do(t, http.MethodPost, "/api/v1/payments", body, h)
		apptest.WantError(t, "a callback with "+name, r, http.StatusUnauthorized, "unauthenticated")
		if got := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Seckill-Signature") {
			t.Errorf("a callback with %s: WWW-Authenticate %q; want the signature's challenge", name, got)
		}
	}
	if s := orderStatus(t, in, ids[0]); s != "unpaid" {
		t.Fatalf("after refused callbacks the order is %s; want unpaid", s)
	}

	for range 2 { // the provider retries: the same answer, nothing more
		r := pay(t, in, paymentSecret, now, body)
		var o order
		if r.Status != http.StatusOK {
			t.Fatalf("a signed callback = %v; want 200", r)
		}
		apptest.Decode(t, r, &o)
		if o.Status != "paid" || o.OrderID != ids[0] {
			t.Errorf("a signed callback answered %+v; want order %d paid", o, ids[0])
		}
	}
	// Several v1 (the provider rotating its secret): one that verifies is enough.
	rotated := api.SignPayment("whsec-old", now, []byte(paymentBody("pay_2", ids[1]))) + "," + strings.Split(api.SignPayment(paymentSecret, now, []byte(paymentBody("pay_2", ids[1]))), ",")[1]
	if r := in.Do(t, http.MethodPost, "/api/v1/payments", paymentBody("pay_2", ids[1]), map[string]string{api.SignatureHeader: rotated}); r.Status != http.StatusOK {
		t.Errorf("a callback with two v1, one right = %v; want 200", r)
	}
	apptest.WantError(t, "an unknown order", pay(t, in, paymentSecret, now, paymentBody("pay_3", 999999)), http.StatusNotFound, "order_not_found")
	for _, bad := range []string{`{"order_id":1}`, `{"payment_id":"","order_id":1}`, `{"payment_id":"p","order_id":0}`, `{"payment_id":"p"}`,
		`[1]`, fmt.Sprintf(`{"payment_id":%q,"order_id":1}`, strings.Repeat("p", 65))} {
		apptest.WantError(t, "a signed body "+bad, pay(t, in, paymentSecret, now, bad), http.StatusBadRequest, "invalid_argument")
	}
	if r := in.Do(t, http.MethodPost, fmt.Sprintf("/api/v1/orders/%d/cancel", ids[2]), `{"user_id":"payer-2"}`, nil); r.Status != http.StatusOK {
		t.Fatalf("cancel = %v; want 200", r)
	}
	apptest.WantError(t, "paying a cancelled order", pay(t, in, paymentSecret, now, paymentBody("pay_4", ids[2])), http.StatusConflict, "order_closed")
	metrics := string(in.Get(t, "/metrics").Body)
	for _, want := range []string{`seckill_auth_failures_total{reason="payment_signature"} 4`, `seckill_auth_failures_total{reason="payment_stale"} 2`,
		`seckill_auth_failures_total{reason="payment_missing"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	other := apptest.Start(t, nil)
	apptest.WantError(t, "a callback without SECKILL_PAYMENT_SECRET", pay(t, other, paymentSecret, now, body), http.StatusForbidden, "forbidden")
}

// TestPaymentRacesCancel: a payment and its buyer's cancel sent at once,
// for many orders: exactly one wins each, and the audit holds.
func TestPaymentRacesCancel(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PAYMENT_SECRET": paymentSecret})
	const n = 20
	ids := buyOrders(t, in, n)
	type result struct{ pay, cancel apptest.Response }
	results := make([]result, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			r, err := in.Send(t.Context(), http.MethodPost, "/api/v1/payments", paymentBody(fmt.Sprintf("race-%d", i), id),
				map[string]string{api.SignatureHeader: api.SignPayment(paymentSecret, time.Now(), []byte(paymentBody(fmt.Sprintf("race-%d", i), id)))})
			if err != nil {
				t.Error(err)
			}
			results[i].pay = r
		})
		wg.Go(func() {
			r, err := in.Send(t.Context(), http.MethodPost, fmt.Sprintf("/api/v1/orders/%d/cancel", id), fmt.Sprintf(`{"user_id":"payer-%d"}`, i), nil)
			if err != nil {
				t.Error(err)
			}
			results[i].cancel = r
		})
	}
	wg.Wait()
	for i, r := range results {
		paid := r.pay.Status == http.StatusOK && r.cancel.Status == http.StatusConflict && strings.Contains(string(r.cancel.Body), "order_paid")
		cancelled := r.cancel.Status == http.StatusOK && r.pay.Status == http.StatusConflict && strings.Contains(string(r.pay.Body), "order_closed")
		want := map[bool]string{true: "paid", false: "cancelled"}[paid]
		if paid == cancelled || orderStatus(t, in, ids[i]) != want {
			t.Errorf("order %d: payment %v, cancel %v, now %s; want exactly one to win", ids[i], r.pay, r.cancel, orderStatus(t, in, ids[i]))
		}
	}
}
