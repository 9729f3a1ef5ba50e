package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrOverrideDisabled is wrapped by Run's error when an instance answered
// 403 strategy_override_disabled.
var ErrOverrideDisabled = errors.New("driver: strategy override disabled")

// Run fires the load of cfg at its instances, once per strategy, and
// reports what it measured and what the audit said. It first checks every
// instance's /healthz and fails when one cannot be reached. Errors of the
// run itself (a transport error, a 5xx) are counted, not returned; Run
// returns an error when it cannot run at all, when an instance refuses the
// strategy override, or when ctx ends (with what was measured so far).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The bookkeeping calls go through net/http; each run of the load
	// opens a fasthttp client of its own (see plan.run).
	client := newClient(cfg.Timeout)
	defer client.CloseIdleConnections()
	for _, u := range cfg.URLs {
		if err := (api{client: client, base: u}).healthz(ctx); err != nil {
			return nil, err
		}
	}
	rep := &Report{Start: time.Now(), Environment: environment()}
	if cfg.Endpoint != "" {
		rep.Config = settings(cfg)
		res := raw(ctx, cfg)
		rep.Results = append(rep.Results, res)
		return rep, ctx.Err()
	}

	admin := api{client: client, base: cfg.URLs[0], token: cfg.AdminToken}
	strategies, err := resolveStrategies(ctx, admin, cfg.Strategies)
	if err != nil {
		return nil, err
	}
	if cfg.ProductID == 0 {
		if cfg.Stock == 0 {
			cfg.Stock = DefaultStock
		}
		p, err := admin.createProduct(ctx, "loadtest "+time.Now().UTC().Format(time.RFC3339), cfg.Stock)
		if err != nil {
			return nil, fmt.Errorf("driver: create a product: %w", err)
		}
		cfg.ProductID = p.ID
	} else if _, err := admin.product(ctx, cfg.ProductID); err != nil {
		return nil, fmt.Errorf("driver: product %d: %w", cfg.ProductID, err)
	}
	rep.Config = settings(cfg)

	prefix := "lt" + randomHex(4) + "-"
	for i, st := range strategies {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		res, err := runStrategy(ctx, cfg, admin, st, prefix+strconv.Itoa(i)+"-")
		if res != nil {
			rep.Results = append(rep.Results, *res)
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// resolveStrategies turns Config.Strategies into what to run, with the
// server's descriptions.
func resolveStrategies(ctx context.Context, admin api, names []string) ([]Strategy, error) {
	if len(names) == 1 && names[0] == "" {
		return []Strategy{{}}, nil
	}
	listed, err := admin.strategies(ctx)
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

// runStrategy resets the stock, runs the load under one strategy and reads
// the audit. A nil Result comes with an error.
func runStrategy(ctx context.Context, cfg Config, admin api, st Strategy, prefix string) (*Result, error) {
	if cfg.Stock > 0 {
		if _, err := admin.setStock(ctx, cfg.ProductID, cfg.Stock); err != nil {
			return nil, fmt.Errorf("driver: reset the stock: %w", err)
		}
	}
	before, err := admin.audit(ctx, cfg.ProductID)
	if err != nil {
		return nil, fmt.Errorf("driver: audit before %s: %w", label(st), err)
	}

	q := url.Values{}
	if st.Name != "" {
		q.Set("strategy", st.Name)
	}
	if cfg.Hold > 0 {
		q.Set("hold_ms", strconv.FormatInt(cfg.Hold.Milliseconds(), 10))
	}
	if cfg.Fencing != nil {
		q.Set("fencing", strconv.FormatBool(*cfg.Fencing))
	}
	path := "/api/v1/products/" + strconv.FormatInt(cfg.ProductID, 10) + "/purchase"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	p := &plan{
		timeout:         cfg.Timeout,
		targets:         targets(cfg.URLs, path),
		purchase:        true,
		head:            []byte(`{"user_id":"` + prefix),
		mid:             []byte(`","quantity":` + strconv.FormatInt(cfg.Quantity, 10) + `,"request_id":"` + prefix),
		tail:            []byte(`"}`),
		n:               cfg.total(),
		rate:            cfg.Rate,
		workers:         cfg.Concurrency,
		progress:        cfg.Progress,
		label:           label(st),
		captureStrategy: st.Name == "",
	}
	t := p.run(ctx)
	if t.overrideDisabled != "" {
		return nil, fmt.Errorf("%w: %s answered 403 strategy_override_disabled: the service must run with SECKILL_STRATEGY_OVERRIDE=true for a purchase to choose its strategy, hold or fencing", ErrOverrideDisabled, t.overrideDisabled)
	}
	res := result(t, false)
	res.Strategy, res.Description, res.Safe = st.Name, st.Description, st.Safe
	if st.Name == "" {
		res.Default = true
		res.Strategy = t.orderStrategy
		res.Safe = true // judged strictly: the driver cannot tell which strategy served
		if listed, err := admin.strategies(ctx); err == nil && t.orderStrategy != "" {
			for _, s := range listed {
				if s.Name == t.orderStrategy {
					res.Description, res.Safe = s.Description, s.Safe
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		res.Verdict = "interrupted"
		return &res, err
	}

	after, err := admin.audit(ctx, cfg.ProductID)
	if err != nil {
		return nil, fmt.Errorf("driver: audit after %s: %w", label(st), err)
	}
	res.Audited = true
	res.AuditBefore, res.Audit = before, after
	res.RunOrders = after.Orders - before.Orders
	res.RunUnits = after.UnitsSold - before.UnitsSold
	res.CountsAgree = res.RunOrders == int64(res.Successes) && res.RunUnits == int64(res.Successes)*cfg.Quantity
	switch {
	case t.firstSoldOut >= 0:
		res.TimeToSoldOut = t.firstSoldOut
	case after.Stock <= 0 && t.lastCreated >= 0:
		res.TimeToSoldOut = t.lastCreated
	}
	res.Verdict = res.verdict()
	return &res, nil
}

// raw GETs cfg.Endpoint: the driver's own measure, with no product.
func raw(ctx context.Context, cfg Config) Result {
	p := &plan{
		timeout:  cfg.Timeout,
		targets:  targets(cfg.URLs, cfg.Endpoint),
		n:        cfg.total(),
		rate:     cfg.Rate,
		workers:  cfg.Concurrency,
		progress: cfg.Progress,
		label:    "GET " + cfg.Endpoint,
	}
	res := result(p.run(ctx), true)
	res.Strategy = "GET " + cfg.Endpoint
	res.Description = "raw mode: GET " + cfg.Endpoint + " instead of purchases"
	res.Verdict = res.verdict()
	return res
}

// result turns a tally into a Result without the audit.
func result(t *tally, raw bool) Result {
	res := Result{
		Requests:     int(t.total()),
		Outcomes:     map[string]int{},
		Codes:        map[string]int{},
		Elapsed:      t.elapsed,
		MaxSendDelay: t.maxSendDelay,
		Samples:      t.samples,
		Raw:          raw,
	}
	for i, n := range t.counts {
		name := outcomeNames[i]
		if n > 0 || (raw && i == int(outOK)) || (!raw && i != int(outOK) && i != int(outOther)) {
			res.Outcomes[name] = int(n)
		}
	}
	for k, v := range t.codes {
		res.Codes[k] = int(v)
	}
	if raw {
		res.Successes = int(t.counts[outOK])
	} else {
		res.Successes = int(t.counts[outCreated])
	}
	if s := t.elapsed.Seconds(); s > 0 {
		res.Throughput = float64(res.Requests) / s
		res.SuccessThroughput = float64(res.Successes) / s
	}
	if t.hist.TotalCount() > 0 {
		us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
		res.Latency = Latency{
			Min:  us(t.hist.Min()),
			Mean: time.Duration(t.hist.Mean() * float64(time.Microsecond)),
			P50:  us(t.hist.ValueAtQuantile(50)),
			P90:  us(t.hist.ValueAtQuantile(90)),
			P95:  us(t.hist.ValueAtQuantile(95)),
			P99:  us(t.hist.ValueAtQuantile(99)),
			P999: us(t.hist.ValueAtQuantile(99.9)),
			Max:  us(t.hist.Max()),
		}
	}
	return res
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

func settings(cfg Config) Settings {
	s := Settings{
		URLs: cfg.URLs, ProductID: cfg.ProductID, Stock: cfg.Stock, Strategies: cfg.Strategies,
		Mode: "closed", Requests: cfg.total(), Concurrency: cfg.Concurrency, Rate: cfg.Rate,
		Duration: cfg.Duration, Hold: cfg.Hold, Fencing: cfg.Fencing, Quantity: cfg.Quantity,
		Endpoint: cfg.Endpoint, Timeout: cfg.Timeout,
	}
	if cfg.Open() {
		s.Mode = "open"
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
