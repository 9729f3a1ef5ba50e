package driver

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// WriteHTML writes the report as one self-contained page: the run's
// settings, charts of throughput, latency percentiles, outcomes and stock
// per strategy (inline SVG, two abreast, scaled to the window), and the
// table in two parts (answers and stock, latency), and over a catalogue a
// small table of the hottest products of each run, within a window 1280 px
// wide. It loads nothing from anywhere, so it works offline.
func (r *Report) WriteHTML(w io.Writer) error {
	raw := len(r.Results) > 0 && r.Results[0].Raw
	charts := append(r.summaryCharts(raw), r.timeCharts(raw)...)

	var table strings.Builder
	if err := r.WriteTable(&table); err != nil {
		return err
	}
	data := struct {
		R         *Report
		Raw       bool
		Catalogue string
		Charts    []template.HTML
		Tables    []htmlTable
		Hottest   []htmlHottest
		Rows      []htmlRow
		Failures  []string
		Text      string
	}{R: r, Raw: raw, Charts: charts, Tables: r.htmlTables(), Hottest: r.htmlHottest(), Failures: r.Failures(), Text: table.String()}
	if r.Config.Products > 0 {
		data.Catalogue = r.Config.catalogueMeta()
	}
	for _, res := range r.Results {
		data.Rows = append(data.Rows, htmlRowOf(res, nil))
	}
	if err := pageTemplate.Execute(w, data); err != nil {
		return fmt.Errorf("driver: write html: %w", err)
	}
	return nil
}

// summaryCharts are the charts of each strategy's run as a whole:
// throughput, latency, outcomes and (but in the raw mode) the stock.
func (r *Report) summaryCharts(raw bool) []template.HTML {
	labels := make([]string, len(r.Results))
	for i, res := range r.Results {
		labels[i] = strategyCell(res)
	}
	perSecond := func(v float64) string { return rate(v) + "/s" }
	msLabel := func(v float64) string { return dur(time.Duration(v * float64(time.Millisecond))) }
	throughput := []series{{"all answers", "#5b7fb5", r.pick(func(res Result) float64 { return res.Throughput })}}
	if !raw {
		throughput = append(throughput, series{"201s while stock lasted", "#3a9a5b", r.pick(func(res Result) float64 { return res.SellRate })})
	}
	charts := []template.HTML{
		barChart("Throughput (per second)", labels, throughput, perSecond),
		barChart("Latency by outcome", labels, r.latencySeries(raw), msLabel),
		outcomeChart(r.Results, labels),
	}
	if !raw {
		charts = append(charts, barChart("Stock after the run (the server's audit)", labels, []series{
			{"units sold", "#3a9a5b", r.pick(func(res Result) float64 { return float64(res.Audit.UnitsSold) })},
			{"initial stock", "#b0b0b0", r.pick(func(res Result) float64 { return float64(res.Audit.InitialStock) })},
			{"oversold", "#c0392b", r.pick(func(res Result) float64 { return float64(res.Audit.OversoldUnits) })},
		}, func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }))
	}
	return charts
}

// latencySeries are the latency chart's bars, in milliseconds: p50, p99
// and max of every answer in the raw mode, else p50 and p99 of the 201s
// and of the sold_outs.
func (r *Report) latencySeries(raw bool) []series {
	ms := func(f func(Latency) time.Duration) []float64 {
		return r.pick(func(res Result) float64 { return float64(f(res.Latency)) / float64(time.Millisecond) })
	}
	if raw {
		return []series{
			{"p50", "#8fb8de", ms(func(l Latency) time.Duration { return l.P50 })},
			{"p99", "#2f4f86", ms(func(l Latency) time.Duration { return l.P99 })},
			{"max", "#1b2b4a", ms(func(l Latency) time.Duration { return l.Max })},
		}
	}
	of := func(outcome string, f func(Latency) time.Duration) []float64 {
		return r.pick(func(res Result) float64 { return float64(f(res.LatencyByOutcome[outcome])) / float64(time.Millisecond) })
	}
	return []series{
		{"201 p50", "#9fd4ae", of(OutcomeCreated, func(l Latency) time.Duration { return l.P50 })},
		{"201 p99", "#3a9a5b", of(OutcomeCreated, func(l Latency) time.Duration { return l.P99 })},
		{"sold_out p50", "#8fb8de", of(OutcomeSoldOut, func(l Latency) time.Duration { return l.P50 })},
		{"sold_out p99", "#2f4f86", of(OutcomeSoldOut, func(l Latency) time.Duration { return l.P99 })},
	}
}

// pick is f of each result, in order.
func (r *Report) pick(f func(Result) float64) []float64 {
	out := make([]float64, len(r.Results))
	for i, res := range r.Results {
		out[i] = f(res)
	}
	return out
}

// htmlHottest is the small table of a run's hottest products.
type htmlHottest struct {
	Strategy, Note, Kind string
	Rows                 [][]string
}

// htmlHottest are the tables of each run's hottest products; none for a
// run of one product.
func (r *Report) htmlHottest() []htmlHottest {
	var out []htmlHottest
	for _, res := range r.Results {
		cat := res.Catalogue
		if cat == nil {
			continue
		}
		h := htmlHottest{Strategy: strategyCell(res), Kind: htmlRowOf(res, nil).Kind, Note: fmt.Sprintf("%d of %s sold out%s",
			cat.SoldOutProducts, plural(r.Config.catalogueSize(), "product"), cat.brokenNote())}
		for _, p := range cat.Hottest {
			h.Rows = append(h.Rows, []string{itoa(p.Rank), p.Name, strconv.FormatInt(p.ProductID, 10), itoa(p.Requests),
				share(p.Share), itoa(p.Created)})
		}
		out = append(out, h)
	}
	return out
}

// catalogueMeta describes the catalogue in the page's header: "5 products
// (loadtest-1 to loadtest-5), Zipf 1.2".
func (c Settings) catalogueMeta() string {
	s := plural(c.Products, "product")
	if n := len(c.Catalogue); n > 0 {
		s += " (" + c.Catalogue[0].Name
		if n > 1 {
			s += " to " + c.Catalogue[n-1].Name
		}
		s += ")"
	}
	s += ", Zipf " + strconv.FormatFloat(c.Zipf, 'g', -1, 64)
	if c.Zipf == 0 {
		s += " (uniform)"
	}
	return s
}

type htmlRow struct {
	Strategy, Safe, Description, Verdict, Kind string
	Cells                                      []string
}

// htmlTable is one table of the page: its heads, a row per result, and
// the verdict last when Verdict is set.
type htmlTable struct {
	Title   string
	Columns []string
	Rows    []htmlRow
	Verdict bool
}

// htmlColumn is a column of the page's tables: its head and its cell.
type htmlColumn struct {
	Head string
	Cell func(Result) string
}

// htmlTables are the page's tables, each within a window 1280 px wide:
// the answers and the stock, then the latencies. The dropped column is
// there only in the open loop, the only one that drops requests.
func (r *Report) htmlTables() []htmlTable {
	audit := func(i int) func(Result) string {
		return func(res Result) string {
			stock, sold, oversold := auditCells(res)
			return [3]string{stock, sold, oversold}[i]
		}
	}
	answers := []htmlColumn{
		{"safe", func(res Result) string { return yesNo(res.Safe) }},
		{"requests", func(res Result) string { return itoa(res.Requests) }},
		{"201", func(res Result) string { return itoa(res.Successes) }},
		{"sold_out", func(res Result) string { return itoa(res.Outcomes[OutcomeSoldOut]) }},
		{"lock_timeout", func(res Result) string { return itoa(res.Outcomes[OutcomeLockTimeout]) }},
		{"other", func(res Result) string { return itoa(otherCount(res)) }},
	}
	if r.Config.Mode == "open" {
		answers = append(answers, htmlColumn{"dropped", func(res Result) string { return itoa(res.Dropped) }})
	}
	answers = append(answers,
		htmlColumn{"req/s", func(res Result) string { return rate(res.Throughput) }},
		htmlColumn{"201/s while stock lasted", sellRateCell},
		htmlColumn{"sold out at", soldOutCell},
		htmlColumn{"final stock", audit(0)},
		htmlColumn{"units sold", audit(1)},
		htmlColumn{"oversold", audit(2)},
	)
	latency := func(outcome string, f func(Latency) time.Duration) func(Result) string {
		return func(res Result) string { return dur(f(res.LatencyByOutcome[outcome])) }
	}
	p50 := func(l Latency) time.Duration { return l.P50 }
	p99 := func(l Latency) time.Duration { return l.P99 }
	top := func(l Latency) time.Duration { return l.Max }
	latencies := []htmlColumn{
		{"201 p50", latency(OutcomeCreated, p50)}, {"201 p99", latency(OutcomeCreated, p99)},
		{"201 max", latency(OutcomeCreated, top)}, {"sold_out p50", latency(OutcomeSoldOut, p50)},
		{"sold_out p99", latency(OutcomeSoldOut, p99)}, {"sold_out max", latency(OutcomeSoldOut, top)},
		{"all p99", func(res Result) string { return dur(res.Latency.P99) }},
	}
	return []htmlTable{r.htmlTable("Answers and stock", answers, true), r.htmlTable("Latency", latencies, false)}
}

// htmlTable makes a table of columns, a row per result.
func (r *Report) htmlTable(title string, columns []htmlColumn, verdict bool) htmlTable {
	t := htmlTable{Title: title, Verdict: verdict}
	for _, c := range columns {
		t.Columns = append(t.Columns, c.Head)
	}
	for _, res := range r.Results {
		t.Rows = append(t.Rows, htmlRowOf(res, columns))
	}
	return t
}

func htmlRowOf(res Result, columns []htmlColumn) htmlRow {
	row := htmlRow{
		Strategy: strategyCell(res), Safe: yesNo(res.Safe), Verdict: res.Verdict, Description: res.Description, Kind: "good",
	}
	for _, c := range columns {
		row.Cells = append(row.Cells, c.Cell(res))
	}
	switch {
	case strings.HasPrefix(res.Verdict, "BROKEN"):
		row.Kind = "bad"
	case strings.Contains(res.Verdict, "expected") || !res.Safe:
		row.Kind = "expected"
	}
	return row
}

// series is one kind of bar in a chart, a value per row.
type series struct {
	Name   string
	Color  string
	Values []float64
}

const (
	chartLabelW = 110
	chartBarW   = 380
	chartValueW = 80
	chartBarH   = 13
	chartGap    = 10
)

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

// legendRowH is the height of a row of a legend.
const legendRowH = 16

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

var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>seckill load test {{.R.Start.Format "2006-01-02 15:04:05"}}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: .2em; }
.meta { color: #555; margin: 0 0 1.5em; }
.charts { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 1.5em 2em; }
.chart .title { font-weight: 600; font-size: 14px; }
.chart .label, .chart .value, .chart .legend { font-size: 12px; fill: #333; }
.charts > svg { flex: 1 1 560px; max-width: 100%; height: auto; }
h2 { font-size: 1.1em; margin: 1.5em 0 .3em; }
table { border-collapse: collapse; margin: 0 0 1em; font-size: 13px; }
th, td { padding: .3em .6em; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
th { white-space: normal; vertical-align: bottom; max-width: 7em; }
th:first-child, td:first-child, td.verdict, th.verdict { text-align: left; }
td.verdict { white-space: normal; min-width: 10em; }
th { background: #f3f3f3; }
tr.good td.verdict { color: #1e7b3c; font-weight: 600; }
tr.expected td.verdict { color: #a66300; font-weight: 600; }
tr.bad td.verdict { color: #b3261e; font-weight: 700; }
.failures { border: 2px solid #b3261e; padding: .5em 1em; color: #b3261e; }
.ok { border: 2px solid #1e7b3c; padding: .5em 1em; color: #1e7b3c; }
dl { font-size: 13px; } dt { font-weight: 600; } dd { margin: 0 0 .5em 1em; color: #444; }
details pre { font-size: 12px; background: #f7f7f7; padding: 1em; overflow-x: auto; }
.hottest { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 0 2em; }
.hottest table { max-width: 100%; }
.hottest caption { text-align: left; font-weight: 600; padding: .3em 0; }
.hottest caption span { font-weight: normal; color: #444; }
.hottest caption.bad span { color: #b3261e; }
.hottest td:nth-child(2) { text-align: left; white-space: normal; overflow-wrap: anywhere; }
</style>
</head>
<body>
<h1>seckill load test</h1>
<p class="meta">{{.R.Start.Format "2006-01-02 15:04:05 MST"}} &middot;
{{len .R.Config.URLs}} instance(s): {{range $i, $u := .R.Config.URLs}}{{if $i}}, {{end}}{{$u}}{{end}}<br>
{{if eq .R.Config.Mode "open"}}open loop: {{range $i, $r := .R.Config.Rates}}{{if $i}}, {{end}}{{$r}}{{end}} requests/s for {{.R.Config.Duration}} each ({{.R.Config.Requests}} in all), at most {{.R.Config.Concurrency}} in flight; latency from the intended send time
{{else if .R.Config.Requests}}closed loop: {{.R.Config.Requests}} requests per run, {{.R.Config.Concurrency}} workers{{else}}closed loop: {{.R.Config.Duration}} per run, {{.R.Config.Concurrency}} workers{{end}}{{if .R.Config.Warmup}}, after a warmup of {{.R.Config.Warmup}} left out of the figures{{end}}
{{if .Raw}}{{else if .Catalogue}}&middot; a catalogue of {{.Catalogue}}{{if .R.Config.Stock}}, the stock of each reset to {{.R.Config.Stock}} before each run{{end}}
{{else}}&middot; product {{.R.Config.ProductID}}{{if .R.Config.Stock}}, stock reset to {{.R.Config.Stock}} before each run{{end}}{{end}}
{{if not .Raw}}
{{if .R.Config.Hold}}&middot; hold {{.R.Config.Hold}}{{end}}{{if .R.Config.Fencing}} &middot; fencing {{.R.Config.Fencing}}{{end}}{{else}}&middot; raw mode: GET {{.R.Config.Endpoint}}{{end}}<br>
driver: {{.R.Environment.GoVersion}} {{.R.Environment.OS}}/{{.R.Environment.Arch}}, {{.R.Environment.NumCPU}} CPUs, GOMAXPROCS {{.R.Environment.GOMAXPROCS}}</p>
{{if .Failures}}<div class="failures"><strong>FAILED</strong><ul>{{range .Failures}}<li>{{.}}</li>{{end}}</ul></div>
{{else}}<p class="ok">{{if .Raw}}Every run got answers.{{else}}Every strategy marked safe held the stock invariant, and the audit agrees with the driver's count of 201s.{{end}}</p>{{end}}
<div class="charts">
{{range .Charts}}{{.}}
{{end}}</div>
{{range $t := .Tables}}<h2>{{.Title}}</h2>
<table>
<thead><tr><th>strategy</th>{{range .Columns}}<th>{{.}}</th>{{end}}{{if .Verdict}}<th class="verdict">verdict</th>{{end}}</tr></thead>
<tbody>
{{range $row := .Rows}}<tr class="{{.Kind}}"><td>{{.Strategy}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}{{if $t.Verdict}}<td class="verdict">{{$row.Verdict}}</td>{{end}}</tr>
{{end}}</tbody>
</table>
{{end}}
{{if .Hottest}}<h2>Hottest products of each run</h2>
<div class="hottest">
{{range .Hottest}}<table>
<caption class="{{.Kind}}">{{.Strategy}}<br><span>{{.Note}}</span></caption>
<thead><tr><th>rank</th><th>product</th><th>id</th><th>requests</th><th>share</th><th>201</th></tr></thead>
<tbody>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody>
</table>
{{end}}</div>
{{end}}
<dl>
{{range .Rows}}{{if .Description}}<dt>{{.Strategy}}</dt><dd>{{.Description}}</dd>{{end}}{{end}}
</dl>
<details><summary>The table as printed</summary><pre>{{.Text}}</pre></details>
</body>
</html>
`))

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

// timeCharts draws the per-second series: the answers and the 201s per
// second, the p99 of each second, and the stock left.
func (r *Report) timeCharts(raw bool) []template.HTML {
	pick := func(f func(Second) (float64, bool)) []line {
		var out []line
		for i, res := range r.Results {
			l := line{Name: strategyCell(res), Color: palette[i%len(palette)]}
			for _, s := range res.Series {
				if v, ok := f(s); ok {
					l.X, l.Y = append(l.X, float64(s.Second)), append(l.Y, v)
				}
			}
			out = append(out, l)
		}
		return out
	}
	count := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	perSecond := func(v float64) string { return rate(v) + "/s" }
	msLabel := func(v float64) string { return dur(time.Duration(v * float64(time.Millisecond))) }
	charts := []template.HTML{
		lineChart("Answers per second", pick(func(s Second) (float64, bool) { return float64(s.Answers), true }), perSecond),
	}
	if !raw {
		charts = append(charts,
			lineChart("201s per second", pick(func(s Second) (float64, bool) { return float64(s.Created), true }), perSecond))
	}
	charts = append(charts, lineChart("p99 latency of each second's answers", pick(func(s Second) (float64, bool) {
		return float64(s.P99) / float64(time.Millisecond), s.Answers > 0
	}), msLabel))
	if !raw {
		charts = append(charts, lineChart("Stock left (the stock before the run less the 201s so far)",
			pick(func(s Second) (float64, bool) {
				if s.Stock == nil {
					return 0, false
				}
				return float64(*s.Stock), true
			}), count))
	}
	return charts
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
