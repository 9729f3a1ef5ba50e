package controller_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/apptest"
	"github.com/seckill/seckill/internal/browser"
	api "github.com/seckill/seckill/loadtest/client"
)

// shown is what the dashboard shows of one product and one strategy.
type shown struct {
	Stock   string `json:"stock"`
	Red     bool   `json:"red"`
	OK      string `json:"ok"`
	SoldOut string `json:"soldOut"`
}

// TestDashboard opens GET / in a headless Chromium while purchases are
// made: the stock it shows is what /audit reports, a stock below zero is
// red, the sales per strategy and outcome are this instance's counts, and
// the page follows new purchases by itself.
func TestDashboard(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"})
	ctx := t.Context()
	c := &api.Client{BaseURL: in.URL, AdminToken: in.AdminToken}
	p, err := c.CreateProduct(ctx, "dashboard phone", 3)
	if err != nil {
		t.Fatal(err)
	}
	buy := func(strategy string, n int) {
		t.Helper()
		for i := range n {
			_, err := c.Buy(ctx, p.ID, api.Purchase{UserID: fmt.Sprintf("u-%d", i), Quantity: 1}, api.Override{Strategy: strategy})
			var e *api.Error
			if err != nil && !(errors.As(err, &e) && e.Code == "sold_out") {
				t.Fatalf("Buy = %v", err)
			}
		}
	}
	buy("token", 2)

	tab := browser.New(t, 1280, 720, 2*time.Minute)
	if err := chromedp.Do(tab, chromedp.Navigate(in.URL+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	read := fmt.Sprintf(`(() => {
		const p = document.querySelector('#products tr[data-product="%d"] td.stock');
		const cell = o => document.querySelector('#sales tr[data-strategy="token"] td[data-outcome="' + o + '"]');
		return {stock: p ? p.textContent : "", red: !!p && p.classList.contains("neg"),
			ok: cell("ok") ? cell("ok").textContent : "", soldOut: cell("sold_out") ? cell("sold_out").textContent : ""};
	})()`, p.ID)
	// until waits, a few seconds at most, for the page to show want.
	until := func(want func(shown) bool) shown {
		t.Helper()
		var got shown
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			got, err = chromedp.Run(tab, chromedp.Evaluate[shown](read))
			if err != nil {
				t.Fatalf("read the dashboard: %v", err)
			}
			if want(got) {
				return got
			}
			time.Sleep(100 * time.Millisecond)
		}
		return got
	}
	a, err := c.Audit(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := until(func(s shown) bool { return s.Stock == fmt.Sprint(a.Stock) && s.OK == "2" }); got.Stock != "1" || got.OK != "2" || got.Red {
		t.Errorf("dashboard shows %+v; want stock 1 as /audit says (%d), 2 token sales ok, not red", got, a.Stock)
	}

	// Two more buyers: one gets the last unit, one is told sold_out; the
	// page follows by itself.
	buy("token", 2)
	got := until(func(s shown) bool { return s.Stock == "0" && s.OK == "3" && s.SoldOut == "1" })
	if got.Stock != "0" || got.OK != "3" || got.SoldOut != "1" {
		t.Errorf("dashboard shows %+v 5 s after two more purchases; want stock 0, 3 ok, 1 sold_out", got)
	}

	// An oversold stock shows red: reset to 1 and let two unguarded
	// buyers in at once, each with work inside its critical section.
	if _, err := c.SetStock(ctx, p.ID, 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := c.Buy(ctx, p.ID, api.Purchase{UserID: fmt.Sprintf("none-%d", i), Quantity: 1},
				api.Override{Strategy: "none", Hold: 300 * time.Millisecond})
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("Buy under none = %v", err)
		}
	}
	if a, err = c.Audit(ctx, p.ID); err != nil || a.Stock != -1 {
		t.Fatalf("Audit after two unguarded buyers of 1 unit = %+v, %v; want stock -1", a, err)
	}
	if got := until(func(s shown) bool { return s.Stock == "-1" }); got.Stock != "-1" || !got.Red {
		t.Errorf("dashboard shows %+v; want stock -1 as /audit says, in red", got)
	}

	browser.Screenshot(t, tab, "dashboard.png")

	resp, err := http.Get(in.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("GET / = %d %s; want 200 text/html", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestDashboardIPLimit: with SECKILL_IP_LIMIT on, the dashboard counts the
// purchase requests answered 429.
func TestDashboardIPLimit(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0", "SECKILL_IP_LIMIT": "2/1m"})
	ctx := t.Context()
	c := &api.Client{BaseURL: in.URL, AdminToken: in.AdminToken}
	p, err := c.CreateProduct(ctx, "limited phone", 10)
	if err != nil {
		t.Fatal(err)
	}
	limited := 0
	for i := range 5 {
		_, err := c.Buy(ctx, p.ID, api.Purchase{UserID: fmt.Sprintf("u-%d", i), Quantity: 1}, api.Override{})
		var e *api.Error
		switch {
		case err == nil:
		case errors.As(err, &e) && e.Code == "rate_limited":
			limited++
		default:
			t.Fatalf("Buy = %v", err)
		}
	}
	if limited != 3 {
		t.Fatalf("%d of 5 purchases rate_limited; want 3", limited)
	}
	tab := browser.New(t, 1280, 720, 2*time.Minute)
	if err := chromedp.Do(tab, chromedp.Navigate(in.URL+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	var shownLimited string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && shownLimited != "3"; time.Sleep(100 * time.Millisecond) {
		if shownLimited, err = chromedp.Run(tab, chromedp.Evaluate[string](
			`(document.getElementById("ip-limit").dataset.limited || "")`)); err != nil {
			t.Fatalf("read the dashboard: %v", err)
		}
	}
	if shownLimited != "3" {
		t.Errorf("the dashboard shows %q purchase requests rate_limited; want 3", shownLimited)
	}
}
