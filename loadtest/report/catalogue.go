package report

import (
	"fmt"
	"strconv"
	"strings"
)

// catalogueHeader describes the catalogue of c in the table's header.
func (c Settings) catalogueHeader() string {
	law := "uniformly"
	if c.Zipf > 0 {
		law = "by a Zipf law of exponent " + strconv.FormatFloat(c.Zipf, 'g', -1, 64)
	}
	n := len(c.Catalogue)
	if n == 0 {
		return fmt.Sprintf("a catalogue of %s, each request's product drawn %s", plural(c.Products, "product"), law)
	}
	lo, hi := c.Catalogue[0].ID, c.Catalogue[0].ID
	inOrder := true // the k-th name has the k-th id
	for k, p := range c.Catalogue {
		lo, hi = min(lo, p.ID), max(hi, p.ID)
		inOrder = inOrder && p.ID == c.Catalogue[0].ID+int64(k)
	}
	ids := fmt.Sprintf("ids %d to %d", lo, hi)
	if !inOrder {
		// Created side by side, the products took their ids in no
		// particular order: loadtest-1 is not the lowest.
		ids = fmt.Sprintf("ids from %d to %d, not in the names' order", lo, hi)
	}
	return fmt.Sprintf("a catalogue of %s, %s to %s (%s), each request's product drawn %s",
		plural(n, "product"), c.Catalogue[0].Name, c.Catalogue[n-1].Name, ids, law)
}

// hottestRows is the HOTTEST block: per run over a catalogue its hottest
// products; nil when no run was over a catalogue.
func (r *Report) hottestRows() [][]string {
	rows := [][]string{{"HOTTEST", "RANK", "PRODUCT", "ID", "REQUESTS", "SHARE", "201"}}
	some := false
	for _, res := range r.Results {
		if res.Catalogue == nil {
			continue
		}
		some = true
		for _, h := range res.Catalogue.Hottest {
			rows = append(rows, []string{strategyCell(res), itoa(h.Rank), h.Name, strconv.FormatInt(h.ProductID, 10),
				itoa(h.Requests), share(h.Share), itoa(h.Created)})
		}
	}
	if !some {
		return nil
	}
	return rows
}

// catalogueNote is the line under the table about a run over a catalogue:
// its sell rate, its 201s' p99, its products sold out and those that broke
// the invariant; "" for a run of one product.
func (r Result) catalogueNote(c Settings) string {
	if r.Catalogue == nil {
		return ""
	}
	return fmt.Sprintf("over %s: 201/s %s, 201 p99 %s, %d sold out", plural(c.catalogueSize(), "product"),
		sellRateCell(r), dur(successLatency(r).P99), r.Catalogue.SoldOutProducts) + r.Catalogue.brokenNote()
}

// catalogueSize is the number of products of a catalogue.
func (c Settings) catalogueSize() int {
	if len(c.Catalogue) > 0 {
		return len(c.Catalogue)
	}
	return c.Products
}

// brokenShown is the most products a note names as broken.
const brokenShown = 5

// brokenNote names the first products that broke the invariant, after
// "; "; "" when none did.
func (cat *CatalogueRun) brokenNote() string {
	n := len(cat.Broken)
	if n == 0 {
		return ""
	}
	names := make([]string, 0, min(n, brokenShown))
	for _, b := range cat.Broken[:min(n, brokenShown)] {
		names = append(names, fmt.Sprintf("%s (oversold %d, stock %d)", b.Name, b.Audit.OversoldUnits, b.Audit.Stock))
	}
	more := ""
	if n > brokenShown {
		more = fmt.Sprintf(" and %d more", n-brokenShown)
	}
	return fmt.Sprintf("; the invariant broke on %s%s", strings.Join(names, ", "), more)
}
