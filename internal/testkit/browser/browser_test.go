package browser_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/testkit/browser"
)

// TestNoTempDirsLeft: a page opened and closed leaves no
// org.chromium.Chromium.* directory in the system's temporary directory
// (make test once left dozens).
func TestNoTempDirsLeft(t *testing.T) {
	pattern := filepath.Join(os.TempDir(), "org.chromium.Chromium.*")
	before, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a page", func(t *testing.T) {
		tab := browser.New(t, 400, 300, time.Minute)
		if err := chromedp.Do(tab, chromedp.Navigate("data:text/html,<title>x</title>")); err != nil {
			t.Fatal(err)
		}
		if title, err := chromedp.Run(tab, chromedp.Title()); err != nil || title != "x" {
			t.Fatalf("the page's title = %q, %v; want x", title, err)
		}
	})
	after, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, d := range after {
		if !slices.Contains(before, d) {
			left = append(left, d)
		}
	}
	if len(left) > 0 {
		t.Errorf("chromium left %q", left)
	}
}
