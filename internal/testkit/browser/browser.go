// Package browser starts a headless Chromium for the tests that look at a
// page as a person would: Debian's chromium, driven through the DevTools
// protocol by github.com/chromedp/chromedp, with a fresh profile and no
// network of its own. scripts/testenv.sh installs chromium when it is
// missing; a test that finds none fails, it does not skip.
package browser

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Screenshot saves what the tab shows as a PNG called name: in the
// folder SECKILL_SCREENSHOT_DIR names (the README's pictures come from
// there), else in a temporary folder of the test.
func Screenshot(t testing.TB, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("browser: screenshot: %v", err)
	}
	dir := os.Getenv("SECKILL_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("browser: %v", err)
	}
	t.Logf("screenshot: %s", path)
}

// binaries are the names Chromium goes by, Debian's first.
var binaries = []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"}

// Find returns the path of a Chromium binary on PATH, or "" when there is
// none.
func Find() string {
	for _, name := range binaries {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// New starts a headless Chromium with a fresh profile and a window of
// width x height pixels, and returns a chromedp context for one tab in
// it, bounded by limit. Everything stops when t ends.
func New(t testing.TB, width, height int, limit time.Duration) context.Context {
	t.Helper()
	bin := Find()
	if bin == "" {
		t.Fatalf("browser: no chromium on PATH: run the tests through scripts/testenv.sh (make test), "+
			"which installs it with apt-get install -y chromium; looked for %v", binaries)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", false),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
		// Its shared memory files (disable-dev-shm-usage puts them in the
		// temporary directory, as org.chromium.Chromium.*) in the test's
		// own, removed when it ends.
		chromedp.Env("TMPDIR=" + t.TempDir()),
	}
	ctx, cancelTimeout := context.WithTimeout(context.WithoutCancel(t.Context()), limit)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTimeout()
	})
	if err := chromedp.Do(tab, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("browser: start %s: %v", bin, err)
	}
	return tab
}
