package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/loadtest/driver"
)

// The lease-overrun scenario: a lease shorter than the first buyer's work,
// and a second buyer who arrives after the lease ran out.
const (
	overrunTTL    = 300 * time.Millisecond
	overrunPauseA = 1200 * time.Millisecond
	overrunDelay  = 600 * time.Millisecond
)

// guarding says in a few words what guards the stock under a strategy, for
// a table read from the back of a room.
func guarding(strategy string) string {
	switch strategy {
	case "none":
		return "nothing: read, check, write"
	case "local":
		return "a mutex inside each instance"
	case "setnx":
		return "SETNX + GETSET, expiry in value"
	case "token":
		return "SET NX PX + Lua compare-and-delete"
	case "redlock":
		return "Redlock: a majority of Redis nodes"
	case "pessimistic":
		return "row lock: one transaction"
	case "optimistic":
		return "UPDATE ... WHERE stock >= q"
	}
	return ""
}

type demoFlags struct {
	stock       int64
	requests    int
	concurrency int
	hold        time.Duration
	report      string
	details     bool
}

func parseDemoFlags(args []string, out io.Writer) (demoFlags, error) {
	var f demoFlags
	fs := flag.NewFlagSet("seckill demo", flag.ContinueOnError)
	fs.SetOutput(out)
	// An odd stock by default: two instances whose local locks run in step
	// sell in pairs, and the last pair then finds one unit for two.
	fs.Int64Var(&f.stock, "stock", 49, "units of the product on sale in each run")
	fs.IntVar(&f.requests, "requests", 400, "purchases per strategy, spread over both instances")
	fs.IntVar(&f.concurrency, "concurrency", 32, "buyers at a time")
	fs.DurationVar(&f.hold, "hold", 20*time.Millisecond, "simulated work inside the critical section of every purchase")
	fs.StringVar(&f.report, "report", "", "also write the comparison as a self-contained HTML page to this file")
	fs.BoolVar(&f.details, "details", false, "also print the load driver's full table (latency, throughput, outcomes)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	switch {
	case fs.NArg() > 0:
		return f, fmt.Errorf("demo: unexpected argument %q", fs.Arg(0))
	case f.stock < 1:
		return f, errors.New("demo: -stock must be at least 1")
	case f.requests < 1 || f.concurrency < 1:
		return f, errors.New("demo: -requests and -concurrency must be at least 1")
	case f.hold < 0 || f.hold > 10*time.Second:
		return f, errors.New("demo: -hold must be from 0 to 10s")
	}
	return f, nil
}

// demo starts two instances of the service on shared stores (embedded
// unless SECKILL_MYSQL_DSN and SECKILL_REDIS_ADDRS are set), runs the load
// driver's comparison of every strategy across both, then the lease-overrun
// scenario with fencing off and on, and prints what happened. It fails when
// a strategy marked safe broke the stock invariant.
func demo(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) (err error) {
	f, err := parseDemoFlags(args, stdout)
	if err != nil {
		return err
	}
	cfg, err := app.LoadConfig(getenv, true)
	if err != nil {
		return err
	}
	if !cfg.StrategyOverride {
		return errors.New("demo: SECKILL_STRATEGY_OVERRIDE=false: the demo chooses each purchase's strategy, unset it")
	}
	// Warnings (the embedded stores) go to the audience; the instances only
	// speak up for errors: a lease that expires is the point of the demo.
	st, err := app.OpenStores(ctx, cfg, slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	quiet := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: slog.LevelError}))

	sale, stopSale, err := startInstances(ctx, cfg, st, quiet, 2)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopSale()) }()
	fmt.Fprintf(stdout, "\nseckill demo: two instances (%s), one product of %d units, %d buyers (%d at a time), %s of work inside the lock\n",
		strings.Join(sale, ", "), f.stock, f.requests, f.concurrency, f.hold)

	var progress io.Writer
	if file, ok := stdout.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		progress = file
	}
	rep, err := driver.Run(ctx, driver.Config{
		URLs:        sale,
		AdminToken:  cfg.AdminToken,
		Stock:       f.stock,
		Strategies:  []string{"all"},
		Requests:    f.requests,
		Concurrency: f.concurrency,
		Hold:        f.hold,
		Quantity:    1,
		Progress:    progress,
	})
	if err != nil {
		return fmt.Errorf("demo: load driver: %w", err)
	}

	short := cfg
	short.LockTTL = overrunTTL
	overrun, stopOverrun, err := startInstances(ctx, short, st, quiet, 2)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopOverrun()) }()
	runs, err := leaseOverrun(ctx, overrun, cfg.AdminToken)
	if err != nil {
		return err
	}

	if err := writeSaleTable(stdout, rep); err != nil {
		return err
	}
	if err := writeOverrunTable(stdout, runs); err != nil {
		return err
	}
	if f.details {
		fmt.Fprintln(stdout, "\nThe load driver's figures:")
		if err := rep.WriteTable(stdout); err != nil {
			return err
		}
	}
	if f.report != "" {
		if err := writeReport(f.report, rep); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nHTML report: %s\n", f.report)
	}

	failures := rep.Failures()
	for _, r := range runs {
		if r.fencing && !r.held() {
			failures = append(failures, fmt.Sprintf("%s with fencing: stock %d, oversold %d", r.strategy, r.audit.Stock, r.audit.OversoldUnits))
		}
	}
	if len(failures) > 0 {
		fmt.Fprintln(stdout, "\nFAILED: a strategy marked safe broke the stock invariant.")
		return fmt.Errorf("demo: %s", strings.Join(failures, "; "))
	}
	fmt.Fprintln(stdout, "\nEvery safe strategy held: stock never went below zero and no unit was sold twice.")
	return nil
}

// startInstances starts n instances of the service over st on free ports of
// 127.0.0.1 and returns their URLs and a function that shuts them down.
func startInstances(ctx context.Context, cfg config.Config, st *app.Stores, log *slog.Logger, n int) ([]string, func() error, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		urls []string
		errs = make(chan error, n)
	)
	stop := func() error {
		cancel()
		var all []error
		for range urls {
			all = append(all, <-errs)
		}
		return errors.Join(all...)
	}
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, errors.Join(fmt.Errorf("demo: listen: %w", err), stop())
		}
		srv := app.NewServer(ctx, cfg, st, log, app.Options{})
		go func() { errs <- app.Serve(ctx, srv, ln, cfg, log) }()
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls, stop, nil
}

// overrunRun is one lease-overrun scenario: buyer A holds the lock longer
// than its lease, buyer B takes the lock after the lease ran out.
type overrunRun struct {
	strategy string
	fencing  bool
	a, b     string // each buyer's answer: "201 created" or "503 lock_lost"
	audit    driver.Audit
}

// held says the stock invariant held.
func (r overrunRun) held() bool { return r.audit.Consistent && r.audit.OversoldUnits == 0 }

// leaseOverrun runs the scenario for every fenceable lock, with fencing off
// and on. The strategies of one round run at once, each on a product of
// its own.
func leaseOverrun(ctx context.Context, urls []string, adminToken string) ([]overrunRun, error) {
	c := &apiClient{http: &http.Client{Timeout: 30 * time.Second}, token: adminToken}
	var runs []overrunRun
	for _, fencing := range []bool{false, true} {
		round := []overrunRun{{strategy: "setnx"}, {strategy: "token"}, {strategy: "redlock"}}
		var (
			wg   sync.WaitGroup
			errs = make([]error, len(round))
		)
		for i := range round {
			round[i].fencing = fencing
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = c.overrun(ctx, urls, &round[i])
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("demo: lease overrun: %w", err)
		}
		runs = append(runs, round...)
	}
	return runs, nil
}

// overrun plays one scenario on a new product of one unit: A on the first
// instance, B on the second.
func (c *apiClient) overrun(ctx context.Context, urls []string, r *overrunRun) error {
	var product struct {
		ID int64 `json:"id"`
	}
	name := fmt.Sprintf("lease overrun %s fencing=%t", r.strategy, r.fencing)
	if err := c.do(ctx, http.MethodPost, urls[0]+"/api/v1/admin/products", map[string]any{"name": name, "stock": 1}, &product); err != nil {
		return err
	}
	buy := func(base, user string, pause time.Duration) (string, error) {
		q := url.Values{"strategy": {r.strategy}, "pause_ms": {fmt.Sprint(pause.Milliseconds())}, "fencing": {fmt.Sprint(r.fencing)}}
		u := fmt.Sprintf("%s/api/v1/products/%d/purchase?%s", base, product.ID, q.Encode())
		return c.answer(ctx, u, map[string]any{"user_id": user, "quantity": 1})
	}
	aErr := make(chan error, 1)
	go func() {
		var err error
		r.a, err = buy(urls[0], "buyer-a", overrunPauseA)
		aErr <- err
	}()
	select {
	case <-time.After(overrunDelay):
	case <-ctx.Done():
		return errors.Join(ctx.Err(), <-aErr)
	}
	var err error
	r.b, err = buy(urls[1%len(urls)], "buyer-b", 0)
	if err = errors.Join(err, <-aErr); err != nil {
		return err
	}
	return c.do(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/products/%d/audit", urls[0], product.ID), nil, &r.audit)
}

// apiClient makes the demo's own calls to the service.
type apiClient struct {
	http  *http.Client
	token string
}

// send sends body as JSON with the admin token and returns the answer's
// status and body.
func (c *apiClient) send(ctx context.Context, method, u string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	return resp.StatusCode, b, nil
}

// do sends body and decodes a 2xx answer into out.
func (c *apiClient) do(ctx context.Context, method, u string, body, out any) error {
	status, b, err := c.send(ctx, method, u, body)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("%s %s: %d: %s", method, u, status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, u, err)
	}
	return nil
}

// answer makes a purchase and says how it went: "201 created", or the
// status and the contract's error code.
func (c *apiClient) answer(ctx context.Context, u string, body any) (string, error) {
	status, b, err := c.send(ctx, http.MethodPost, u, body)
	if err != nil {
		return "", err
	}
	if status == http.StatusCreated {
		return "201 created", nil
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error.Code == "" {
		return fmt.Sprint(status), nil
	}
	return fmt.Sprintf("%d %s", status, e.Error.Code), nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeSaleTable prints the comparison: what each strategy is, what it sold
// and whether the stock invariant held.
func writeSaleTable(w io.Writer, rep *driver.Report) error {
	fmt.Fprintln(w, "\nTHE SALE: every strategy in turn, requests spread over both instances")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tWHAT GUARDS THE STOCK\tSAFE\tORDERS\tUNITS SOLD\tFINAL STOCK\tOVERSOLD\tVERDICT")
	for _, r := range rep.Results {
		what := guarding(r.Strategy)
		if what == "" {
			what = r.Description
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.Strategy, what, yesNo(r.Safe),
			r.Audit.Orders, r.Audit.UnitsSold, r.Audit.Stock, r.Audit.OversoldUnits, r.Verdict)
	}
	return tw.Flush()
}

// writeOverrunTable prints the lease-overrun scenario.
func writeOverrunTable(w io.Writer, runs []overrunRun) error {
	fmt.Fprintf(w, "\nLEASE OVERRUN: lock lease %s; buyer A is paused %s inside the lock (watchdog too), buyer B arrives at %s; 1 unit\n",
		overrunTTL, overrunPauseA, overrunDelay)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tFENCING\tBUYER A (overran)\tBUYER B\tFINAL STOCK\tOVERSOLD\tVERDICT")
	for _, r := range runs {
		verdict := "held"
		switch {
		case !r.held():
			verdict = "OVERSOLD: A wrote after B"
		case r.fencing && strings.Contains(r.a, "lock_lost"):
			verdict = "held: A fenced off"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.strategy, onOff(r.fencing),
			r.a, r.b, r.audit.Stock, r.audit.OversoldUnits, verdict)
	}
	return tw.Flush()
}

func writeReport(path string, rep *driver.Report) error {
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("demo: report: %w", err)
	}
	if err := rep.WriteHTML(file); err != nil {
		return errors.Join(fmt.Errorf("demo: report: %w", err), file.Close())
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("demo: report: %w", err)
	}
	return nil
}
