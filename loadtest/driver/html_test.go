package driver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/browser"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// TestReportFitsTheWindow: the HTML report of a run of every strategy,
// opened in a headless Chromium of 1280x720, needs no scrolling sideways
// and hides nothing on its right (browser.MeasureFit); its table has no
// dropped column, which only the open loop fills. Over a catalogue, the
// header names its size and law and each run has a small table of its
// hottest products, and the page still fits; over one product there is no
// such table. It saves a screenshot of each (browser.Screenshot).
func TestReportFitsTheWindow(t *testing.T) {
	in := apptest.Start(t, nil)
	tab := browser.New(t, 1280, 720, 4*time.Minute)
	for _, tc := range []struct {
		name, screenshot string
		products         int
	}{{"one product", "report.png", 0}, {"catalogue", "report-catalogue.png", 5}} {
		rep, err := driver.Run(t.Context(), driver.Config{
			URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: 10, Products: tc.products, Zipf: 1.2,
			Strategies: []string{"all"}, Requests: 60, Concurrency: 8, Hold: time.Millisecond,
		})
		if err != nil {
			t.Fatalf("%s: Run = %v", tc.name, err)
		}
		page := writeReportPage(t, tc.name, rep)
		if err := chromedp.Do(tab, chromedp.Navigate("file://"+page)); err != nil {
			t.Fatalf("%s: open the report: %v", tc.name, err)
		}
		heads, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table th")].map(th => th.textContent)`))
		if err != nil {
			t.Fatalf("%s: read the report: %v", tc.name, err)
		}
		if len(heads) < 10 {
			t.Errorf("%s: the report's table has the heads %q; want the table", tc.name, heads)
		}
		for _, h := range heads {
			if h == "dropped" {
				t.Errorf("%s: the report of a closed loop has a dropped column: %q", tc.name, heads)
			}
		}
		meta, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector(".meta").textContent`))
		if err != nil {
			t.Fatalf("%s: read the report's header: %v", tc.name, err)
		}
		hottest, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll(".hottest table").length`))
		if err != nil {
			t.Fatalf("%s: count the hottest tables: %v", tc.name, err)
		}
		wantMeta, wantHottest := fmt.Sprintf("product %d, stock reset to 10", rep.Config.ProductID), 0
		if tc.products > 0 {
			wantMeta, wantHottest = "a catalogue of 5 products (loadtest-1 to loadtest-5), Zipf 1.2", len(rep.Results)
		}
		if !strings.Contains(meta, wantMeta) || hottest != wantHottest {
			t.Errorf("%s: the header says %q and the page has %d tables of hottest products; want %q and %d",
				tc.name, meta, hottest, wantMeta, wantHottest)
		}
		if fit := browser.MeasureFit(t, tab); fit.ScrollWidth > 1280 || !fit.Fits() {
			t.Errorf("%s: the report of %d strategies is %s", tc.name, len(rep.Results), fit)
		} else {
			t.Logf("%s: the report of %d strategies: %s", tc.name, len(rep.Results), fit)
		}
		browser.Screenshot(t, tab, tc.screenshot)
	}
}

// writeReportPage writes rep's HTML page to a file of the test's own, for
// the case called name, and returns its path.
func writeReportPage(t *testing.T, name string, rep *report.Report) string {
	t.Helper()
	page := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(f); err != nil {
		t.Fatalf("%s: WriteHTML = %v", name, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return page
}
