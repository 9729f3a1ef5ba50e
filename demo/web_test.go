package demo_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo"
	"github.com/seckill/seckill/demo/lab"
	"github.com/seckill/seckill/internal/testkit/browser"
	"github.com/seckill/seckill/service"
)

// shownSeries is a row of the page's live table, as the page shows it.
type shownSeries struct {
	ID       string `json:"id"`
	Stock    string `json:"stock"`
	Negative bool   `json:"negative"`
	Audited  bool   `json:"audited"`
	AuditURL string `json:"url"`
}

// layout is where the page put its parts, in CSS pixels.
type layout struct {
	ScrollWidth   int     `json:"scrollWidth"`
	InnerWidth    int     `json:"innerWidth"`
	InnerHeight   int     `json:"innerHeight"`
	VerdictBottom float64 `json:"verdictBottom"`
	Status        string  `json:"status"`
	Rows          int     `json:"rows"`
	FontSize      float64 `json:"fontSize"`
}

// TestWorkshopPage plays the sale on the workshop page in a headless
// Chromium of 1280x720, as a presenter would: the stock the page shows for
// every product is what the product's /audit reports, the oversold one is
// drawn red, the verdict table has a row per strategy and is on screen
// without scrolling, and nothing scrolls sideways or is cut off on the
// right (browser.MeasureFit). It saves a screenshot
// (browser.Screenshot).
func TestWorkshopPage(t *testing.T) {
	srv := startWorkshop(t)
	ctx := browser.New(t, 1280, 720, 3*time.Minute)
	err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"] button[data-name="sale"]`)),
		chromedp.Click(chromedp.CSS(`button[data-name="sale"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#result, #status.unexpected`)),
	)
	if err != nil {
		t.Fatalf("play the sale on the page: %v", err)
	}
	if verdict, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`document.getElementById("result") ? "" : document.getElementById("verdict").innerText`)); err != nil || verdict != "" {
		t.Fatalf("the page shows no verdict table: %q (%v)", verdict, err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]shownSeries](`[...document.querySelectorAll("#series tr.series")].map(r => ({
		id: r.dataset.id, stock: r.dataset.stock, audited: r.dataset.audited === "true", url: r.dataset.auditUrl,
		negative: r.querySelector(".stock").classList.contains("neg")}))`))
	if err != nil {
		t.Fatalf("read the page's stock: %v", err)
	}
	if want := len(service.StrategyTable()); len(shown) != want {
		t.Fatalf("the page shows %d products; want one per strategy (%d): %+v", len(shown), want, shown)
	}
	oversold := 0
	for _, s := range shown {
		a := audit(t, srv.URL+s.AuditURL)
		if !s.Audited || s.Stock != jsonInt(a.Stock) {
			t.Errorf("the page shows %s's stock as %s (audited %t); /audit reports %d", s.ID, s.Stock, s.Audited, a.Stock)
		}
		if s.Negative != (a.Stock < 0) {
			t.Errorf("%s's stock %d drawn red = %t; want red exactly below zero", s.ID, a.Stock, s.Negative)
		}
		if a.Stock < 0 {
			oversold++
		}
	}
	if oversold < 2 {
		t.Errorf("%d products below zero on the page; want none and local at least", oversold)
	}

	got, err := chromedp.Run(ctx, chromedp.Evaluate[layout](`({
		scrollWidth: document.documentElement.scrollWidth, innerWidth: innerWidth, innerHeight: innerHeight,
		verdictBottom: document.getElementById("result").getBoundingClientRect().bottom,
		status: document.getElementById("status").textContent,
		rows: document.querySelectorAll("#result tr[data-key]").length,
		fontSize: parseFloat(getComputedStyle(document.querySelector("#result td")).fontSize)})`))
	if err != nil {
		t.Fatalf("read the page's layout: %v", err)
	}
	if got.ScrollWidth > got.InnerWidth {
		t.Errorf("the page is %d px wide in a %d px window: it scrolls sideways", got.ScrollWidth, got.InnerWidth)
	}
	// The page hides what is too wide (overflow-x: hidden): nothing may be.
	if fit := browser.MeasureFit(t, ctx); fit.ScrollWidth > 1280 || !fit.Fits() {
		t.Errorf("after the sale, the workshop page is %s", fit)
	} else {
		t.Logf("after the sale: %s", fit)
	}
	if got.VerdictBottom > float64(got.InnerHeight) {
		t.Errorf("the verdict table ends at %.0f px, below the %d px window", got.VerdictBottom, got.InnerHeight)
	}
	if want := len(service.StrategyTable()); got.Rows != want || got.Status == "" || got.FontSize < 18 {
		t.Errorf("verdict: %d rows, status %q, %.0f px text; want %d rows, a status, at least 18 px", got.Rows, got.Status, got.FontSize, want)
	}

	browser.Screenshot(t, ctx, "workshop.png")
}

// TestWorkshopLiveTableFits: the live table fits its column with every
// kind of answer a slow machine's sale gives (lock_timeout, unavailable
// and the rest beside the 201s and sold_out), large counts, a long wait
// and stock far below zero: its cells wrap between answers rather than
// push the table off the page (as a sale on a loaded machine once did).
func TestWorkshopLiveTableFits(t *testing.T) {
	srv := startWorkshop(t)
	ctx := browser.New(t, 1280, 720, time.Minute)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)),
		chromedp.Evaluate[chromedp.Void](`run = { name: "sale", series: new Map(), notes: [], at: 0, done: false };
			for (const label of ["none", "local", "setnx", "token", "redlock", "pessimistic", "optimistic", "reserve"]) {
				run.series.set(label, { color: "#0b4f8a", points: [[0, 40]], snap: {
					label: label, stock: -1234, audited: false, audit_url: "", waiting: 64, longest_ms: 12345,
					answers: { "201": 1234, "409 sold_out": 2345, "503 lock_timeout": 345, "503 unavailable": 45,
						"503 lock_lost": 56, "409 limit_exceeded": 6, "503 outcome_unknown": 7 } } });
			}
			drawLive();`),
	); err != nil {
		t.Fatalf("draw the live table: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#series tr.series").length`))
	if err != nil || rows != 8 {
		t.Fatalf("the live table has %d rows (%v); want 8", rows, err)
	}
	if fit := browser.MeasureFit(t, ctx); !fit.Fits() {
		t.Errorf("the live table with every kind of answer: the page is %s", fit)
	}
	// Every row on screen, and every answer counted: the 201s, sold_out and
	// the rest together.
	type shownRows struct {
		Bottom, Height float64
		Answers        string
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[shownRows](`({
		bottom: [...document.querySelectorAll("#series tr.series")].pop().getBoundingClientRect().bottom,
		height: innerHeight, answers: document.querySelector("#series td.answers").textContent})`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Bottom > got.Height {
		t.Errorf("the live table's last row ends at %.0f px, below the %.0f px window", got.Bottom, got.Height)
	}
	if want := "1234 ok · 2345 sold_out · 459 other"; got.Answers != want {
		t.Errorf("the answers cell says %q; want %q", got.Answers, want)
	}
	browser.Screenshot(t, ctx, "workshop-live.png")
}

// startWorkshop serves the workshop page on the embedded stores until t
// ends.
func startWorkshop(t *testing.T) *httptest.Server {
	t.Helper()
	l, err := lab.NewLab(func(string) string { return "" }, logFile(t))
	if err != nil {
		t.Fatal(err)
	}
	ws := demo.NewWorkshop(t.Context(), l)
	srv := httptest.NewServer(ws)
	t.Cleanup(func() {
		srv.Close()
		if err := ws.Close(); err != nil {
			t.Errorf("Workshop.Close = %v", err)
		}
	})
	return srv
}

// audit GETs an audit URL the page links to.
func audit(t *testing.T, url string) client.Audit {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var a client.Audit
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d, %v", url, resp.StatusCode, err)
	}
	return a
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n) // an int64 always marshals
	return string(b)
}

// logFile is where the instances of a test log: a file of the test's own.
func logFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "demo.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestWorkshopCalls: the page lists every scenario; a run streams its
// events, one JSON object per line, starting with the scenario; a second
// run while one plays is refused (409), as is a scenario that does not
// exist (400).
func TestWorkshopCalls(t *testing.T) {
	srv := startWorkshop(t)
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d, %v", resp.StatusCode, err)
	}
	for _, sc := range demo.Scenarios() {
		if !strings.Contains(string(page), `data-name="`+sc.Name+`"`) {
			t.Errorf("the page has no button for %s", sc.Name)
		}
	}

	post := func(scenario string) *http.Response {
		t.Helper()
		resp, err := http.Post(srv.URL+"/api/run?scenario="+scenario, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := post("nope"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST /api/run?scenario=nope = %d; want 400", resp.StatusCode)
	}
	first := post("setnx-clock")
	defer first.Body.Close()
	events := bufio.NewScanner(first.Body)
	var start lab.Event
	if !events.Scan() || json.Unmarshal(events.Bytes(), &start) != nil || start.Kind != "start" ||
		start.Scenario == nil || start.Scenario.Name != "setnx-clock" {
		t.Fatalf("the run's first line = %q; want the start of setnx-clock", events.Text())
	}
	second := post("sale")
	second.Body.Close()
	if second.StatusCode != http.StatusConflict {
		t.Errorf("a second run while one plays = %d; want 409", second.StatusCode)
	}
	var last lab.Event
	for events.Scan() {
		if err := json.Unmarshal(events.Bytes(), &last); err != nil {
			t.Fatalf("a line of the run is not an event: %q", events.Text())
		}
	}
	if last.Kind != "result" || last.Result == nil || !last.Result.OK() {
		t.Errorf("the run's last event = %+v; want its result, as the articles say", last)
	}
}

// TestWorkshopRefusesOtherSites: a run started from another site's page
// (its Origin) and any request under another site's name (DNS rebinding:
// the Host is a name that points here) answer 403 and start nothing; the
// page's own requests, by IP address or localhost, are served.
func TestWorkshopRefusesOtherSites(t *testing.T) {
	srv := startWorkshop(t)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, host, origin string) int {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+"/api/run?scenario=nope", nil)
		if method == http.MethodGet {
			req, err = http.NewRequest(method, srv.URL+"/", nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	own := "127.0.0.1:" + port
	for _, tc := range []struct {
		method, host, origin string
		want                 int
	}{
		{http.MethodPost, own, "https://evil.example", http.StatusForbidden},
		{http.MethodPost, own, "http://localhost:" + port, http.StatusForbidden}, // another origin of the same machine
		{http.MethodPost, "evil.example:" + port, "", http.StatusForbidden},
		{http.MethodPost, "evil.example:" + port, "http://evil.example:" + port, http.StatusForbidden},
		{http.MethodGet, "evil.example:" + port, "", http.StatusForbidden},
		// The page's own: 400 for the scenario named nope, not 403.
		{http.MethodPost, own, "http://" + own, http.StatusBadRequest},
		{http.MethodPost, own, "", http.StatusBadRequest},
		{http.MethodPost, "localhost:" + port, "http://localhost:" + port, http.StatusBadRequest},
		{http.MethodPost, "[::1]:" + port, "", http.StatusBadRequest},
		{http.MethodGet, "localhost:" + port, "", http.StatusOK},
	} {
		if got := do(tc.method, tc.host, tc.origin); got != tc.want {
			t.Errorf("%s with Host %s, Origin %q = %d; want %d", tc.method, tc.host, tc.origin, got, tc.want)
		}
	}
}
