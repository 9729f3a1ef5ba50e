package driver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/history"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// fakeReserve stands in for a service whose one strategy is reserve, as
// far as the driver's own logic needs: it sells its stock as 202s and,
// for GET /api/v1/purchases/{request_id}, says what became of each
// reservation as fate decides from its rank (0 for the first). An order
// is written (and counted by the audit) at the second poll of its
// reservation: until then it is pending. The real service's reserve is
// tested against the driver where it exists; this one tests the drain.
type fakeReserve struct {
	safe bool
	// fate is what becomes of the reservation of rank n: "ordered",
	// "failed" (refused by the database), "lost" (purchase_not_found) or
	// "pending" (for ever).
	fate func(n int) string

	mu           sync.Mutex
	stock        int64
	reservations map[string]*fakeReservation
}

type fakeReservation struct {
	api.Reservation
	fate  string
	polls int
}

const fakeProduct = 7

func newFakeReserve(t *testing.T, safe bool, fate func(n int) string) *httptest.Server {
	f := &fakeReserve{safe: safe, fate: fate, reservations: map[string]*fakeReservation{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { answer(w, 200, api.Health{Status: "ok"}) })
	mux.HandleFunc("GET /api/v1/strategies", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, 200, []api.Strategy{{Name: "reserve", Description: "a fake reserve", Safe: f.safe}})
	})
	mux.HandleFunc("GET /api/v1/products/{id}", f.product)
	mux.HandleFunc("PUT /api/v1/admin/products/{id}/stock", f.reset)
	mux.HandleFunc("GET /api/v1/products/{id}/audit", f.audit)
	mux.HandleFunc("POST /api/v1/products/{id}/purchase", f.purchase)
	mux.HandleFunc("GET /api/v1/purchases/{request_id}", f.state)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the driver reads what it gets
}

func refuse(w http.ResponseWriter, status int, code string) {
	answer(w, status, api.ErrorBody{Error: api.Error{Code: code, Message: code + " (fake)"}})
}

// known says the path names the fake's product, else answers 404.
func known(w http.ResponseWriter, r *http.Request) bool {
	if r.PathValue("id") != strconv.Itoa(fakeProduct) {
		refuse(w, http.StatusNotFound, "product_not_found")
		return false
	}
	return true
}

func (f *fakeReserve) product(w http.ResponseWriter, r *http.Request) {
	if !known(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	answer(w, 200, api.Product{ID: fakeProduct, Name: "fake", Stock: f.stock, InitialStock: f.stock})
}

func (f *fakeReserve) reset(w http.ResponseWriter, r *http.Request) {
	var body api.SetStock
	if !known(w, r) || json.NewDecoder(r.Body).Decode(&body) != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stock, f.reservations = body.Stock, map[string]*fakeReservation{}
	answer(w, 200, api.Product{ID: fakeProduct, Name: "fake", Stock: f.stock, InitialStock: f.stock})
}

// audit counts the orders written so far: the database's view, where the
// stock goes down as the orders are written.
func (f *fakeReserve) audit(w http.ResponseWriter, r *http.Request) {
	if !known(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var orders, units int64
	for _, res := range f.reservations {
		if res.written() {
			orders, units = orders+1, units+res.Quantity
		}
	}
	initial := f.stock + int64(len(f.reservations)) // every reservation took one unit
	answer(w, 200, api.Audit{ProductID: fakeProduct, InitialStock: initial, Stock: initial - units, Orders: orders,
		UnitsSold: units, Consistent: true})
}

func (res *fakeReservation) written() bool { return res.fate == "ordered" && res.polls >= 2 }

func (f *fakeReserve) purchase(w http.ResponseWriter, r *http.Request) {
	var p api.Purchase
	if !known(w, r) {
		return
	}
	if json.NewDecoder(r.Body).Decode(&p) != nil || p.Quantity != 1 || p.RequestID == "" {
		refuse(w, http.StatusBadRequest, "invalid_argument")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stock < 1 {
		refuse(w, http.StatusConflict, "sold_out")
		return
	}
	f.stock--
	res := &fakeReservation{fate: f.fate(len(f.reservations)), Reservation: api.Reservation{RequestID: p.RequestID,
		ProductID: fakeProduct, UserID: p.UserID, Quantity: 1, Strategy: "reserve", Status: api.ReservationPending,
		RemainingStock: f.stock}}
	f.reservations[p.RequestID] = res
	w.Header().Set("Location", "/api/v1/purchases/"+p.RequestID)
	answer(w, http.StatusAccepted, res.Reservation)
}

func (f *fakeReserve) state(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("request_id")
	f.mu.Lock()
	defer f.mu.Unlock()
	res := f.reservations[id]
	if res == nil || res.fate == "lost" {
		refuse(w, http.StatusNotFound, "purchase_not_found")
		return
	}
	res.polls++
	switch {
	case res.written():
		answer(w, 200, api.PurchaseState{RequestID: id, State: api.StateOrdered, Order: &api.Order{OrderID: int64(res.polls),
			ProductID: fakeProduct, UserID: res.UserID, Quantity: 1, RequestID: &id, Strategy: "reserve"}})
	case res.fate == "failed" && res.polls >= 2:
		answer(w, 200, api.PurchaseState{RequestID: id, State: api.StateFailed,
			Error: &api.Error{Code: "limit_exceeded", Message: "the database refused it (fake)"}})
	default:
		answer(w, 200, api.PurchaseState{RequestID: id, State: api.StatePending, Reservation: &res.Reservation})
	}
}

// TestPromisesKept: under a strategy that answers 202 (a fake reserve, run
// through -strategy all), the 202s are the run's successes, every promise
// is asked for until it became an order, the audit read after the drain
// agrees, and the history records each 202 with what it left and checks
// linearizable. The table tells the promises within its 100 columns.
func TestPromisesKept(t *testing.T) {
	srv := newFakeReserve(t, true, func(int) string { return "ordered" })
	path := filepath.Join(t.TempDir(), "history.jsonl")
	const stock, requests = 20, 60
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{srv.URL}, AdminToken: "T", ProductID: fakeProduct, Stock: stock, History: path,
		Strategies: []string{"all"}, Requests: requests, Concurrency: 8,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Errorf("Failures() = %q; want none", f)
	}
	res := rep.Results[0]
	p := res.Promises
	switch {
	case res.Strategy != "reserve" || res.Successes != stock || res.Outcomes[report.OutcomeAccepted] != stock ||
		res.Outcomes[report.OutcomeCreated] != 0 || res.Outcomes[report.OutcomeSoldOut] != requests-stock:
		t.Errorf("%s: %d successes, outcomes %v; want the %d 202s as successes, the rest sold_out", res.Strategy, res.Successes, res.Outcomes, stock)
	case p == nil || p.Made != stock || p.Kept != stock || p.Broken() != 0 || p.Polls < 2*stock:
		t.Errorf("promises %+v; want %d made and kept, each asked for at least twice", p, stock)
	case p.WriteLag.Count != stock || p.WriteLag.P50 <= 0 || p.WriteLag.P50 > p.WriteLag.P99:
		t.Errorf("write lag %+v; want one per promise kept, in order", p.WriteLag)
	case !res.CountsAgree || res.RunOrders != stock || res.Audit.Orders != stock || res.Verdict != "held":
		t.Errorf("audit gained %d orders (audit %+v), counts agree %t, verdict %q; want %d, held", res.RunOrders, res.Audit, res.CountsAgree, res.Verdict, stock)
	case !res.SoldOut || res.SellRate <= 0 || res.SuccessLatency.Count != stock:
		t.Errorf("sold out %t, sell rate %g, success latency %+v; want the 202s to sell out the stock", res.SoldOut, res.SellRate, res.SuccessLatency)
	case res.History == nil || !res.History.Checked || !res.History.Linearizable || res.History.Purchases != requests:
		t.Errorf("history verdict %+v; want %d purchases, linearizable", res.History, requests)
	}
	checkPromisedHistory(t, path, stock)

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(table.String()), " ")
	if !strings.Contains(text, "reserve: promises (202s): 20 made, 20 kept, 0 failed, 0 lost, 0 still pending") {
		t.Errorf("the table does not tell the promises:\n%s", table.String())
	}
	checkWidth(t, rep)
}

// checkPromisedHistory: the history at path has a line per 202, with
// status 202, what it left and no order ID, and the file checks
// linearizable.
func checkPromisedHistory(t *testing.T, path string, promises int) {
	t.Helper()
	lines := readHistory(t, path)
	n := 0
	for _, l := range lines {
		if l.Status != http.StatusAccepted {
			continue
		}
		n++
		if l.RemainingStock == nil || l.OrderID != nil {
			t.Errorf("a 202 line with remaining_stock %v, order_id %v; want what it left and no order", l.RemainingStock, l.OrderID)
		}
	}
	if n != promises {
		t.Errorf("the history has %d lines of 202; want %d", n, promises)
	}
	if res, err := history.Check(lines); err != nil || !res.Linearizable {
		t.Errorf("Check(the file) = %v, %v; want linearizable", res, err)
	}
}

// TestPromisesBroken: promises the database refused, lost, or still
// pending when the drain runs out fail the run, even under a strategy not
// marked safe, each counted apart; the audit, read after the drain, agrees
// with the promises kept. The strategy of a run under the server's
// default is read from its 202s.
func TestPromisesBroken(t *testing.T) {
	fates := []string{"ordered", "failed", "lost", "pending", "ordered"}
	srv := newFakeReserve(t, false, func(n int) string { return fates[n%len(fates)] })
	rep, err := driver.Run(t.Context(), driver.Config{
		URLs: []string{srv.URL}, AdminToken: "T", ProductID: fakeProduct, Stock: 10,
		Strategies: []string{""}, Requests: 30, Concurrency: 4, Drain: time.Second,
	})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	res := rep.Results[0]
	p := res.Promises
	if res.Strategy != "reserve" || res.Safe {
		t.Errorf("strategy %q (safe %t); want reserve, read from the 202s, not safe as the server lists it", res.Strategy, res.Safe)
	}
	if p == nil || p.Made != 10 || p.Kept != 4 || p.Failed != 2 || p.Lost != 2 || p.Pending != 2 || p.DrainLimit != time.Second {
		t.Fatalf("promises %+v; want 10 made: 4 kept, 2 failed, 2 lost, 2 still pending after the drain of 1s", p)
	}
	if len(p.Samples) == 0 || !strings.Contains(strings.Join(p.Samples, "; "), "failed: limit_exceeded") {
		t.Errorf("samples %q; want the promises not kept named, the refused one with its code", p.Samples)
	}
	failures := strings.Join(rep.Failures(), "; ")
	if !strings.Contains(failures, "reserve: 6 of its 10 promises (202s) were not kept: 2 failed") ||
		res.Verdict != "BROKEN: 6 promises not kept" {
		t.Errorf("verdict %q, failures %q; want the run failed by its broken promises", res.Verdict, failures)
	}
	if !res.CountsAgree || res.RunOrders != 4 {
		t.Errorf("the audit gained %d orders, counts agree %t; want the 4 promises kept", res.RunOrders, res.CountsAgree)
	}
}
