package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

// WriteHTML writes the report as one self-contained page: the run's
// settings, charts of throughput, latency percentiles, outcomes and stock
// per strategy (inline SVG, two abreast, scaled to the window), and the
// table in two parts (answers and stock, latency), a third with the
// promises when a run had 202s, and over a catalogue a small table of the
// hottest products of each run, within a window 1280 px wide. It loads
// nothing from anywhere, so it works offline.
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
		return fmt.Errorf("report: write html: %w", err)
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
		throughput = append(throughput, series{"201s per second until sold out (or over the run)", "#3a9a5b", r.pick(func(res Result) float64 { return res.SellRate })})
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
	success := func(f func(Latency) time.Duration) []float64 {
		return r.pick(func(res Result) float64 { return float64(f(successLatency(res))) / float64(time.Millisecond) })
	}
	return []series{
		{"201 p50", "#9fd4ae", success(func(l Latency) time.Duration { return l.P50 })},
		{"201 p99", "#3a9a5b", success(func(l Latency) time.Duration { return l.P99 })},
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
		htmlColumn{"201/s until sold out (or over the run)", sellRateCell},
		htmlColumn{"sold out at", soldOutCell},
		htmlColumn{"final stock", audit(0)},
		htmlColumn{"units sold", audit(1)},
		htmlColumn{"oversold", audit(2)},
	)
	latency := func(outcome string, f func(Latency) time.Duration) func(Result) string {
		return func(res Result) string { return dur(f(res.LatencyByOutcome[outcome])) }
	}
	success := func(f func(Latency) time.Duration) func(Result) string {
		return func(res Result) string { return dur(f(successLatency(res))) }
	}
	p50 := func(l Latency) time.Duration { return l.P50 }
	p99 := func(l Latency) time.Duration { return l.P99 }
	top := func(l Latency) time.Duration { return l.Max }
	latencies := []htmlColumn{
		{"201 p50", success(p50)}, {"201 p99", success(p99)},
		{"201 max", success(top)}, {"sold_out p50", latency(OutcomeSoldOut, p50)},
		{"sold_out p99", latency(OutcomeSoldOut, p99)}, {"sold_out max", latency(OutcomeSoldOut, top)},
		{"all p99", func(res Result) string { return dur(res.Latency.P99) }},
	}
	tables := []htmlTable{r.htmlTable("Answers and stock", answers, true), r.htmlTable("Latency", latencies, false)}
	if r.hasPromises() {
		tables = append(tables, r.htmlTable("Promises (202s) and their orders", promiseColumns(), false))
	}
	return tables
}

// promiseColumns are the columns of the page's table of promises: what
// became of each run's 202s, and the write lag of those kept.
func promiseColumns() []htmlColumn {
	cell := func(f func(*Promises) string) func(Result) string {
		return func(res Result) string {
			if res.Promises == nil {
				return "-"
			}
			return f(res.Promises)
		}
	}
	return []htmlColumn{
		{"made", cell(func(p *Promises) string { return itoa(p.Made) })},
		{"kept", cell(func(p *Promises) string { return itoa(p.Kept) })},
		{"failed", cell(func(p *Promises) string { return itoa(p.Failed) })},
		{"lost", cell(func(p *Promises) string { return itoa(p.Lost) })},
		{"still pending", cell(func(p *Promises) string { return itoa(p.Pending) })},
		{"drain", cell(func(p *Promises) string { return durOrZero(p.Drain) })},
		{"write lag p50", cell(func(p *Promises) string { return dur(p.WriteLag.P50) })},
		{"write lag p99", cell(func(p *Promises) string { return dur(p.WriteLag.P99) })},
	}
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

const (
	chartLabelW = 110
	chartBarW   = 380
	chartValueW = 80
	chartBarH   = 13
	chartGap    = 10
)

// legendRowH is the height of a row of a legend.
const legendRowH = 16

//go:embed report.html
var pageHTML string

// pageTemplate is the report's page (report.html).
var pageTemplate = template.Must(template.New("report").Parse(pageHTML))

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
