package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/loadtest/client"
)

// adminInFlight is the most admin calls (creations, resets, audits) the
// driver keeps in flight over a catalogue.
const adminInFlight = 16

// CatalogueReport is a Report with, for a run over a catalogue
// (Config.Products), the catalogue's own figures: per run its hottest
// products and the products whose audit broke the invariant. Its
// WriteTable, WriteWideTable and WriteJSON show them; the Report's own
// show the catalogue as one product, its audit the sum of theirs.
type CatalogueReport struct {
	*Report
	// Catalogue is nil for a run of one product.
	Catalogue *Catalogue `json:"catalogue,omitempty"`
}

// Catalogue is what the runs over a catalogue saw product by product.
type Catalogue struct {
	// Zipf is the exponent of the law that picked each request's product.
	Zipf float64 `json:"zipf"`
	// Products are the catalogue's products, the hottest by the law first.
	Products []CatalogueProduct `json:"products"`
	// Runs has one entry per Report.Results, in the same order.
	Runs []CatalogueRun `json:"runs"`
}

// CatalogueProduct is one product of a catalogue.
type CatalogueProduct struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// CatalogueRun is one run over a catalogue.
type CatalogueRun struct {
	Strategy string `json:"strategy"`
	// SellRate and P99 are the run's (Result.SellRate, and the p99 latency
	// of its 201s).
	SellRate float64       `json:"sell_rate"`
	P99      time.Duration `json:"p99_ns"`
	// SoldOutProducts counts the products whose audit found no stock left.
	SoldOutProducts int `json:"sold_out_products"`
	// Hottest are the products that drew the most requests, at most five.
	Hottest []HotProduct `json:"hottest"`
	// Broken are the products whose audit broke the stock invariant or
	// disagrees with the driver's count of their 201s.
	Broken []ProductAudit `json:"broken,omitempty"`
}

// HotProduct is one of the hottest products of a run: its requests (the
// warmup's left out), their share of the run's, and its 201s.
type HotProduct struct {
	Rank      int     `json:"rank"`
	ProductID int64   `json:"product_id"`
	Name      string  `json:"name"`
	Requests  int     `json:"requests"`
	Share     float64 `json:"share"`
	Created   int     `json:"created"`
}

// ProductAudit is a product's audit after a run, with the 201s the driver
// saw of it (the warmup's included).
type ProductAudit struct {
	Name    string `json:"name"`
	Audit   Audit  `json:"audit"`
	Created int    `json:"created"`
}

// RunCatalogue is Run, with the figures of a catalogue run kept
// (Config.Products); Run leaves them out.
func RunCatalogue(ctx context.Context, cfg Config) (*CatalogueReport, error) {
	return run(ctx, cfg)
}

// WriteTable prints the report as Report.WriteTable does, with a HOTTEST
// block for a catalogue.
func (r *CatalogueReport) WriteTable(w io.Writer) error { return r.writeTable(w, false, r.Catalogue) }

// WriteWideTable prints the report as Report.WriteWideTable does, with a
// HOTTEST block for a catalogue.
func (r *CatalogueReport) WriteWideTable(w io.Writer) error {
	return r.writeTable(w, true, r.Catalogue)
}

// WriteJSON writes the report as Report.WriteJSON does, with the
// catalogue under "catalogue".
func (r *CatalogueReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("driver: write json: %w", err)
	}
	return nil
}

// Failures are the Report's, and for every strategy marked safe each
// product of the catalogue that broke the invariant, named.
func (r *CatalogueReport) Failures() []string {
	out := r.Report.Failures()
	if r.Catalogue == nil {
		return out
	}
	for i, run := range r.Catalogue.Runs {
		if i >= len(r.Results) || !r.Results[i].Safe {
			continue
		}
		for _, b := range run.Broken {
			out = append(out, r.Results[i].name()+": "+b.String())
		}
	}
	return out
}

// String says how the product broke the invariant, for a person.
func (p ProductAudit) String() string {
	a := p.Audit
	s := fmt.Sprintf("product %s (id %d): initial stock %d, final stock %d, units sold %d, oversold %d, consistent %t",
		p.Name, a.ProductID, a.InitialStock, a.Stock, a.UnitsSold, a.OversoldUnits, a.Consistent)
	if a.Orders != int64(p.Created) {
		s += fmt.Sprintf("; %d orders, the driver saw %d 201s", a.Orders, p.Created)
	}
	return s
}

// catalogueNames are the names of a catalogue of n products.
func catalogueNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + strconv.Itoa(i+1)
	}
	return out
}

// productsNamed returns a product of each name: the first of that name the
// product list gives (the lowest id), or a new one of stock units, created
// adminInFlight at a time.
func productsNamed(ctx context.Context, admin *client.Client, names []string, stock int64) ([]client.Product, error) {
	listed, err := admin.Products(ctx)
	if err != nil {
		return nil, fmt.Errorf("driver: list the products: %w", err)
	}
	byName := make(map[string]client.Product, len(listed))
	for _, p := range listed {
		if old, ok := byName[p.Name]; !ok || p.ID < old.ID {
			byName[p.Name] = p
		}
	}
	out := make([]client.Product, len(names))
	err = forEach(ctx, len(names), func(ctx context.Context, k int) error {
		if p, ok := byName[names[k]]; ok {
			out[k] = p
			return nil
		}
		p, err := admin.CreateProduct(ctx, names[k], stock)
		if err != nil {
			return fmt.Errorf("create product %s: %w", names[k], err)
		}
		out[k] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("driver: %w", err)
	}
	return out, nil
}

// forEach calls do for 0 to n-1, adminInFlight at a time, and returns the
// first error; the calls still to start are not made after it.
func forEach(ctx context.Context, n int, do func(ctx context.Context, k int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(adminInFlight)
	for k := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return do(ctx, k) })
	}
	return g.Wait()
}

// resetAll sets the stock of every product to stock, adminInFlight at a
// time.
func resetAll(ctx context.Context, admin *client.Client, products []client.Product, stock int64) error {
	return forEach(ctx, len(products), func(ctx context.Context, k int) error {
		if _, err := admin.SetStock(ctx, products[k].ID, stock); err != nil {
			return fmt.Errorf("reset the stock of product %d: %w", products[k].ID, err)
		}
		return nil
	})
}

// auditAll reads the audit of every product, adminInFlight at a time.
func auditAll(ctx context.Context, admin *client.Client, products []client.Product) ([]Audit, error) {
	out := make([]Audit, len(products))
	err := forEach(ctx, len(products), func(ctx context.Context, k int) error {
		a, err := admin.Audit(ctx, products[k].ID)
		if err != nil {
			return err
		}
		out[k] = a
		return nil
	})
	return out, err
}

// sumAudits is the audit of a catalogue: the sum of its products' figures,
// consistent when every one is; its product id is 0 (or that of its only
// product).
func sumAudits(audits []Audit) Audit {
	if len(audits) == 1 {
		return audits[0]
	}
	sum := Audit{Consistent: true}
	for _, a := range audits {
		sum.InitialStock += a.InitialStock
		sum.Stock += a.Stock
		sum.Orders += a.Orders
		sum.UnitsSold += a.UnitsSold
		sum.OversoldUnits += a.OversoldUnits
		sum.Consistent = sum.Consistent && a.Consistent
	}
	return sum
}

// draw picks each request's product from a hash of its index, by a Zipf
// law: product k (from 0) with a probability in proportion to
// 1/(k+1)^s. The history, the counters and the request agree on a
// request's product without sharing a random source.
type draw struct {
	cdf []float64 // cdf[k]: the probability of a product up to k; the last is 1
}

// newDraw is the law over n products of exponent s >= 0; nil (always
// product 0) for one product.
func newDraw(n int, s float64) *draw {
	if n <= 1 {
		return nil
	}
	cdf := make([]float64, n)
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(float64(k+1), -s)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	cdf[n-1] = 1
	return &draw{cdf: cdf}
}

// pick is the product of request i.
func (d *draw) pick(i int) int {
	if d == nil {
		return 0
	}
	u := unit(uint64(i))
	k := sort.Search(len(d.cdf), func(k int) bool { return d.cdf[k] > u })
	return min(k, len(d.cdf)-1)
}

// unit hashes x (SplitMix64) to a number in [0, 1).
func unit(x uint64) float64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// productTally counts one product's answers in a run.
type productTally struct {
	requests, created         int64 // measured
	warmRequests, warmCreated int64 // of the warmup
}

// catalogueRun sums up one run over the products: its hottest, the sold
// out, the broken (audits may be nil: not read).
func catalogueRun(res Result, products []client.Product, counts []productTally, audits []Audit) CatalogueRun {
	run := CatalogueRun{Strategy: res.Strategy, SellRate: res.SellRate, P99: res.LatencyByOutcome[OutcomeCreated].P99,
		Hottest: hottest(products, counts)}
	for k, a := range audits {
		if a.Stock <= 0 {
			run.SoldOutProducts++
		}
		made := counts[k].created + counts[k].warmCreated
		if !a.Held() || a.Orders != made {
			run.Broken = append(run.Broken, ProductAudit{Name: products[k].Name, Audit: a, Created: int(made)})
		}
	}
	return run
}

// hottest are the products with the most requests, at most hottestShown,
// the first of the catalogue first among equals.
func hottest(products []client.Product, counts []productTally) []HotProduct {
	order := make([]int, len(products))
	var total int64
	for k := range order {
		order[k] = k
		total += counts[k].requests
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return int(min(1, max(-1, counts[b].requests-counts[a].requests)))
	})
	out := make([]HotProduct, 0, hottestShown)
	for rank, k := range order[:min(len(order), hottestShown)] {
		h := HotProduct{Rank: rank + 1, ProductID: products[k].ID, Name: products[k].Name,
			Requests: int(counts[k].requests), Created: int(counts[k].created)}
		if total > 0 {
			h.Share = float64(counts[k].requests) / float64(total)
		}
		out = append(out, h)
	}
	return out
}

// unsold are the units left on the products whose demand in the run (its
// requests times quantity, the warmup's included) exceeded the stock they
// began with; nil when none's did.
func unsold(before, after []Audit, counts []productTally, quantity int64) *int64 {
	var left int64
	over := false
	for k := range before {
		if (counts[k].requests+counts[k].warmRequests)*quantity > before[k].Stock {
			over = true
			left += max(0, after[k].Stock)
		}
	}
	if !over {
		return nil
	}
	return &left
}

// catalogueHeader describes the catalogue in the table's header.
func (c *Catalogue) header() string {
	n := len(c.Products)
	if n == 0 {
		return "an empty catalogue"
	}
	lo, hi := c.Products[0].ID, c.Products[0].ID
	for _, p := range c.Products {
		lo, hi = min(lo, p.ID), max(hi, p.ID)
	}
	law := "uniformly"
	if c.Zipf > 0 {
		law = "by a Zipf law of exponent " + strconv.FormatFloat(c.Zipf, 'g', -1, 64)
	}
	return fmt.Sprintf("a catalogue of %s, %s to %s (ids %d to %d), each request's product drawn %s",
		plural(n, "product"), c.Products[0].Name, c.Products[n-1].Name, lo, hi, law)
}

// hottestRows is the HOTTEST block: per run its hottest products.
func (c *Catalogue) hottestRows(results []Result) [][]string {
	rows := [][]string{{"HOTTEST", "RANK", "PRODUCT", "ID", "REQUESTS", "SHARE", "201"}}
	for i, run := range c.Runs {
		name := run.Strategy
		if i < len(results) {
			name = strategyCell(results[i])
		}
		for _, h := range run.Hottest {
			rows = append(rows, []string{name, itoa(h.Rank), h.Name, strconv.FormatInt(h.ProductID, 10), itoa(h.Requests),
				strconv.FormatFloat(100*h.Share, 'f', 1, 64) + "%", itoa(h.Created)})
		}
	}
	return rows
}

// notes are the lines under the table about the catalogue's runs.
func (c *Catalogue) notes(results []Result) []string {
	var out []string
	for i, run := range c.Runs {
		name := run.Strategy
		if i < len(results) {
			name = strategyCell(results[i])
		}
		line := fmt.Sprintf("%s: over %s: 201/s %s, 201 p99 %s, %d sold out", name, plural(len(c.Products), "product"),
			sellRate(run.SellRate), dur(run.P99), run.SoldOutProducts)
		if n := len(run.Broken); n > 0 {
			names := make([]string, 0, min(n, hottestShown))
			for _, b := range run.Broken[:min(n, hottestShown)] {
				names = append(names, fmt.Sprintf("%s (oversold %d, stock %d)", b.Name, b.Audit.OversoldUnits, b.Audit.Stock))
			}
			more := ""
			if n > hottestShown {
				more = fmt.Sprintf(" and %d more", n-hottestShown)
			}
			line += fmt.Sprintf("; the invariant broke on %s%s", strings.Join(names, ", "), more)
		}
		out = append(out, line)
	}
	return out
}

func sellRate(v float64) string {
	if v <= 0 {
		return "-"
	}
	return rate(v)
}
