package driver

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/loadtest/driver/load"
	"github.com/seckill/seckill/loadtest/report"
)

// adminInFlight is the most admin calls (creations, resets, audits) the
// driver keeps in flight over a catalogue.
const adminInFlight = 16

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
func auditAll(ctx context.Context, admin *client.Client, products []client.Product) ([]client.Audit, error) {
	out := make([]client.Audit, len(products))
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
func sumAudits(audits []client.Audit) client.Audit {
	if len(audits) == 1 {
		return audits[0]
	}
	sum := client.Audit{Consistent: true}
	for _, a := range audits {
		sum.InitialStock += a.InitialStock
		sum.Stock += a.Stock
		sum.Orders += a.Orders
		sum.UnitsSold += a.UnitsSold
		sum.UnitsReturned += a.UnitsReturned
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

// sold is what a run's answers say of each product: its tally, and the
// promises (202s, the warmup's too) that the drain did not see become
// orders.
type sold struct {
	counts []load.ProductTally
	unkept []int64
}

// orders is the number of orders the audit should have gained of product
// k: one per 201 and per promise kept.
func (s sold) orders(k int) int64 { return s.counts[k].Made() - s.unkept[k] }

// catalogueRun sums up one run over the products: its hottest, the sold
// out, the broken (audits may be nil: not read).
func catalogueRun(products []client.Product, counts sold, audits []client.Audit) *report.CatalogueRun {
	run := &report.CatalogueRun{Hottest: hottest(products, counts.counts)}
	for k, a := range audits {
		if a.Stock <= 0 {
			run.SoldOutProducts++
		}
		made := counts.orders(k)
		if !a.Held() || a.Orders != made {
			run.Broken = append(run.Broken, report.ProductAudit{Name: products[k].Name, Audit: a, Created: int(made)})
		}
	}
	return run
}

// hottest are the products with the most requests, at most hottestShown,
// the first of the catalogue first among equals.
func hottest(products []client.Product, counts []load.ProductTally) []report.HotProduct {
	order := make([]int, len(products))
	var total int64
	for k := range order {
		order[k] = k
		total += counts[k].Requests
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return int(min(1, max(-1, counts[b].Requests-counts[a].Requests)))
	})
	out := make([]report.HotProduct, 0, hottestShown)
	for rank, k := range order[:min(len(order), hottestShown)] {
		h := report.HotProduct{Rank: rank + 1, ProductID: products[k].ID, Name: products[k].Name,
			Requests: int(counts[k].Requests), Created: int(counts[k].Created)}
		if total > 0 {
			h.Share = float64(counts[k].Requests) / float64(total)
		}
		out = append(out, h)
	}
	return out
}

// unsold are the units left on the products whose demand in the run (its
// requests times quantity, the warmup's included) exceeded the stock they
// began with; nil when none's did.
func unsold(before, after []client.Audit, counts []load.ProductTally, quantity int64) *int64 {
	var left int64
	over := false
	for k := range before {
		if (counts[k].Requests+counts[k].WarmRequests)*quantity > before[k].Stock {
			over = true
			left += max(0, after[k].Stock)
		}
	}
	if !over {
		return nil
	}
	return &left
}
