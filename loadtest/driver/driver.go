package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/history"
)

// ErrOverrideDisabled is wrapped by Run's error when an instance answered
// 403 strategy_override_disabled.
var ErrOverrideDisabled = errors.New("driver: strategy override disabled")

// healthTimeout bounds one health check.
const healthTimeout = 5 * time.Second

// probeProduct is a product id no sale uses: the override probe's purchase
// of it can only be refused.
const probeProduct = math.MaxInt64

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
// Over a catalogue (Config.Products), the Report's settings name its
// products, and each Result has the catalogue's own figures
// (Result.Catalogue): its hottest products, those sold out, and those
// whose audit broke the invariant.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The bookkeeping calls go through net/http; each run of the load
	// opens a fasthttp client of its own (see plan.run).
	hc := client.NewHTTPClient(cfg.Timeout)
	defer hc.CloseIdleConnections()
	clients, err := connect(ctx, cfg, hc)
	if err != nil {
		return nil, err
	}
	rep = &Report{Start: time.Now(), Environment: environment()}
	if cfg.Endpoint != "" {
		rep.Config = settings(cfg, nil)
		res := raw(ctx, cfg, clients)
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

// connect makes a client of each instance, over hc, and checks its
// /healthz.
func connect(ctx context.Context, cfg Config, hc *http.Client) ([]*client.Client, error) {
	clients := make([]*client.Client, len(cfg.URLs))
	for i, u := range cfg.URLs {
		clients[i] = &client.Client{BaseURL: u, AdminToken: cfg.AdminToken, HTTP: hc}
		if err := healthz(ctx, clients[i]); err != nil {
			return nil, err
		}
	}
	return clients, nil
}

// createHistory creates the history file at path (none when path is
// empty) and returns its writer and what flushes and closes it.
func createHistory(path string) (*history.Writer, func() error, error) {
	if path == "" {
		return nil, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("driver: the history: %w", err)
	}
	hw := history.NewWriter(f)
	return hw, func() error {
		if err := errors.Join(hw.Flush(), f.Close()); err != nil {
			return fmt.Errorf("driver: write the history %s: %w", path, err)
		}
		return nil
	}, nil
}

// runAll runs the load under each strategy in turn, each Result added to
// rep, the purchases of each with ids of their own (and its lines in the
// history, when hw is not nil). It stops at an error, and after a run
// that saw an instance go down.
func (s *sale) runAll(ctx context.Context, cfg Config, clients []*client.Client, strategies []Strategy, hw *history.Writer, rep *Report) error {
	prefix := "lt" + randomHex(4) + "-"
	for i, st := range strategies {
		if err := ctx.Err(); err != nil {
			return err
		}
		var rec *recorder
		if hw != nil {
			rec = &recorder{w: hw, prefix: prefix + strconv.Itoa(i) + "-"}
		}
		res, err := s.runStrategy(ctx, cfg, clients, st, prefix+strconv.Itoa(i)+"-", rec)
		if res != nil {
			rep.Results = append(rep.Results, *res)
		}
		if err != nil {
			return err
		}
		if res.instanceDown() {
			return nil // the next strategies would only measure the outage
		}
	}
	return nil
}

// onSale finds or creates the products of cfg, and fills in cfg's stock
// (DefaultStock for products the driver chose) and product id (of a run
// of one product).
func onSale(ctx context.Context, admin *client.Client, cfg *Config) ([]client.Product, error) {
	if cfg.ProductID != 0 {
		p, err := admin.Product(ctx, cfg.ProductID)
		if err != nil {
			return nil, fmt.Errorf("driver: product %d: %w", cfg.ProductID, err)
		}
		return []client.Product{p}, nil
	}
	if cfg.Stock == 0 {
		cfg.Stock = DefaultStock
	}
	var products []client.Product
	var err error
	switch {
	case cfg.Products > 0:
		prefix := cfg.ProductName
		if prefix == "" {
			prefix = DefaultProductName
		}
		return productsNamed(ctx, admin, catalogueNames(prefix, cfg.Products), cfg.Stock)
	case cfg.ProductName != "":
		products, err = productsNamed(ctx, admin, []string{cfg.ProductName}, cfg.Stock)
	default:
		var p client.Product
		p, err = admin.CreateProduct(ctx, "loadtest "+time.Now().UTC().Format(time.RFC3339), cfg.Stock)
		if err != nil {
			err = fmt.Errorf("driver: create a product: %w", err)
		}
		products = []client.Product{p}
	}
	if err != nil {
		return nil, err
	}
	cfg.ProductID = products[0].ID
	return products, nil
}

func healthz(ctx context.Context, c *client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if err := c.Healthz(ctx); err != nil {
		return fmt.Errorf("driver: instance %s cannot be reached: %w", c.BaseURL, err)
	}
	return nil
}

// override is what every purchase of a run under st carries.
func override(cfg Config, st Strategy) client.Override {
	return client.Override{Strategy: st.Name, Hold: cfg.Hold, Pause: cfg.Pause, Batch: cfg.Batch, Fencing: cfg.Fencing}
}

// probeOverride asks every instance whether it takes o's query parameters:
// a purchase of a product that does not exist, with o (its hold and pause
// cut to 0), should answer 404. A 403 strategy_override_disabled or a 400
// means the run could not make a single purchase.
func probeOverride(ctx context.Context, clients []*client.Client, o client.Override) error {
	if o.Query() == "" {
		return nil
	}
	if o.Hold > 0 {
		o.Hold = time.Millisecond // the probe does no work: hold_ms=1 on a product that does not exist
	}
	if o.Pause > 0 {
		o.Pause = time.Millisecond
	}
	for _, c := range clients {
		_, err := c.Buy(ctx, probeProduct, client.Purchase{UserID: "loadtest-probe", Quantity: 1}, o)
		var e *client.Error
		switch {
		case errors.As(err, &e) && e.Status == 403 && e.Code == "strategy_override_disabled":
			return overrideDisabled(c.BaseURL)
		case errors.As(err, &e) && e.Status == 401:
			return fmt.Errorf("%w: %s answered 401: the purchase's parameters %s are the strategy override's, which need the admin token (-admin-token or SECKILL_ADMIN_TOKEN)",
				ErrConfig, c.BaseURL, o.Query())
		case errors.As(err, &e) && e.Status == 400:
			return fmt.Errorf("%w: %s refuses the purchase's parameters %s: %s", ErrConfig, c.BaseURL, o.Query(), e.Message)
		case err != nil && !errors.As(err, &e):
			return fmt.Errorf("driver: check the strategy override: %w", err)
		}
	}
	return nil
}

func overrideDisabled(url string) error {
	return fmt.Errorf("%w: %s answered 403 strategy_override_disabled: the service must run with SECKILL_STRATEGY_OVERRIDE=true for a purchase to choose its strategy, hold, pause, batch or fencing", ErrOverrideDisabled, url)
}

// resolveStrategies turns Config.Strategies into what to run, with the
// server's descriptions.
func resolveStrategies(ctx context.Context, admin *client.Client, names []string) ([]Strategy, error) {
	if len(names) == 1 && names[0] == "" {
		return []Strategy{{}}, nil
	}
	listed, err := admin.Strategies(ctx)
	if err != nil {
		return nil, fmt.Errorf("driver: list strategies: %w", err)
	}
	if len(names) == 0 || (len(names) == 1 && names[0] == "all") {
		if len(listed) == 0 {
			return nil, errors.New("driver: the server lists no strategy")
		}
		return listed, nil
	}
	known := make([]string, len(listed))
	for i, s := range listed {
		known[i] = s.Name
	}
	out := make([]Strategy, 0, len(names))
	for _, n := range names {
		i := slices.Index(known, n)
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown strategy %q (the server lists %s)", ErrConfig, n, strings.Join(known, ", "))
		}
		out = append(out, listed[i])
	}
	return out, nil
}

// sale is what every run of a Run sells: its products, and the law that
// picks each request's product.
type sale struct {
	products  []client.Product
	draw      *draw // nil: one product
	catalogue bool  // Config.Products: the runs report the products apart
}

// runStrategy resets the stock, runs the load under one strategy, checks
// the instances and reads the audit. A nil Result comes with an error; a
// failed audit is reported in the Result; over a catalogue, the Result
// sums up the run product by product too (Result.Catalogue).
func (s *sale) runStrategy(ctx context.Context, cfg Config, clients []*client.Client, st Strategy, prefix string, rec *recorder) (*Result, error) {
	admin := clients[0]
	befores, err := s.prepare(ctx, cfg, clients, st, rec)
	if err != nil {
		return nil, err
	}
	before := sumAudits(befores)
	p := s.purchasePlan(cfg, st, prefix, before.Stock, rec)
	t := p.run(ctx)
	if t.overrideDisabled != "" {
		return nil, overrideDisabled(t.overrideDisabled)
	}
	res := result(p, t, false)
	res.Strategy, res.Description, res.Safe = st.Name, st.Description, st.Safe
	if st.Name == "" {
		describeDefault(ctx, admin, &res, t.orderStrategy)
	}
	res.setStock(before.Stock, cfg.Quantity)
	if err := ctx.Err(); err != nil {
		res.Verdict = "interrupted"
		if s.catalogue {
			res.Catalogue = catalogueRun(s.products, t.products, nil)
		}
		return &res, err
	}
	checkInstances(ctx, clients, &res)

	res.AuditBefore = before
	afters, after := s.auditRun(ctx, admin, cfg.Quantity, &res, befores, t)
	s.timeSoldOut(&res, t, p.warmup(), afters, after)
	s.unsoldUnits(&res, cfg.Quantity, befores, afters, t)
	if rec != nil {
		res.History = rec.verdict()
	}
	if s.catalogue {
		res.Catalogue = catalogueRun(s.products, t.products, afters)
	}
	res.Verdict = res.verdict()
	return &res, nil
}

// describeDefault names the strategy that served a run under the server's
// default from its orders (served), with the server's description.
func describeDefault(ctx context.Context, admin *client.Client, res *Result, served string) {
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
// the run made, and whether they agree with the 201s counted, in all and
// product by product. It returns the audits after, product by product
// (nil when they could not be read), and their sum.
func (s *sale) auditRun(ctx context.Context, admin *client.Client, quantity int64, res *Result, befores []Audit, t *tally) ([]Audit, Audit) {
	afters, err := auditAll(ctx, admin, s.products)
	if err != nil {
		res.AuditError = err.Error()
		return nil, Audit{}
	}
	before, after := sumAudits(befores), sumAudits(afters)
	res.Audited = true
	res.Audit = after
	res.RunOrders = after.Orders - before.Orders
	res.RunUnits = after.UnitsSold - before.UnitsSold
	made := int64(res.Successes + res.warmSuccesses())
	res.CountsAgree = res.RunOrders == made && res.RunUnits == made*quantity
	for k := range afters {
		made := t.products[k].created + t.products[k].warmCreated
		if afters[k].Orders-befores[k].Orders != made {
			res.CountsAgree = false
		}
	}
	return afters, after
}

// timeSoldOut sets whether the run sold out, how long after the warmup
// its last sale came, and the rate it sold at.
func (s *sale) timeSoldOut(res *Result, t *tally, warmup time.Duration, afters []Audit, after Audit) {
	if s.draw == nil {
		res.SoldOut = t.firstSoldOut >= 0 || (res.Audited && after.Stock <= 0)
	} else {
		// A catalogue is sold out when every product is.
		res.SoldOut = res.Audited && !slices.ContainsFunc(afters, func(a Audit) bool { return a.Stock > 0 })
	}
	if res.SoldOut && t.lastCreated >= 0 {
		res.TimeToSoldOut = t.lastCreated - warmup
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
func (s *sale) unsoldUnits(res *Result, quantity int64, befores, afters []Audit, t *tally) {
	switch {
	case !res.Audited:
	case s.draw != nil:
		res.UnsoldUnits = unsold(befores, afters, t.products, quantity)
	case int64(res.Requests+res.warmRequests())*quantity > res.AuditBefore.Stock:
		left := max(0, res.Audit.Stock)
		res.UnsoldUnits = &left
	}
}

// prepare readies the products for a run under st: it resets their stock
// (with Config.Stock) and returns their audits before the run, which the
// history, when kept, records as the stock it starts from.
func (s *sale) prepare(ctx context.Context, cfg Config, clients []*client.Client, st Strategy, rec *recorder) ([]Audit, error) {
	admin := clients[0]
	if cfg.Stock > 0 {
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
			if err := rec.stock(s.products[k].ID, a.Stock); err != nil {
				return nil, fmt.Errorf("driver: %w", err)
			}
		}
		if cfg.Stock > 0 && len(clients) > 1 {
			// The other instances hear of the reset within the contract's
			// second; until then one may still answer sold_out from what it
			// saw of the last run, which the history would count against
			// the new sale.
			if err := sleep(ctx, resetPropagation); err != nil {
				return nil, err
			}
		}
	}
	return befores, nil
}

// purchasePlan is the plan of the purchases of a run under st: the users
// and request IDs start with prefix, stock is the stock before the run and
// rec, when not nil, records every purchase.
func (s *sale) purchasePlan(cfg Config, st Strategy, prefix string, stock int64, rec *recorder) *plan {
	o := override(cfg, st)
	p := newPlan(cfg, client.PurchasePath(s.products[0].ID, o), label(st))
	p.purchase = true
	p.productIDs = make([]int64, len(s.products))
	for k, pr := range s.products {
		p.productIDs[k] = pr.ID
	}
	if s.draw != nil {
		p.draw = s.draw
		p.productURLs = make([][]string, len(cfg.URLs))
		for k, base := range cfg.URLs {
			p.productURLs[k] = make([]string, len(s.products))
			for j, pr := range s.products {
				p.productURLs[k][j] = base + client.PurchasePath(pr.ID, o)
			}
		}
	}
	if o.Query() != "" && cfg.AdminToken != "" {
		// The override's parameters are an admin's (401 without the token).
		p.authorization = "Bearer " + cfg.AdminToken
	}
	p.head = []byte(`{"user_id":"` + prefix)
	p.mid = []byte(`","quantity":` + strconv.FormatInt(cfg.Quantity, 10) + `,"request_id":"` + prefix)
	p.tail = []byte(`"}`)
	p.stock = stock
	p.captureStrategy = st.Name == ""
	p.history = rec
	return p
}

// resetPropagation is how long the contract gives every instance to hear
// of a stock reset.
const resetPropagation = time.Second

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// checkInstances asks every instance for /healthz after the run and marks
// those that do not answer as down.
func checkInstances(ctx context.Context, clients []*client.Client, res *Result) {
	for i, c := range clients {
		if err := healthz(ctx, c); err != nil {
			res.Instances[i].Down = true
			res.Instances[i].Error = err.Error()
		}
	}
}

// raw GETs cfg.Endpoint: the driver's own measure, with no product.
func raw(ctx context.Context, cfg Config, clients []*client.Client) Result {
	p := newPlan(cfg, cfg.Endpoint, "GET "+cfg.Endpoint)
	res := result(p, p.run(ctx), true)
	res.Strategy = "GET " + cfg.Endpoint
	res.Description = "raw mode: GET " + cfg.Endpoint + " instead of purchases"
	if ctx.Err() == nil {
		checkInstances(ctx, clients, &res)
	}
	res.Verdict = res.verdict()
	return res
}

// newPlan is the plan of cfg's load at path of every instance, GETs until
// told otherwise.
func newPlan(cfg Config, path, label string) *plan {
	return &plan{
		timeout:  cfg.Timeout,
		bases:    cfg.URLs,
		targets:  targets(cfg.URLs, path),
		phases:   cfg.phases(),
		open:     cfg.Open(),
		requests: cfg.Requests,
		workers:  cfg.Concurrency,
		progress: cfg.Progress,
		label:    label,
		stock:    -1,
		quantity: cfg.Quantity,
		sources:  loopbackSources(cfg.Clients),
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

// result turns a tally into a Result without the audit.
func result(p *plan, t *tally, raw bool) Result {
	res := Result{
		Requests:         int(t.total()),
		Outcomes:         outcomeMap(t.counts, raw),
		Dropped:          int(t.dropped),
		Codes:            map[string]int{},
		Elapsed:          t.elapsed,
		MaxSendDelay:     t.maxSendDelay,
		Samples:          t.samples,
		Raw:              raw,
		Latency:          latency(t.all()),
		LatencyByOutcome: map[string]Latency{},
	}
	for k, v := range t.codes {
		res.Codes[k] = int(v)
	}
	success := outCreated
	if raw {
		success = outOK
	}
	res.Successes = int(t.counts[success])
	if s := t.elapsed.Seconds(); s > 0 {
		res.Throughput = float64(res.Requests) / s
		res.SuccessThroughput = float64(res.Successes) / s
	}
	for i, h := range t.hists {
		if h != nil {
			res.LatencyByOutcome[outcomeNames[i]] = latency(h)
		}
	}
	res.Warmup = warmupOf(p, t, raw, success)
	res.Steps = stepsOf(p, t, raw, success)
	for _, s := range t.series {
		res.Series = append(res.Series, s.summarize(raw))
	}
	for i, tt := range t.targets {
		res.Instances = append(res.Instances, Instance{URL: p.bases[i], Requests: int(tt.answers), Transport: int(tt.transport)})
	}
	return res
}

// warmupOf counts the warmup's answers apart: nil for a plan without one.
func warmupOf(p *plan, t *tally, raw bool, success outcome) *Warmup {
	if p.warmup() <= 0 {
		return nil
	}
	w := &Warmup{Outcomes: outcomeMap(t.warm, raw), Successes: int(t.warm[success]), Dropped: int(t.warmDropped)}
	for _, n := range t.warm {
		w.Requests += int(n)
	}
	return w
}

// stepsOf sums up each step of an open plan's rates after the warmup: nil
// for a closed plan.
func stepsOf(p *plan, t *tally, raw bool, success outcome) []Step {
	if !p.open {
		return nil
	}
	var steps []Step
	for i, ph := range p.phases {
		if ph.warm {
			continue
		}
		st := t.steps[i]
		step := Step{Rate: ph.rate, Scheduled: ph.n, Dropped: int(st.dropped), Outcomes: outcomeMap(st.counts, raw),
			Successes: int(st.counts[success]), Latency: latency(st.hist)}
		for _, n := range st.counts {
			step.Requests += int(n)
		}
		step.Throughput = float64(step.Requests) / ph.length.Seconds()
		steps = append(steps, step)
	}
	return steps
}

// summarize sums up one second of the run: its answers by outcome and by
// column, and its latency.
func (s *secAgg) summarize(raw bool) Second {
	sec := Second{Second: s.sec, Dropped: int(s.dropped), Outcomes: map[string]int{}}
	for i, n := range s.counts {
		if n > 0 {
			sec.Outcomes[outcomeNames[i]] = int(n)
		}
		sec.Answers += int(n)
		switch outcome(i) {
		case outCreated, outOK:
			sec.Created += int(n)
		case outSoldOut:
			sec.SoldOut += int(n)
		case outLockTimeout, outLockLost:
			sec.LockFailures += int(n)
		default:
			sec.OtherFailures += int(n)
		}
	}
	if raw {
		sec.Created = 0 // the 201 column counts purchases only
	}
	if l := latency(s.hist); l.Count > 0 {
		sec.P50, sec.P99, sec.Max = l.P50, l.P99, l.Max
	}
	return sec
}

// setStock fills in each second's stock left, from the stock before the
// run and the units of each second's 201s.
func (r *Result) setStock(before, quantity int64) {
	stock := before
	for i := range r.Series {
		stock -= int64(r.Series[i].Created) * quantity
		left := stock
		r.Series[i].Stock = &left
	}
}

// outcomeMap names the counts of c: every failure that has a column of its
// own, and any other that is not 0.
func outcomeMap(c [numOutcomes]int64, raw bool) map[string]int {
	m := map[string]int{}
	for i, n := range c {
		if n > 0 || (raw && i == int(outOK)) || (!raw && i != int(outOK) && i != int(outOther)) {
			m[outcomeNames[i]] = int(n)
		}
	}
	return m
}

func latency(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return Latency{
		Count: int(h.TotalCount()),
		Min:   us(h.Min()),
		Mean:  time.Duration(h.Mean() * float64(time.Microsecond)),
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P95:   us(h.ValueAtQuantile(95)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
	}
}

func targets(bases []string, path string) []string {
	out := make([]string, len(bases))
	for i, b := range bases {
		out[i] = b + path
	}
	return out
}

func label(st Strategy) string {
	if st.Name == "" {
		return "default"
	}
	return st.Name
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b)
}

// settings echoes cfg, and the products of a catalogue.
func settings(cfg Config, products []client.Product) Settings {
	s := Settings{
		URLs: cfg.URLs, ProductID: cfg.ProductID, Products: cfg.Products, Stock: cfg.Stock, Strategies: cfg.Strategies,
		Mode: "closed", Requests: cfg.Requests, Concurrency: cfg.Concurrency, Rates: cfg.Rates,
		Duration: cfg.Duration, Warmup: cfg.Warmup, Hold: cfg.Hold, Pause: cfg.Pause, Batch: cfg.Batch,
		Fencing: cfg.Fencing, Quantity: cfg.Quantity, Endpoint: cfg.Endpoint, Timeout: cfg.Timeout,
	}
	if cfg.Open() {
		s.Mode = "open"
		s.Requests = cfg.scheduled()
	}
	if cfg.Products > 0 {
		s.Zipf = cfg.Zipf
		s.Catalogue = make([]CatalogueProduct, len(products))
		for k, p := range products {
			s.Catalogue[k] = CatalogueProduct{ID: p.ID, Name: p.Name}
		}
	}
	return s
}

func environment() Environment {
	host, _ := os.Hostname() // a report without a host name is still a report
	return Environment{
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Hostname:   host,
	}
}
