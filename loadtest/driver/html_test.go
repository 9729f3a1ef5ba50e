package driver_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/apptest"
	"github.com/seckill/seckill/internal/browser"
	"github.com/seckill/seckill/loadtest/driver"
)

// TestReportFitsTheWindow: the HTML report of a run of every strategy,
// opened in a headless Chromium of 1280x720, needs no scrolling sideways
// and hides nothing on its right (browser.MeasureFit); its table has no
// dropped column, which only the open loop fills. It saves a screenshot
// (browser.Screenshot).
func TestReportFitsTheWindow(t *testing.T) {
	in := apptest.Start(t, nil)
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 10,
		Strategies: []string{"all"}, Requests: 60, Concurrency: 8, Hold: time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(f); err != nil {
		t.Fatalf("WriteHTML = %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	tab := browser.New(t, 1280, 720, 2*time.Minute)
	if err := chromedp.Do(tab, chromedp.Navigate("file://"+page)); err != nil {
		t.Fatalf("open the report: %v", err)
	}
	heads, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table th")].map(th => th.textContent)`))
	if err != nil {
		t.Fatalf("read the report: %v", err)
	}
	if len(heads) < 10 {
		t.Errorf("the report's table has the heads %q; want the table", heads)
	}
	for _, h := range heads {
		if h == "dropped" {
			t.Errorf("the report of a closed loop has a dropped column: %q", heads)
		}
	}
	if fit := browser.MeasureFit(t, tab); fit.ScrollWidth > 1280 || !fit.Fits() {
		t.Errorf("the report of %d strategies is %s", len(rep.Results), fit)
	} else {
		t.Logf("the report of %d strategies: %s", len(rep.Results), fit)
	}
	browser.Screenshot(t, tab, "report.png")
}
