package browser

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Fit is how the page a tab shows fits its window across.
type Fit struct {
	// ScrollWidth is document.documentElement.scrollWidth: the page's
	// width, in CSS pixels.
	ScrollWidth int `json:"scrollWidth"`
	// ClientWidth is the width the window gives the page (its width less
	// a vertical scroll bar's), InnerWidth the window's own.
	ClientWidth int `json:"clientWidth"`
	InnerWidth  int `json:"innerWidth"`
	// Wide names, at most a dozen, the elements that reach past the
	// window's right edge, the boxes whose content is wider than they are
	// (clipped, or scrolled inside them: what overflow-x would hide from
	// ScrollWidth) and the drawings (SVG) with a part outside their frame.
	Wide []string `json:"wide"`
}

// Fits says the page needs no scrolling sideways and hides nothing on
// its right.
func (f Fit) Fits() bool { return f.ScrollWidth <= f.ClientWidth && len(f.Wide) == 0 }

func (f Fit) String() string {
	s := fmt.Sprintf("%d px wide in a window of %d (%d for the page)", f.ScrollWidth, f.InnerWidth, f.ClientWidth)
	if len(f.Wide) > 0 {
		s += "; too wide: " + strings.Join(f.Wide, "; ")
	}
	return s
}

// measureFit is the script behind MeasureFit.
const measureFit = `(() => {
	const root = document.documentElement, right = root.clientWidth, wide = [];
	const name = e => {
		const cls = (e.getAttribute("class") || "").trim().split(/\s+/).filter(Boolean);
		return e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + cls.map(c => "." + c).join("");
	};
	for (const e of document.body.querySelectorAll("*")) {
		const r = e.getBoundingClientRect();
		if (r.width === 0 && r.height === 0) continue;
		if (r.right > right + 0.5) {
			wide.push(name(e) + " reaches " + Math.round(r.right) + " px");
		} else if (e instanceof SVGElement && e.ownerSVGElement) {
			const frame = e.ownerSVGElement.getBoundingClientRect();
			if (r.right > frame.right + 0.5 || r.left < frame.left - 0.5) {
				wide.push(name(e) + " (" + (e.textContent || "").slice(0, 30) + ") sticks out of its drawing");
			}
		} else if (!(e instanceof SVGElement) && getComputedStyle(e).overflowX !== "visible" &&
			e.scrollWidth > e.clientWidth + 1) {
			wide.push(name(e) + " holds " + e.scrollWidth + " px in " + e.clientWidth);
		}
	}
	return {scrollWidth: root.scrollWidth, clientWidth: right, innerWidth: innerWidth, wide: wide.slice(0, 12)};
})()`

// MeasureFit measures how the page a tab shows fits its window across.
func MeasureFit(t testing.TB, tab context.Context) Fit {
	t.Helper()
	f, err := chromedp.Run(tab, chromedp.Evaluate[Fit](measureFit))
	if err != nil {
		t.Fatalf("browser: measure the page's width: %v", err)
	}
	return f
}
