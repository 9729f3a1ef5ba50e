package report

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// The charts of the report's page: a handful of bars, lines and a legend,
// drawn as inline SVG (the package comment says why by hand).

// series is one kind of bar in a chart, a value per row.
type series struct {
	Name   string
	Color  string
	Values []float64
}

// barChart draws horizontal bars: a group per label, a bar per series, on
// one linear scale.
func barChart(title string, labels []string, ss []series, format func(float64) string) template.HTML {
	top := 28
	groupH := len(ss)*chartBarH + chartGap
	width := chartLabelW + chartBarW + chartValueW
	height := top + len(labels)*groupH + 24 + legendExtra(ss, chartLabelW, width)
	var peak float64
	for _, s := range ss {
		for _, v := range s.Values {
			peak = max(peak, v)
		}
	}
	var b strings.Builder
	openChart(&b, width, height, title)
	for i, label := range labels {
		y := top + i*groupH
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="label" text-anchor="end">%s</text>`,
			chartLabelW-8, y+len(ss)*chartBarH/2+4, esc(label))
		for j, s := range ss {
			v := s.Values[i]
			w := 0.0
			if peak > 0 {
				w = v / peak * chartBarW
			}
			by := y + j*chartBarH
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %s</title></rect>`,
				chartLabelW, by, w, chartBarH-2, s.Color, esc(label), esc(s.Name), esc(format(v)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="value">%s</text>`, float64(chartLabelW)+w+4, by+chartBarH-3, esc(format(v)))
		}
	}
	legendAt(&b, ss, chartLabelW, width, height-8-legendExtra(ss, chartLabelW, width))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from escaped parts only
}

// outcomeChart draws one 100% stacked bar per result: how its answers
// split among the outcomes.
func outcomeChart(results []Result, labels []string) template.HTML {
	kinds := []series{
		{OutcomeCreated, "#3a9a5b", nil}, {OutcomeOK, "#3a9a5b", nil}, {OutcomeSoldOut, "#8fb8de", nil},
		{OutcomeLimitExceeded, "#b39ddb", nil}, {OutcomeLockTimeout, "#e6a23c", nil}, {OutcomeLockLost, "#d35400", nil},
		{OutcomeOther4xx, "#95a5a6", nil}, {Outcome5xx, "#c0392b", nil}, {OutcomeTransport, "#000000", nil},
		{OutcomeOther, "#7f8c8d", nil},
	}
	var used []series
	for _, k := range kinds {
		for _, res := range results {
			if res.Outcomes[k.Name] > 0 {
				used = append(used, k)
				break
			}
		}
	}
	title := "Answers by outcome (share of all requests)"
	top, rowH := 28, chartBarH+chartGap
	width := chartLabelW + chartBarW + chartValueW
	height := top + len(results)*rowH + 24 + legendExtra(used, chartLabelW, width)
	var b strings.Builder
	openChart(&b, width, height, title)
	for i, res := range results {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="label" text-anchor="end">%s</text>`, chartLabelW-8, y+chartBarH-3, esc(labels[i]))
		x := float64(chartLabelW)
		for _, k := range used {
			n := res.Outcomes[k.Name]
			if n == 0 || res.Requests == 0 {
				continue
			}
			w := float64(n) / float64(res.Requests) * chartBarW
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %d of %d</title></rect>`,
				x, y, w, chartBarH, k.Color, esc(labels[i]), esc(k.Name), n, res.Requests)
			x += w
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="value">%d</text>`, x+4, y+chartBarH-3, res.Requests)
	}
	legendAt(&b, used, chartLabelW, width, height-8-legendExtra(used, chartLabelW, width))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from escaped parts only
}

// legendRows splits a legend of ss from x into rows that end before
// right, the width of the chart.
func legendRows(ss []series, x, right int) [][]series {
	var rows [][]series
	at := right
	for _, s := range ss {
		w := 24 + 7*len(s.Name)
		if at+w > right && (at > x || len(rows) == 0) {
			rows, at = append(rows, nil), x
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], s)
		at += w
	}
	return rows
}

// legendExtra is the height a legend of ss from x needs beyond one row.
func legendExtra(ss []series, x, right int) int {
	return max(0, len(legendRows(ss, x, right))-1) * legendRowH
}

// legendAt writes a legend of ss from x, its first row at y, in as many
// rows as the chart's width (right) needs.
func legendAt(b *strings.Builder, ss []series, x, right, y int) {
	for _, row := range legendRows(ss, x, right) {
		at := x
		for _, s := range row {
			fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="legend">%s</text>`,
				at, y-9, s.Color, at+14, y, esc(s.Name))
			at += 24 + 7*len(s.Name)
		}
		y += legendRowH
	}
}

func esc(s string) string { return template.HTMLEscapeString(s) }

// openChart writes the opening of a chart: its svg element and its title.
func openChart(b *strings.Builder, width, height int, title string) {
	fmt.Fprintf(b, `<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		width, height, width, height, esc(title))
	fmt.Fprintf(b, `<text x="0" y="16" class="title">%s</text>`, esc(title))
}

// palette colours the lines of a time chart, one per strategy.
var palette = []string{"#2f4f86", "#3a9a5b", "#c0392b", "#e6a23c", "#8e44ad", "#16a085", "#7f8c8d", "#d35400"}

// line is one strategy's values over the seconds of its run.
type line struct {
	Name  string
	Color string
	X, Y  []float64
}

// lineChart draws each line over one pair of linear scales: seconds
// across, values up (0 always shown).
func lineChart(title string, lines []line, format func(float64) string) template.HTML {
	const left, plotW, plotH, top = 70, 480, 180, 28
	xMin, xMax, yMin, yMax := math.Inf(1), math.Inf(-1), 0.0, 0.0
	for _, l := range lines {
		for i := range l.X {
			xMin, xMax = min(xMin, l.X[i]), max(xMax, l.X[i]+1)
			yMin, yMax = min(yMin, l.Y[i]), max(yMax, l.Y[i])
		}
	}
	if math.IsInf(xMin, 0) {
		xMin, xMax = 0, 1
	}
	if yMax == yMin {
		yMax = yMin + 1
	}
	px := func(x float64) float64 { return left + (x-xMin)/(xMax-xMin)*plotW }
	py := func(y float64) float64 { return top + (yMax-y)/(yMax-yMin)*plotH }
	ss := make([]series, len(lines))
	for i, l := range lines {
		ss[i] = series{Name: l.Name, Color: l.Color}
	}
	width := left + plotW + 20
	height := top + plotH + 44 + legendExtra(ss, left, width)
	var b strings.Builder
	openChart(&b, width, height, title)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>`, left, top, plotW, plotH)
	for _, v := range []float64{yMin, 0, yMax} {
		if v == 0 && yMin == 0 && v != yMax {
			continue // the bottom line already says 0
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="value" text-anchor="end">%s</text>`, left-4, py(v)+4, esc(format(v)))
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>`, left, left+plotW, py(v), py(v))
	}
	for _, x := range []float64{xMin, xMax} {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="value" text-anchor="middle">%ss</text>`, px(x), top+plotH+14, esc(strconv.FormatFloat(x, 'f', 0, 64)))
	}
	for _, l := range lines {
		if len(l.X) == 0 {
			continue
		}
		var pts strings.Builder
		for i := range l.X {
			// A second's value is drawn across the second.
			fmt.Fprintf(&pts, "%.1f,%.1f %.1f,%.1f ", px(l.X[i]), py(l.Y[i]), px(l.X[i]+1), py(l.Y[i]))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"><title>%s</title></polyline>`,
			l.Color, strings.TrimSpace(pts.String()), esc(l.Name))
	}
	legendAt(&b, ss, left, width, top+plotH+36)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from escaped parts only
}
