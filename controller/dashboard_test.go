package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	api "github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/browser"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service/metrics"
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
	c := in.Client()
	p, err := c.CreateProduct(ctx, "dashboard phone", 3)
	if err != nil {
		t.Fatal(err)
	}
	buyOrSoldOut(t, c, p.ID, "token", 2)

	tab := openDashboard(t, in.URL)
	a, err := c.Audit(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := untilShown(t, tab, p.ID, func(s shown) bool { return s.Stock == fmt.Sprint(a.Stock) && s.OK == "2" }); got.Stock != "1" || got.OK != "2" || got.Red {
		t.Errorf("dashboard shows %+v; want stock 1 as /audit says (%d), 2 token sales ok, not red", got, a.Stock)
	}

	// Two more buyers: one gets the last unit, one is told sold_out; the
	// page follows by itself.
	buyOrSoldOut(t, c, p.ID, "token", 2)
	got := untilShown(t, tab, p.ID, func(s shown) bool { return s.Stock == "0" && s.OK == "3" && s.SoldOut == "1" })
	if got.Stock != "0" || got.OK != "3" || got.SoldOut != "1" {
		t.Errorf("dashboard shows %+v 10 s after two more purchases; want stock 0, 3 ok, 1 sold_out", got)
	}

	// An oversold stock shows red.
	oversell(t, c, p.ID)
	if got := untilShown(t, tab, p.ID, func(s shown) bool { return s.Stock == "-1" }); got.Stock != "-1" || !got.Red {
		t.Errorf("dashboard shows %+v; want stock -1 as /audit says, in red", got)
	}

	resp, err := http.Get(in.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("GET / = %d %s; want 200 text/html", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// openDashboard opens GET / of the instance at url in a headless Chromium
// window of 1280x720 and returns its tab.
func openDashboard(t *testing.T, url string) context.Context {
	t.Helper()
	tab := browser.New(t, 1280, 720, 2*time.Minute)
	if err := chromedp.Do(tab, chromedp.Navigate(url+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	return tab
}

// buyOrSoldOut makes n purchases of one unit of product id under strategy,
// by users u-0 to u-n-1; each must succeed or be told sold_out.
func buyOrSoldOut(t *testing.T, c *api.Client, id int64, strategy string, n int) {
	t.Helper()
	for i := range n {
		_, err := c.Buy(t.Context(), id, api.Purchase{UserID: fmt.Sprintf("u-%d", i), Quantity: 1}, api.Override{Strategy: strategy})
		var e *api.Error
		if err != nil && !(errors.As(err, &e) && e.Code == "sold_out") {
			t.Fatalf("Buy = %v", err)
		}
	}
}

// untilShown waits, 10 s at most, for the dashboard in tab to show want
// of product id and of the strategy token, and returns what it shows last.
func untilShown(t *testing.T, tab context.Context, id int64, want func(shown) bool) shown {
	t.Helper()
	read := fmt.Sprintf(`(() => {
		const p = document.querySelector('#products tr[data-product="%d"] td.stock');
		const cell = o => document.querySelector('#sales tr[data-strategy="token"] td[data-outcome="' + o + '"]');
		return {stock: p ? p.textContent : "", red: !!p && p.classList.contains("neg"),
			ok: cell("ok") ? cell("ok").textContent : "", soldOut: cell("sold_out") ? cell("sold_out").textContent : ""};
	})()`, id)
	var got shown
	testenv.Until(10*time.Second, func() bool {
		var err error
		got, err = chromedp.Run(tab, chromedp.Evaluate[shown](read))
		if err != nil {
			t.Fatalf("read the dashboard: %v", err)
		}
		return want(got)
	})
	return got
}

// oversell resets product id to 1 unit and lets two unguarded buyers in at
// once, each with work inside its critical section; /audit must then say
// stock -1.
func oversell(t *testing.T, c *api.Client, id int64) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.SetStock(ctx, id, 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := c.Buy(ctx, id, api.Purchase{UserID: fmt.Sprintf("none-%d", i), Quantity: 1},
				api.Override{Strategy: "none", Hold: 300 * time.Millisecond})
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("Buy under none = %v", err)
		}
	}
	if a, err := c.Audit(ctx, id); err != nil || a.Stock != -1 {
		t.Fatalf("Audit after two unguarded buyers of 1 unit = %+v, %v; want stock -1", a, err)
	}
}

// TestDashboardIPLimit: with SECKILL_IP_LIMIT on, the dashboard counts the
// purchase requests answered 429.
func TestDashboardIPLimit(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0", "SECKILL_IP_LIMIT": "2/1m"})
	ctx := t.Context()
	c := in.Client()
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
	tab := openDashboard(t, in.URL)
	var shownLimited string
	testenv.Until(10*time.Second, func() bool {
		if shownLimited, err = chromedp.Run(tab, chromedp.Evaluate[string](
			`(document.getElementById("ip-limit").dataset.limited || "")`)); err != nil {
			t.Fatalf("read the dashboard: %v", err)
		}
		return shownLimited == "3"
	})
	if shownLimited != "3" {
		t.Errorf("the dashboard shows %q purchase requests rate_limited; want 3", shownLimited)
	}
}

// TestDashboardOrders: the dashboard shows the orders by what became of
// them: paid, cancelled, expired.
func TestDashboardOrders(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PAYMENT_TIMEOUT": "1s"})
	ctx := t.Context()
	c := in.Client()
	p, err := c.CreateProduct(ctx, "lamp", 10)
	if err != nil {
		t.Fatal(err)
	}
	var orders []api.Order
	for i := range 3 {
		o, err := c.Buy(ctx, p.ID, api.Purchase{UserID: fmt.Sprintf("u-%d", i), Quantity: 1}, api.Override{})
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, o)
	}
	if _, err := c.Pay(ctx, orders[0].OrderID, "u-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, orders[1].OrderID, "u-1"); err != nil {
		t.Fatal(err)
	}
	tab := openDashboard(t, in.URL)
	var shown string
	testenv.Until(15*time.Second, func() bool {
		if shown, err = chromedp.Run(tab, chromedp.Evaluate[string](
			`(e => [e.dataset.paid, e.dataset.cancelled, e.dataset.expired].join(" "))(document.getElementById("orders"))`)); err != nil {
			t.Fatalf("read the dashboard: %v", err)
		}
		return shown == "1 1 1"
	})
	if shown != "1 1 1" {
		t.Errorf("the dashboard shows %q orders paid, cancelled, expired; want 1 1 1", shown)
	}
}

// TestDashboardFitsTheWindow: at 1280x720 the dashboard needs no scrolling
// sideways, first after a real sale under every strategy (the driver's
// probes of a product that does not exist shown apart, not as sales),
// then with the worst it may have to show, drawn by the page itself from
// answers the test gives its fetch: every outcome counted under every
// strategy, six-digit counts, a product named by 64 letters without a
// space. The screenshot (browser.Screenshot) is of the real sale.
func TestDashboardFitsTheWindow(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_PER_USER_LIMIT": "0"})
	c := in.Client()
	names := sellUnderEveryStrategy(t, c)

	tab := openDashboard(t, in.URL)
	wantRealSaleFits(t, tab, names)
	browser.Screenshot(t, tab, "dashboard.png")

	// The worst case, drawn by the page from the answers its fetch gets.
	feedWorstCase(t, tab, names)
	wantWorstCaseFits(t, tab, names)
}

// sellUnderEveryStrategy sells under each strategy the server names: 3
// units of a product with a long name, 1 of 2 of a scarce one before
// sold_out, and the load driver's probe of a product that does not exist.
// It returns the strategies' names, in the server's order.
func sellUnderEveryStrategy(t *testing.T, c *api.Client) []string {
	t.Helper()
	ctx := t.Context()
	strategies, err := c.Strategies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	long, err := c.CreateProduct(ctx, "Limited edition phone, 256 GB, midnight blue, with its charger", 100)
	if err != nil {
		t.Fatal(err)
	}
	scarce, err := c.CreateProduct(ctx, "workshop phone", 1)
	if err != nil {
		t.Fatal(err)
	}
	const missing = 1 << 40 // no product has this id
	names := make([]string, len(strategies))
	for i, st := range strategies {
		names[i] = st.Name
		o := api.Override{Strategy: st.Name}
		for j := range 3 {
			if _, err := c.Buy(ctx, long.ID, api.Purchase{UserID: fmt.Sprintf("%s-%d", st.Name, j), Quantity: 1}, o); err != nil {
				t.Fatalf("Buy under %s = %v", st.Name, err)
			}
		}
		if _, err := c.SetStock(ctx, scarce.ID, 1); err != nil {
			t.Fatal(err)
		}
		for j := range 2 {
			_, err := c.Buy(ctx, scarce.ID, api.Purchase{UserID: fmt.Sprintf("%s-s%d", st.Name, j), Quantity: 1}, o)
			var e *api.Error
			if err != nil && !(errors.As(err, &e) && e.Code == "sold_out") {
				t.Fatalf("Buy under %s = %v", st.Name, err)
			}
		}
		// The load driver's probe: may this client name a strategy?
		_, err := c.Buy(ctx, missing, api.Purchase{UserID: "probe", Quantity: 1}, o)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != "product_not_found" {
			t.Fatalf("Buy of product %d under %s = %v; want product_not_found", missing, st.Name, err)
		}
	}
	return names
}

// wantRealSaleFits checks the dashboard in tab after sellUnderEveryStrategy
// under the strategies names: 4 201s under each (202s under reserve), the
// probes counted apart
// and not as a column of sales, and no scrolling sideways.
func wantRealSaleFits(t *testing.T, tab context.Context, names []string) {
	t.Helper()
	// seen reads what the page shows: the 201s of every strategy (202s
	// under reserve), whether
	// product_not_found has a column, and the probes counted apart.
	type seen struct {
		OK       []string `json:"ok"`
		NotFound bool     `json:"notFoundColumn"`
		Probes   string   `json:"probes"`
	}
	read := `(() => ({
		ok: [...document.querySelectorAll('#sales tr[data-strategy]')].map(tr => String(
			["ok", "reserved"].reduce((n, o) => n + Number((tr.querySelector('td[data-outcome="' + o + '"]') || {}).textContent || 0), 0))),
		notFoundColumn: !!document.querySelector('#sales [data-outcome="product_not_found"]'),
		probes: (document.getElementById("not-found") || {dataset: {}}).dataset.count || ""}))()`
	var got seen
	testenv.Eventually(t, 10*time.Second, "the dashboard to show the sale", func() bool {
		var err error
		if got, err = chromedp.Run(tab, chromedp.Evaluate[seen](read)); err != nil {
			t.Fatalf("read the dashboard: %v", err)
		}
		return len(got.OK) == len(names) // every purchase came before the page
	})
	for i, n := range got.OK {
		if n != "4" {
			t.Errorf("the dashboard shows %s 201s under %s; want 4 (3, and 1 of 2 before sold_out)", n, names[i])
		}
	}
	if got.NotFound || got.Probes != fmt.Sprint(len(names)) {
		t.Errorf("product_not_found as a column of sales: %t, probes counted apart: %q; want no column, %d apart",
			got.NotFound, got.Probes, len(names))
	}
	if fit := browser.MeasureFit(t, tab); fit.ScrollWidth > 1280 || !fit.Fits() {
		t.Errorf("after the sale under every strategy, the dashboard is %s", fit)
	} else {
		t.Logf("after the sale: %s", fit)
	}
}

// feedWorstCase makes the fetch of the dashboard in tab answer the worst
// it may have to show under the strategies names: every outcome counted
// under every strategy, six-digit counts, a product named by 64 letters
// without a space.
func feedWorstCase(t *testing.T, tab context.Context, names []string) {
	t.Helper()
	worst, err := json.Marshal(map[string]any{"strategies": names, "outcomes": metrics.PurchaseOutcomes(), "name": strings.Repeat("W", 64)})
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`((w) => {
		let metrics = "";
		w.strategies.forEach((s, i) => w.outcomes.forEach((o, j) => {
			metrics += 'seckill_purchases_total{outcome="' + o + '",strategy="' + s + '"} ' + (900000 + 1000 * i + j) + "\n";
		}));
		for (const r of ["allowed", "limited", "unavailable"]) metrics += 'seckill_ip_limit_total{result="' + r + '"} 999999\n';
		const products = [{id: 999999, name: w.name, stock: -999999, initial_stock: 999999}];
		for (let i = 1; i <= 5; i++) products.push({id: 999990 + i, name: w.name.slice(0, 10 * i), stock: 999999, initial_stock: 999999});
		const real = window.fetch;
		window.fetch = (url, opts) => {
			if (url === "/metrics") return Promise.resolve(new Response(metrics));
			if (url === "/api/v1/products") return Promise.resolve(new Response(JSON.stringify(products)));
			return real(url, opts);
		};
	})(`+string(worst)+`)`)); err != nil {
		t.Fatalf("give the dashboard the worst case: %v", err)
	}
}

// wantWorstCaseFits waits for the dashboard in tab to draw what
// feedWorstCase gave it, then checks it has a column for every outcome but
// product_not_found and needs no scrolling sideways.
func wantWorstCaseFits(t *testing.T, tab context.Context, names []string) {
	t.Helper()
	outcomes := metrics.PurchaseOutcomes()
	last := fmt.Sprintf(`(() => {
		const td = document.querySelector('#sales tr[data-strategy="%s"] td[data-outcome="%s"]');
		return !!document.querySelector('#products tr[data-product="999999"]') && !!td && td.textContent === "%d";
	})()`, names[len(names)-1], outcomes[len(outcomes)-1], 900000+1000*(len(names)-1)+len(outcomes)-1)
	testenv.Eventually(t, 10*time.Second, "the dashboard to draw the worst case", func() bool {
		drawn, err := chromedp.Run(tab, chromedp.Evaluate[bool](last))
		if err != nil {
			t.Fatalf("read the dashboard: %v", err)
		}
		return drawn
	})
	columns, err := chromedp.Run(tab, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#sales th[data-outcome]')].map(th => th.dataset.outcome)`))
	if err != nil {
		t.Fatalf("read the dashboard: %v", err)
	}
	if want := slices.DeleteFunc(slices.Clone(outcomes), func(o string) bool { return o == "product_not_found" }); !slices.Equal(columns, want) {
		t.Errorf("with every outcome counted, the dashboard's columns are %q; want %q", columns, want)
	}
	if fit := browser.MeasureFit(t, tab); fit.ScrollWidth > 1280 || !fit.Fits() {
		t.Errorf("with every outcome of every strategy at six digits and a 64-letter name, the dashboard is %s", fit)
	} else {
		t.Logf("the worst case: %s", fit)
	}
}
