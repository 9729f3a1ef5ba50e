package driver

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

// WriteHTML writes the report as one self-contained page: the run's
// settings, charts of throughput, latency percentiles, outcomes and stock
// per strategy (inline SVG), and the table. It loads nothing from
// anywhere, so it works offline.
func (r *Report) WriteHTML(w io.Writer) error {
	raw := len(r.Results) > 0 && r.Results[0].Raw
	labels := make([]string, len(r.Results))
	for i, res := range r.Results {
		labels[i] = strategyCell(res)
	}
	pick := func(f func(Result) float64) []float64 {
		out := make([]float64, len(r.Results))
		for i, res := range r.Results {
			out[i] = f(res)
		}
		return out
	}
	ms := func(f func(Latency) time.Duration) []float64 {
		return pick(func(res Result) float64 { return float64(f(res.Latency)) / float64(time.Millisecond) })
	}
	perSecond := func(v float64) string { return rate(v) + "/s" }
	msLabel := func(v float64) string { return dur(time.Duration(v * float64(time.Millisecond))) }

	var charts []template.HTML
	throughput := []series{{"all answers", "#5b7fb5", pick(func(res Result) float64 { return res.Throughput })}}
	if !raw {
		throughput = append(throughput, series{"201 created", "#3a9a5b", pick(func(res Result) float64 { return res.SuccessThroughput })})
	}
	charts = append(charts,
		barChart("Throughput (per second of the whole run)", labels, throughput, perSecond),
		barChart("Latency percentiles", labels, []series{
			{"p50", "#8fb8de", ms(func(l Latency) time.Duration { return l.P50 })},
			{"p95", "#5b7fb5", ms(func(l Latency) time.Duration { return l.P95 })},
			{"p99", "#2f4f86", ms(func(l Latency) time.Duration { return l.P99 })},
			{"p99.9", "#1b2b4a", ms(func(l Latency) time.Duration { return l.P999 })},
		}, msLabel),
		outcomeChart(r.Results, labels),
	)
	if !raw {
		charts = append(charts, barChart("Stock after the run (the server's audit)", labels, []series{
			{"units sold", "#3a9a5b", pick(func(res Result) float64 { return float64(res.Audit.UnitsSold) })},
			{"initial stock", "#b0b0b0", pick(func(res Result) float64 { return float64(res.Audit.InitialStock) })},
			{"oversold", "#c0392b", pick(func(res Result) float64 { return float64(res.Audit.OversoldUnits) })},
		}, func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }))
	}

	var table strings.Builder
	if err := r.WriteTable(&table); err != nil {
		return err
	}
	data := struct {
		R        *Report
		Raw      bool
		Charts   []template.HTML
		Rows     []htmlRow
		Failures []string
		Text     string
	}{R: r, Raw: raw, Charts: charts, Failures: r.Failures(), Text: table.String()}
	for _, res := range r.Results {
		data.Rows = append(data.Rows, htmlRowOf(res))
	}
	if err := pageTemplate.Execute(w, data); err != nil {
		return fmt.Errorf("driver: write html: %w", err)
	}
	return nil
}

type htmlRow struct {
	Strategy, Safe, Other                string
	Requests, OK, SoldOut, LockTimeout   int
	ReqPerSec, OKPerSec                  string
	P50, P95, P99, P999, Max, SoldOutAt  string
	Stock, Sold, Oversold, Verdict, Kind string
	Description                          string
}

func htmlRowOf(res Result) htmlRow {
	l := res.Latency
	row := htmlRow{
		Strategy: strategyCell(res), Safe: yesNo(res.Safe), Other: otherCell(res),
		Requests: res.Requests, OK: res.Successes, SoldOut: res.Outcomes[OutcomeSoldOut],
		LockTimeout: res.Outcomes[OutcomeLockTimeout],
		ReqPerSec:   rate(res.Throughput), OKPerSec: rate(res.SuccessThroughput),
		P50: dur(l.P50), P95: dur(l.P95), P99: dur(l.P99), P999: dur(l.P999), Max: dur(l.Max),
		SoldOutAt: dur(res.TimeToSoldOut), Stock: "-", Sold: "-", Oversold: "-",
		Verdict: res.Verdict, Description: res.Description, Kind: "good",
	}
	if res.Audited {
		row.Stock = strconv.FormatInt(res.Audit.Stock, 10)
		row.Sold = strconv.FormatInt(res.Audit.UnitsSold, 10)
		row.Oversold = strconv.FormatInt(res.Audit.OversoldUnits, 10)
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
	chartLabelW = 170
	chartBarW   = 460
	chartValueW = 80
	chartBarH   = 13
	chartGap    = 10
)

// barChart draws horizontal bars: a group per label, a bar per series, on
// one linear scale.
func barChart(title string, labels []string, ss []series, format func(float64) string) template.HTML {
	top := 28
	groupH := len(ss)*chartBarH + chartGap
	height := top + len(labels)*groupH + 24
	width := chartLabelW + chartBarW + chartValueW
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
	legend(&b, ss, height-8)
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
	height := top + len(results)*rowH + 24
	width := chartLabelW + chartBarW + chartValueW
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
	legend(&b, used, height-8)
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from escaped parts only
}

func legend(b *strings.Builder, ss []series, y int) {
	x := chartLabelW
	for _, s := range ss {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" class="legend">%s</text>`,
			x, y-9, s.Color, x+14, y, esc(s.Name))
		x += 24 + 7*len(s.Name)
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
.charts { display: flex; flex-wrap: wrap; gap: 1.5em 2em; }
.chart .title { font-weight: 600; font-size: 14px; }
.chart .label, .chart .value, .chart .legend { font-size: 12px; fill: #333; }
table { border-collapse: collapse; margin: 1.5em 0; font-size: 13px; }
th, td { padding: .3em .6em; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, td.verdict, th.verdict { text-align: left; }
th { background: #f3f3f3; }
tr.good td.verdict { color: #1e7b3c; font-weight: 600; }
tr.expected td.verdict { color: #a66300; font-weight: 600; }
tr.bad td.verdict { color: #b3261e; font-weight: 700; }
.failures { border: 2px solid #b3261e; padding: .5em 1em; color: #b3261e; }
.ok { border: 2px solid #1e7b3c; padding: .5em 1em; color: #1e7b3c; }
dl { font-size: 13px; } dt { font-weight: 600; } dd { margin: 0 0 .5em 1em; color: #444; }
details pre { font-size: 12px; background: #f7f7f7; padding: 1em; overflow-x: auto; }
</style>
</head>
<body>
<h1>seckill load test</h1>
<p class="meta">{{.R.Start.Format "2006-01-02 15:04:05 MST"}} &middot;
{{len .R.Config.URLs}} instance(s): {{range $i, $u := .R.Config.URLs}}{{if $i}}, {{end}}{{$u}}{{end}}<br>
{{if eq .R.Config.Mode "open"}}open loop: {{.R.Config.Rate}} requests/s for {{.R.Config.Duration}} ({{.R.Config.Requests}} in all), at most {{.R.Config.Concurrency}} in flight; latency from the intended send time
{{else}}closed loop: {{.R.Config.Requests}} requests per run, {{.R.Config.Concurrency}} workers{{end}}
{{if not .Raw}}&middot; product {{.R.Config.ProductID}}{{if .R.Config.Stock}}, stock reset to {{.R.Config.Stock}} before each run{{end}}
{{if .R.Config.Hold}}&middot; hold {{.R.Config.Hold}}{{end}}{{if .R.Config.Fencing}} &middot; fencing {{.R.Config.Fencing}}{{end}}{{else}}&middot; raw mode: GET {{.R.Config.Endpoint}}{{end}}<br>
driver: {{.R.Environment.GoVersion}} {{.R.Environment.OS}}/{{.R.Environment.Arch}}, {{.R.Environment.NumCPU}} CPUs, GOMAXPROCS {{.R.Environment.GOMAXPROCS}}</p>
{{if .Failures}}<div class="failures"><strong>FAILED</strong><ul>{{range .Failures}}<li>{{.}}</li>{{end}}</ul></div>
{{else}}<p class="ok">{{if .Raw}}Every run got answers.{{else}}Every strategy marked safe held the stock invariant, and the audit agrees with the driver's count of 201s.{{end}}</p>{{end}}
<div class="charts">
{{range .Charts}}{{.}}
{{end}}</div>
<table>
<thead><tr><th>strategy</th><th>safe</th><th>requests</th><th>ok</th><th>sold_out</th><th>lock_timeout</th><th>other</th><th>req/s</th><th>ok/s</th><th>p50</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th><th>sold out at</th><th>final stock</th><th>units sold</th><th>oversold</th><th class="verdict">verdict</th></tr></thead>
<tbody>
{{range .Rows}}<tr class="{{.Kind}}"><td>{{.Strategy}}</td><td>{{.Safe}}</td><td>{{.Requests}}</td><td>{{.OK}}</td><td>{{.SoldOut}}</td><td>{{.LockTimeout}}</td><td>{{.Other}}</td><td>{{.ReqPerSec}}</td><td>{{.OKPerSec}}</td><td>{{.P50}}</td><td>{{.P95}}</td><td>{{.P99}}</td><td>{{.P999}}</td><td>{{.Max}}</td><td>{{.SoldOutAt}}</td><td>{{.Stock}}</td><td>{{.Sold}}</td><td>{{.Oversold}}</td><td class="verdict">{{.Verdict}}</td></tr>
{{end}}</tbody>
</table>
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
