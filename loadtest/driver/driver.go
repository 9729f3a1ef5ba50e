package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/history"
	"github.com/seckill/seckill/loadtest/driver/load"
	"github.com/seckill/seckill/loadtest/report"
)

// Run fires the load of cfg at its instances, once per strategy, and
// reports what it measured and what the audit said. It first checks every
// instance's /healthz and fails when one cannot be reached; before it
// creates a product, it checks that every instance takes the purchase's
// query parameters, so that a run that cannot start leaves nothing behind.
// Errors of the run itself (a transport error, a 5xx, an instance that
// goes down, an audit that fails) are counted and reported, not returned;
// Run returns an error when it cannot run at all, when an instance refuses
// the strategy override, or when ctx ends (with what was measured so far).
//
// Over a catalogue (Config.Products), the report's settings name its
// products, and each result has the catalogue's own figures
// (report.Result.Catalogue): its hottest products, those sold out, and
// those whose audit broke the invariant.
func Run(ctx context.Context, cfg Config) (rep *report.Report, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The bookkeeping calls go through net/http; each run of the load
	// opens a fasthttp client of its own (load.Plan.Run).
	hc := client.NewHTTPClient(cfg.Timeout)
	defer hc.CloseIdleConnections()
	clients, err := connect(ctx, cfg, hc)
	if err != nil {
		return nil, err
	}
	rep = &report.Report{Start: time.Now(), Environment: environment()}
	if cfg.Endpoint != "" {
		rep.Config = settings(cfg, nil)
		res, err := raw(ctx, cfg, clients)
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, res)
		return rep, ctx.Err()
	}

	admin := clients[0]
	strategies, err := resolveStrategies(ctx, admin, cfg.Strategies)
	if err != nil {
		return nil, err
	}
	for _, st := range strategies {
		if err := probeOverride(ctx, clients, override(cfg, st)); err != nil {
			return nil, err
		}
	}
	products, err := onSale(ctx, admin, &cfg)
	if err != nil {
		return nil, err
	}
	rep.Config = settings(cfg, products)

	hw, closeHistory, err := createHistory(cfg.History)
	if err != nil {
		return nil, err
	}
	defer func() {
		if herr := closeHistory(); herr != nil && err == nil {
			err = herr
		}
	}()
	s := &sale{products: products, draw: newDraw(len(products), cfg.Zipf), catalogue: cfg.Products > 0}
	return rep, s.runAll(ctx, cfg, clients, strategies, hw, rep)
}

// runAll runs the load under each strategy in turn, each Result added to
// rep, the purchases of each with ids of their own (and its lines in the
// history, when hw is not nil). It stops at an error, and after a run
// that saw an instance go down.
func (s *sale) runAll(ctx context.Context, cfg Config, clients []*client.Client, strategies []client.Strategy, hw *history.Writer, rep *report.Report) error {
	prefix := "lt" + randomHex(4) + "-"
	for i, st := range strategies {
		if err := ctx.Err(); err != nil {
			return err
		}
		var rec *load.Recorder
		if hw != nil {
			rec = load.NewRecorder(hw, prefix+strconv.Itoa(i)+"-")
		}
		res, err := s.runStrategy(ctx, cfg, clients, st, prefix+strconv.Itoa(i)+"-", rec)
		if res != nil {
			rep.Results = append(rep.Results, *res)
		}
		if err != nil {
			return err
		}
		if slices.ContainsFunc(res.Instances, func(in report.Instance) bool { return in.Down }) {
			return nil // an instance went down: the next strategies would only measure the outage
		}
	}
	return nil
}

// sale is what every run of a Run sells: its products, and the law that
// picks each request's product.
type sale struct {
	products  []client.Product
	draw      *draw // nil: one product
	catalogue bool  // Config.Products: the runs report the products apart
}

// runStrategy resets the stock, runs the load under one strategy, checks
// the instances, waits for its promises (the 202s of reserve) to become
// orders and reads the audit. A nil Result comes with an error; a
// failed audit is reported in the Result; over a catalogue, the Result
// sums up the run product by product too (Result.Catalogue).
func (s *sale) runStrategy(ctx context.Context, cfg Config, clients []*client.Client, st client.Strategy, prefix string, rec *load.Recorder) (*report.Result, error) {
	admin := clients[0]
	befores, err := s.prepare(ctx, cfg, clients, st, rec)
	if err != nil {
		return nil, err
	}
	before := sumAudits(befores)
	p := s.purchasePlan(cfg, st, prefix, before.Stock, rec)
	var token func(i int) (string, error) // request i's buyer's, for its promise
	if cfg.BuyerTokens != nil {
		byBuyer, err := cfg.BuyerTokens.tokenOf(ctx, prefix, cfg.Buyers)
		if err != nil {
			return nil, err
		}
		p.BuyerToken = byBuyer
		token = func(i int) (string, error) { return byBuyer(p.Buyer(i)) }
	}
	tr := newTracker(ctx, clients, prefix, len(s.products), cfg.Timeout, token)
	defer tr.stop()
	p.Promised = tr.add
	t, err := p.Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("driver: %w", err)
	}
	if t.OverrideDisabled != "" {
		return nil, overrideDisabled(t.OverrideDisabled)
	}
	res := t.Result()
	res.Strategy, res.Description, res.Safe = st.Name, st.Description, st.Safe
	if st.Name == "" {
		describeDefault(ctx, admin, &res, t.OrderStrategy)
	}
	setStock(res.Series, before.Stock, cfg.Quantity)
	counts := sold{counts: t.Products, unkept: make([]int64, len(s.products))}
	if ctx.Err() == nil {
		checkInstances(ctx, clients, &res)
		counts.unkept = keepPromises(cfg, p.Label, tr, t, &res)
	}
	if err := ctx.Err(); err != nil {
		res.Verdict = "interrupted"
		if s.catalogue {
			res.Catalogue = catalogueRun(s.products, counts, nil)
		}
		return &res, err
	}

	res.AuditBefore = before
	afters, after := s.auditRun(ctx, admin, cfg.Quantity, &res, befores, counts)
	s.timeSoldOut(&res, t, p.Warmup(), afters, after)
	s.unsoldUnits(&res, cfg.Quantity, befores, afters, t)
	if rec != nil {
		res.History = rec.Verdict()
	}
	if s.catalogue {
		res.Catalogue = catalogueRun(s.products, counts, afters)
	}
	res.Verdict = res.Judge()
	return &res, nil
}

// keepPromises waits for the run's promises (its 202s, under reserve),
// followed by tr, to become orders, at most Config.Drain after the load,
// notes in res what became of them and returns, per product, how many
// were not kept.
func keepPromises(cfg Config, label string, tr *tracker, t *load.Tally, res *report.Result) []int64 {
	if n := t.Promised(); n > 0 && cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "%s: %d promises (202s): waiting up to %s for their orders\n", label, n, cfg.Drain)
	}
	var unkept []int64
	res.Promises, unkept = tr.drain(cfg.Drain)
	return unkept
}

// describeDefault names the strategy that served a run under the server's
// default from its orders (served), with the server's description.
func describeDefault(ctx context.Context, admin *client.Client, res *report.Result, served string) {
	res.Default = true
	res.Strategy = served
	res.Safe = true // judged strictly: the driver cannot tell which strategy served
	if listed, err := admin.Strategies(ctx); err == nil && served != "" {
		for _, s := range listed {
			if s.Name == served {
				res.Description, res.Safe = s.Description, s.Safe
			}
		}
	}
}

// auditRun reads the audits after the run into res: the orders and units
// the run made, and whether they agree with the 201s and the promises kept
// counted, in all and product by product. It returns the audits after,
// product by product (nil when they could not be read), and their sum.
func (s *sale) auditRun(ctx context.Context, admin *client.Client, quantity int64, res *report.Result, befores []client.Audit, counts sold) ([]client.Audit, client.Audit) {
	afters, err := auditAll(ctx, admin, s.products)
	if err != nil {
		res.AuditError = err.Error()
		return nil, client.Audit{}
	}
	before, after := sumAudits(befores), sumAudits(afters)
	res.Audited = true
	res.Audit = after
	res.RunOrders = after.Orders - before.Orders
	// The units the run's orders took, those given back since included.
	res.RunReturned = after.UnitsReturned - before.UnitsReturned
	res.RunUnits = after.UnitsSold - before.UnitsSold + res.RunReturned
	var made, unknown int64 // the warmup's too
	for k, pt := range counts.counts {
		made += counts.orders(k)
		unknown += pt.Unknown
	}
	res.CountsAgree = countsAgree(res.RunOrders, res.RunUnits, made, unknown, quantity)
	for k := range afters {
		orders := afters[k].Orders - befores[k].Orders
		if !countsAgree(orders, orders*quantity, counts.orders(k), counts.counts[k].Unknown, quantity) {
			res.CountsAgree = false
		}
	}
	return afters, after
}

// countsAgree says the orders and units an audit gained agree with the
// orders the answers made (201s and promises kept) and those that may have
// been made (answers outcome_unknown): at least the first, at most both.
func countsAgree(orders, units, made, unknown, quantity int64) bool {
	return made <= orders && orders <= made+unknown && units == orders*quantity
}

// timeSoldOut sets whether the run sold out, how long after the warmup
// its last sale came, and the rate it sold at.
func (s *sale) timeSoldOut(res *report.Result, t *load.Tally, warmup time.Duration, afters []client.Audit, after client.Audit) {
	if s.draw == nil {
		res.SoldOut = t.FirstSoldOut >= 0 || (res.Audited && after.Stock <= 0)
	} else {
		// A catalogue is sold out when every product is.
		res.SoldOut = res.Audited && !slices.ContainsFunc(afters, func(a client.Audit) bool { return a.Stock > 0 })
	}
	if res.SoldOut && t.LastCreated >= 0 {
		res.TimeToSoldOut = t.LastCreated - warmup
		if res.TimeToSoldOut == 0 {
			res.TimeToSoldOut = -1 // sold out exactly as the warmup ended: count it in the warmup
		}
	}
	switch {
	case res.TimeToSoldOut > 0:
		res.SellRate = float64(res.Successes) / res.TimeToSoldOut.Seconds()
	case res.TimeToSoldOut == 0 && res.Elapsed > 0:
		res.SellRate = res.SuccessThroughput
	}
}

// unsoldUnits sets the units left unsold by a run that asked for more than
// the stock (over a catalogue, see unsold), when the audit was read.
func (s *sale) unsoldUnits(res *report.Result, quantity int64, befores, afters []client.Audit, t *load.Tally) {
	switch {
	case !res.Audited:
	case s.draw != nil:
		res.UnsoldUnits = unsold(befores, afters, t.Products, quantity)
	case t.WithWarmup()*quantity > res.AuditBefore.Stock:
		left := max(0, res.Audit.Stock)
		res.UnsoldUnits = &left
	}
}

// prepare readies the products for a run under st: it resets their stock
// (with Config.Stock) and returns their audits before the run, which the
// history, when kept, records as the stock it starts from.
func (s *sale) prepare(ctx context.Context, cfg Config, clients []*client.Client, st client.Strategy, rec *load.Recorder) ([]client.Audit, error) {
	admin := clients[0]
	if cfg.Stock > 0 {
		if len(s.products) > 1 && cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "%s: resetting %d products to a stock of %d\n", label(st), len(s.products), cfg.Stock)
		}
		if err := resetAll(ctx, admin, s.products, cfg.Stock); err != nil {
			return nil, fmt.Errorf("driver: %w", err)
		}
	}
	befores, err := auditAll(ctx, admin, s.products)
	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized {
		return nil, fmt.Errorf("%w: the audit that checks the stock needs the admin token (-admin-token or SECKILL_ADMIN_TOKEN)", ErrConfig)
	}
	if err != nil {
		return nil, fmt.Errorf("driver: audit before %s: %w", label(st), err)
	}
	if rec != nil {
		for k, a := range befores {
			if err := rec.Stock(s.products[k].ID, a.Stock); err != nil {
				return nil, fmt.Errorf("driver: %w", err)
			}
		}
		if cfg.Stock > 0 && len(clients) > 1 {
			// The other instances hear of the reset within the contract's
			// second; until then one may still answer sold_out from what it
			// saw of the last run, which the history would count against
			// the new sale.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(resetPropagation):
			}
		}
	}
	return befores, nil
}

// purchasePlan is the plan of the purchases of a run under st: the users
// and request IDs start with prefix, stock is the stock before the run and
// rec, when not nil, records every purchase.
func (s *sale) purchasePlan(cfg Config, st client.Strategy, prefix string, stock int64, rec *load.Recorder) *load.Plan {
	o := override(cfg, st)
	p := newPlan(cfg, client.PurchasePath(s.products[0].ID, o), label(st))
	p.Purchase = true
	p.ProductIDs = make([]int64, len(s.products))
	for k, pr := range s.products {
		p.ProductIDs[k] = pr.ID
	}
	if s.draw != nil {
		p.Pick = s.draw.pick
		p.ProductURLs = make([][]string, len(cfg.URLs))
		for k, base := range cfg.URLs {
			p.ProductURLs[k] = make([]string, len(s.products))
			for j, pr := range s.products {
				p.ProductURLs[k][j] = base + client.PurchasePath(pr.ID, o)
			}
		}
	}
	if o.Query() != "" && cfg.AdminToken != "" {
		// The override's parameters are an admin's (401 without the token).
		p.Authorization = "Bearer " + cfg.AdminToken
	}
	p.Head = []byte(`{"user_id":"` + prefix)
	p.Mid = []byte(`","quantity":` + strconv.FormatInt(cfg.Quantity, 10) + `,"request_id":"` + prefix)
	p.Tail = []byte(`"}`)
	p.Stock = stock
	p.CaptureStrategy = st.Name == ""
	p.History = rec
	p.Cancel, p.UserPrefix, p.Buyers = cfg.Cancel, prefix, cfg.Buyers
	return p
}

// resetPropagation is how long the contract gives every instance to hear
// of a stock reset.
const resetPropagation = time.Second

// checkInstances asks every instance for /healthz after the run and marks
// those that do not answer as down.
func checkInstances(ctx context.Context, clients []*client.Client, res *report.Result) {
	for i, c := range clients {
		if err := healthz(ctx, c); err != nil {
			res.Instances[i].Down = true
			res.Instances[i].Error = err.Error()
		}
	}
}

// raw GETs cfg.Endpoint: the driver's own measure, with no product.
func raw(ctx context.Context, cfg Config, clients []*client.Client) (report.Result, error) {
	p := newPlan(cfg, cfg.Endpoint, "GET "+cfg.Endpoint)
	t, err := p.Run(ctx)
	if err != nil {
		return report.Result{}, fmt.Errorf("driver: %w", err)
	}
	res := t.Result()
	res.Strategy = "GET " + cfg.Endpoint
	res.Description = "raw mode: GET " + cfg.Endpoint + " instead of purchases"
	if ctx.Err() == nil {
		checkInstances(ctx, clients, &res)
	}
	res.Verdict = res.Judge()
	return res, nil
}

// newPlan is the plan of cfg's load at path of every instance, GETs until
// told otherwise.
func newPlan(cfg Config, path, label string) *load.Plan {
	return &load.Plan{
		Timeout:  cfg.Timeout,
		Bases:    cfg.URLs,
		Targets:  targets(cfg.URLs, path),
		Phases:   cfg.phases(),
		Open:     cfg.Open(),
		Requests: cfg.Requests,
		Workers:  cfg.Concurrency,
		Progress: cfg.Progress, ProgressEvery: cfg.ProgressEvery,
		Label:    label,
		Stock:    -1,
		Quantity: cfg.Quantity,
		Sources:  loopbackSources(cfg.Clients),
	}
}

// loopbackSources are the first n addresses of 127.0.0.0/8, from
// 127.0.0.1; none for n below 2.
func loopbackSources(n int) []net.IP {
	if n < 2 {
		return nil
	}
	out := make([]net.IP, n)
	for i := range out {
		k := i + 1
		out[i] = net.IPv4(127, byte(k>>16), byte(k>>8), byte(k))
	}
	return out
}
