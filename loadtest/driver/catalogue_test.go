package driver_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// The catalogue of TestRunCatalogue: five products of 20 units each, and
// 150 purchases spread over them.
const (
	catalogueProducts = 5
	catalogueStock    = 20
	catalogueRequests = 150
)

// TestRunCatalogue: the purchases spread over a catalogue of five products
// by a Zipf law; the hottest are counted product by product and agree with
// the database, the audit is the catalogue's sum, the history has a stock
// line per product, and a second run reuses the catalogue by name. The
// table, the wide table and the JSON of the Report carry the catalogue.
// The progress says what the seconds before the run go to: finding the
// products and resetting them.
func TestRunCatalogue(t *testing.T) {
	in := apptest.Start(t, nil)
	var progress testenv.Buffer
	cfg := driver.Config{
		URLs: []string{in.URL}, AdminToken: in.AdminToken, Stock: catalogueStock, Products: catalogueProducts, Zipf: 1.2,
		Strategies: []string{"optimistic"}, Requests: catalogueRequests, Concurrency: 8,
		History: filepath.Join(t.TempDir(), "history.jsonl"), Progress: &progress,
	}
	rep, err := driver.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	for _, want := range []string{"catalogue: finding or creating 5 products, loadtest-1 to loadtest-5\n",
		"optimistic: resetting 5 products to a stock of 20\n"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("the progress does not say %q:\n%s", want, progress.String())
		}
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("Failures() = %q; want none", f)
	}
	checkCatalogueSettings(t, rep)
	checkHottest(t, in, rep.Results[0])
	checkCatalogueAudit(t, rep.Results[0])
	checkCatalogueHistory(t, cfg.History)
	checkCatalogueOutputs(t, rep)
	checkCatalogueReused(t, in, cfg, rep.Config.Catalogue)
}

// checkCatalogueSettings: the report's settings name the five products,
// loadtest-1 to loadtest-5, and the law, and its one result has a
// catalogue. It stops the test when not: the other checks read them.
func checkCatalogueSettings(t *testing.T, rep *report.Report) {
	t.Helper()
	cat := rep.Config.Catalogue
	if len(cat) != catalogueProducts || rep.Config.Products != catalogueProducts || rep.Config.Zipf != 1.2 ||
		len(rep.Results) != 1 || rep.Results[0].Catalogue == nil {
		t.Fatalf("settings %+v, %d results; want %d products of Zipf 1.2 and one run over them", rep.Config, len(rep.Results), catalogueProducts)
	}
	for k, p := range cat {
		if want := "loadtest-" + string(rune('1'+k)); p.Name != want {
			t.Errorf("product %d is %q; want %q", k, p.Name, want)
		}
	}
}

// checkHottest: the run's hottest products are all five, heaviest first
// and in order of requests; each one's 201s are its orders in the
// database, within its stock; together they add up to the run's requests
// and 201s; and the heaviest drew about the share the law gives it.
func checkHottest(t *testing.T, in *apptest.Instance, res report.Result) {
	t.Helper()
	run := res.Catalogue
	if run.SoldOutProducts < 0 || run.SoldOutProducts > catalogueProducts || len(run.Broken) != 0 {
		t.Errorf("catalogue run %+v; want at most %d sold out and none broken", run, catalogueProducts)
	}
	if len(run.Hottest) != catalogueProducts || run.Hottest[0].Name != "loadtest-1" || run.Hottest[0].Rank != 1 {
		t.Fatalf("hottest %+v; want all %d, loadtest-1 first (the law's heaviest)", run.Hottest, catalogueProducts)
	}
	requested, created := 0, 0
	for i, h := range run.Hottest {
		requested += h.Requests
		created += h.Created
		if i > 0 && h.Requests > run.Hottest[i-1].Requests {
			t.Errorf("hottest %+v not in order of requests", run.Hottest)
		}
		if orders, _, _, _ := dbFigures(t, in, h.ProductID); orders != int64(h.Created) || h.Created > catalogueStock {
			t.Errorf("%s: the database has %d orders; the driver counted %d 201s (stock %d)", h.Name, orders, h.Created, catalogueStock)
		}
	}
	if requested != catalogueRequests || created != res.Successes {
		t.Errorf("the hottest add up to %d requests and %d 201s; want %d and %d", requested, created, catalogueRequests, res.Successes)
	}
	if share := run.Hottest[0].Share; share < 0.3 || share > 0.6 {
		t.Errorf("loadtest-1 drew %.2f of the requests; the law of exponent 1.2 over 5 gives it about 0.45", share)
	}
}

// checkCatalogueAudit: the audit is the sum over the catalogue and agrees
// with the 201s, and the run's history is linearizable.
func checkCatalogueAudit(t *testing.T, res report.Result) {
	t.Helper()
	if res.Audit.InitialStock != catalogueProducts*catalogueStock || res.Audit.UnitsSold != int64(res.Successes) || !res.Audit.Held() || !res.CountsAgree {
		t.Errorf("audit %+v, counts agree %t; want the sum over %d products of %d, %d sold",
			res.Audit, res.CountsAgree, catalogueProducts, catalogueStock, res.Successes)
	}
	if h := res.History; h == nil || !h.Checked || !h.Linearizable || h.Purchases != catalogueRequests {
		t.Errorf("history verdict %+v; want %d purchases, linearizable", h, catalogueRequests)
	}
}

// checkCatalogueHistory: the history file has a stock line for each
// product of the catalogue.
func checkCatalogueHistory(t *testing.T, path string) {
	t.Helper()
	lines := readHistory(t, path)
	stockLines := map[int64]bool{}
	for _, l := range lines {
		if l.Stock != nil && *l.Stock == catalogueStock {
			stockLines[l.Product] = true
		}
	}
	if len(stockLines) != catalogueProducts {
		t.Errorf("the history gives the stock of %d products; want a line for each of %d", len(stockLines), catalogueProducts)
	}
}

// checkCatalogueOutputs: the table (within its width), the wide table and
// the JSON carry the catalogue and the run's hottest products.
func checkCatalogueOutputs(t *testing.T, rep *report.Report) {
	t.Helper()
	var table, wide, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HOTTEST", "RANK", "SHARE", "loadtest-1", "a catalogue of 5", "exponent 1.2", "optimistic: over 5 products"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if w := maxWidth(table.String()); w > report.TableWidth {
		t.Errorf("the table has a line of %d columns; want at most %d:\n%s", w, report.TableWidth, table.String())
	}
	if err := rep.WriteWideTable(&wide); err != nil || !strings.Contains(wide.String(), "HOTTEST") || !strings.Contains(wide.String(), "a catalogue of 5") {
		t.Errorf("WriteWideTable = %v:\n%s\nwant the catalogue and its HOTTEST block", err, wide.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	cat, hottest := rep.Config.Catalogue, rep.Results[0].Catalogue.Hottest
	var back report.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Results) != 1 || back.Results[0].Catalogue == nil ||
		len(back.Results[0].Catalogue.Hottest) != catalogueProducts || back.Results[0].Catalogue.Hottest[0] != hottest[0] ||
		len(back.Config.Catalogue) != catalogueProducts || back.Config.Catalogue[0] != cat[0] || back.Config.Zipf != 1.2 {
		t.Errorf("JSON %v, settings %+v, results %+v; want the catalogue and the hottest of the run", err, back.Config, back.Results)
	}
}

// checkCatalogueReused: a second run, with another strategy, finds the
// catalogue cat by name, resets it and adds no product.
func checkCatalogueReused(t *testing.T, in *apptest.Instance, cfg driver.Config, cat []report.CatalogueProduct) {
	t.Helper()
	cfg.History, cfg.Strategies = "", []string{"pessimistic"}
	again, err := driver.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("second Run = %v", err)
	}
	if len(again.Config.Catalogue) != catalogueProducts {
		t.Fatalf("second run's catalogue %+v; want %d products", again.Config.Catalogue, catalogueProducts)
	}
	for k, p := range again.Config.Catalogue {
		if p != cat[k] {
			t.Errorf("second run's product %d is %+v; want the first run's %+v", k, p, cat[k])
		}
	}
	if n := productCount(t, in); n != catalogueProducts {
		t.Errorf("%d products after two runs; want the %d of the catalogue", n, catalogueProducts)
	}
	if a := again.Results[0].AuditBefore; a.InitialStock != catalogueProducts*catalogueStock || a.Orders != 0 {
		t.Errorf("second run's audit before %+v; want every product reset to %d", a, catalogueStock)
	}
	c := &client.Client{BaseURL: in.URL, AdminToken: in.AdminToken}
	if _, err := c.Products(t.Context()); err != nil {
		t.Fatal(err)
	}
}
