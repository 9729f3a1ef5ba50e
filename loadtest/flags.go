package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/loadtest/driver"
)

// parseFlags turns the command line into a driver.Config. Every error is a
// usageError (or flag.ErrHelp).
func parseFlags(args []string, stderr io.Writer) (driver.Config, options, error) {
	var (
		cfg driver.Config
		opt options
		raw rawFlags
	)
	fs := newFlagSet(stderr, &cfg, &opt, &raw)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, opt, err
		}
		return cfg, opt, usageError{err.Error()}
	}
	if opt.keygen != "" {
		var other []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "keygen" {
				other = append(other, "-"+f.Name)
			}
		})
		switch {
		case fs.NArg() > 0:
			return cfg, opt, usagef("unexpected argument %q", fs.Arg(0))
		case len(other) > 0:
			return cfg, opt, usagef("-keygen writes a key and exits: %s do not apply", strings.Join(other, ", "))
		}
		return cfg, opt, nil
	}
	tokenSet := false
	fs.Visit(func(f *flag.Flag) { tokenSet = tokenSet || f.Name == "token" })
	if tokenSet {
		return cfg, opt, raw.tokenOnly(fs, &cfg, opt.token)
	}
	if opt.check != "" || opt.checkHTML != "" {
		if opt.check == "" {
			return cfg, opt, usageError{"-check-html draws the history that -check reads: give -check"}
		}
		return cfg, opt, nil // nothing else applies
	}
	raw.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { raw.set[f.Name] = true })
	if cfg.AdminToken == "" {
		cfg.AdminToken = os.Getenv("SECKILL_ADMIN_TOKEN")
	}
	if fs.NArg() > 0 {
		return cfg, opt, usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := raw.apply(&cfg); err != nil {
		return cfg, opt, err
	}
	if err := raw.check(cfg); err != nil {
		return cfg, opt, err
	}
	if raw.buyerKey != "" {
		if err := raw.signer(&cfg); err != nil {
			return cfg, opt, err
		}
	}
	if cfg.ProductID == 0 && !raw.newProduct {
		cfg.ProductName = driver.DefaultProductName
	}
	open := len(cfg.Rates) > 0
	if open && cfg.Duration == 0 {
		cfg.Duration = 10 * time.Second
	}
	if open || raw.set["duration"] {
		cfg.Requests = 0
	}
	return cfg, opt, nil
}

// signer reads -buyer-key into cfg's BuyerTokens.
func (raw *rawFlags) signer(cfg *driver.Config) error {
	key, err := buyer.ReadPrivateKey(raw.buyerKey)
	if err != nil {
		return usagef("-buyer-key: %v", err)
	}
	signer, err := buyer.NewSigner(key, raw.buyerKid)
	if err != nil {
		return usagef("-buyer-key: %v", err)
	}
	cfg.BuyerTokens = &driver.BuyerTokens{Signer: signer, Audience: raw.buyerAudience, Issuer: raw.buyerIssuer}
	return nil
}

// tokenOnly checks -token USER's command line, -buyer-key and its shape
// only, and reads the key.
func (raw *rawFlags) tokenOnly(fs *flag.FlagSet, cfg *driver.Config, user string) error {
	var other []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "token" && !strings.HasPrefix(f.Name, "buyer-") {
			other = append(other, "-"+f.Name)
		}
	})
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q", fs.Arg(0))
	case len(other) > 0:
		return usagef("-token prints a token and exits: %s do not apply", strings.Join(other, ", "))
	case raw.buyerKey == "":
		return usagef("-token %s signs with -buyer-key: give it", user)
	case user == "" || len(user) > 64:
		return usagef("-token: a user_id is 1 to 64 characters, not %d", len(user))
	}
	return raw.signer(cfg)
}

// rawFlags are the flags read into the Config after the command line is
// parsed, as they were given, and the names of the flags given.
type rawFlags struct {
	urls, strategies, fencing string
	get, rates                string
	newProduct                bool
	// The buyers' tokens (SECKILL_BUYER_AUTH=jwt): the key's file, its
	// kid (empty: its thumbprint), the audience and the issuer.
	buyerKey, buyerKid, buyerAudience, buyerIssuer string
	set                                            map[string]bool
}

// usagef is a usageError.
func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// newFlagSet defines the command's flags, each read into cfg, opt or raw.
// The list is long on purpose: one flag a line, in the order -help shows.
func newFlagSet(stderr io.Writer, cfg *driver.Config, opt *options, raw *rawFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: go run ./loadtest [flags]\n\nFires purchases at seckill instances and checks the stock invariant through /audit.\n\nFlags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&raw.urls, "url", "http://127.0.0.1:8080", "instances' base URLs, comma-separated, sent to in turn")
	fs.Int64Var(&cfg.ProductID, "product", 0, "product `id` to buy; 0: the one named loadtest, created when missing (needs the token)")
	fs.BoolVar(&raw.newProduct, "new-product", false, "without -product: create a new product for this run, not reuse loadtest")
	fs.IntVar(&cfg.Products, "products", 0, "spread the purchases over `N` products, loadtest-1 to loadtest-N (reused by name)")
	fs.Float64Var(&cfg.Zipf, "zipf", 1, "with -products: the Zipf law's exponent `S` that picks each product; 0: uniform")
	fs.Int64Var(&cfg.Stock, "stock", 0, "reset the stock to this before each run, deleting its orders (needs the token);\n"+
		"0: 100 for the loadtest products, or leave that of -product")
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "bearer `token` of the admin API and the override flags (default $SECKILL_ADMIN_TOKEN)")
	fs.StringVar(&raw.strategies, "strategy", "", "strategy `name`, a comma-separated list, or all; empty: the server's default")
	fs.IntVar(&cfg.Requests, "requests", driver.DefaultRequests, "closed loop: requests in all, per strategy (after the warmup)")
	fs.IntVar(&cfg.Concurrency, "concurrency", driver.DefaultConcurrency, "workers (closed loop) or most requests in flight (open loop)")
	fs.StringVar(&raw.rates, "rate", "", "open loop: requests per second, or steps `r1,r2,...` of -duration each")
	fs.DurationVar(&cfg.Duration, "duration", 0, "closed loop: run this long, not -requests; open loop: each -rate step (default 10s)")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "load this long first (open loop: at the first -rate), its answers left out of the figures")
	fs.DurationVar(&cfg.Hold, "hold", 0, "simulated work in each purchase's critical section (hold_ms; whole ms, at most 10s)")
	fs.DurationVar(&cfg.Pause, "pause", 0, "simulated process pause in each critical section (pause_ms; whole ms, at most 10s)")
	fs.IntVar(&cfg.Batch, "batch", 0, "most purchases sold per hold of the lock (batch=, 1 to 1000); 0: SECKILL_BATCH")
	fs.StringVar(&raw.fencing, "fencing", "", "true or false: fencing of the Redis locks for every purchase; empty: the server's default")
	fs.Int64Var(&cfg.Quantity, "quantity", 1, "units per purchase (1 to 100)")
	fs.DurationVar(&cfg.Timeout, "timeout", driver.DefaultTimeout, "longest wait for an answer once its request is sent")
	fs.DurationVar(&cfg.Drain, "drain", driver.DefaultDrain, "after a run that got 202s (reserve): longest wait for every promise\n"+
		"to become an order, asked by request_id; one that does not fails the run")
	fs.Float64Var(&cfg.Cancel, "cancel", 0, "cancel this fraction (0 to 1) of the orders a run makes, as their buyers,\n"+
		"while the run goes on; -history records the cancels")
	fs.StringVar(&raw.get, "get", "", "raw mode: GET this `path` (e.g. /healthz) instead of purchasing, to measure the driver itself")
	fs.StringVar(&raw.get, "endpoint", "", "the same as -get (an older name)")
	fs.StringVar(&opt.json, "json", "", "also write every figure as JSON to this `file`")
	fs.StringVar(&opt.csv, "csv", "", "also write one row per second of each run to this `file` (CSV)")
	fs.BoolVar(&opt.wide, "wide", false, "print every column in one table (wider than 100 columns)")
	fs.StringVar(&opt.report, "report", "", "also write a self-contained HTML page with charts to this `file`")
	fs.BoolVar(&opt.quiet, "quiet", false, "no progress (on a terminal a line redrawn in place; elsewhere a line every 5s)")
	fs.IntVar(&cfg.Clients, "clients", 0, "send from this many loopback addresses (127.0.0.1 on): that many clients to SECKILL_IP_LIMIT")
	fs.StringVar(&cfg.History, "history", "", "write every purchase as it is answered to this `file` (JSON lines), and check it")
	fs.StringVar(&opt.check, "check", "", "check the history in this `file` for linearizability and exit; no instance needed")
	fs.StringVar(&opt.checkHTML, "check-html", "", "with -check: also draw the history as a page in this `file`")
	fs.StringVar(&opt.out, "out", defaultOut, "`dir` of the files that -json, -csv, -report, -history and -check-html\n"+
		"name without a directory; created when needed")
	fs.StringVar(&raw.buyerKey, "buyer-key", "", "under SECKILL_BUYER_AUTH=jwt: sign each buyer's token with this PEM private key `file`\n"+
		"(RSA, EC P-256 or Ed25519), sent on the buyer's purchase, cancel and promise polls")
	fs.StringVar(&raw.buyerKid, "buyer-kid", "", "the `kid` of -buyer-key's tokens (default the key's RFC 7638 thumbprint, as -keygen's JWK Set)")
	fs.StringVar(&raw.buyerAudience, "buyer-audience", "seckill", "the `aud` of -buyer-key's tokens (SECKILL_BUYER_AUDIENCE)")
	fs.StringVar(&raw.buyerIssuer, "buyer-issuer", "", "the `iss` of -buyer-key's tokens (SECKILL_BUYER_ISSUER); empty: none")
	fs.StringVar(&opt.keygen, "keygen", "", "write a buyer-token key (ES256) to `dir`/key.pem and its JWK Set to dir/jwks.json, for\n"+
		"-buyer-key and SECKILL_BUYER_JWKS, and exit")
	fs.StringVar(&opt.token, "token", "", "print a token for the buyer `user_id`, signed with -buyer-key (for curl), and exit")
	return fs
}

// apply reads the flags of raw into cfg: the instances, the strategies,
// the fencing, the raw mode's path and the open loop's rates.
func (raw rawFlags) apply(cfg *driver.Config) error {
	for _, u := range strings.Split(raw.urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.URLs = append(cfg.URLs, u)
		}
	}
	if len(cfg.URLs) == 0 {
		return usagef("-url names no instance")
	}
	switch strategies := strings.TrimSpace(raw.strategies); strategies {
	case "":
		cfg.Strategies = []string{""}
	case "all":
		cfg.Strategies = nil
	default:
		for _, s := range strings.Split(strategies, ",") {
			s = strings.TrimSpace(s)
			if s == "" || s == "all" {
				return usagef("-strategy %q: give one name, a comma-separated list of names, or all", strategies)
			}
			cfg.Strategies = append(cfg.Strategies, s)
		}
	}
	if raw.fencing != "" {
		b, err := strconv.ParseBool(raw.fencing)
		if err != nil {
			return usagef("-fencing %q: want true or false", raw.fencing)
		}
		cfg.Fencing = &b
	}
	cfg.Endpoint = raw.get
	if raw.rates != "" {
		for _, f := range strings.Split(raw.rates, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(r > 0) || math.IsInf(r, 0) {
				return usagef("-rate %q: want positive numbers of requests per second, comma-separated", raw.rates)
			}
			cfg.Rates = append(cfg.Rates, r)
		}
	}
	return nil
}

// check says which flags do not go together, or have a value out of
// range. It is one rule a case, long on purpose, in the order they are
// checked.
func (raw rawFlags) check(cfg driver.Config) error {
	open := len(cfg.Rates) > 0
	switch {
	case raw.set["rate"] && !open:
		return usagef("-rate %q: want a positive number of requests per second", raw.rates)
	case open && raw.set["requests"]:
		return usagef("-requests is the closed loop's, -rate with -duration the open loop's: give one")
	case raw.set["duration"] && raw.set["requests"]:
		return usagef("the closed loop runs -requests or -duration, not both")
	case raw.set["duration"] && cfg.Duration <= 0:
		return usagef("-duration %s: want a positive duration", cfg.Duration)
	case cfg.Warmup < 0:
		return usagef("-warmup %s: want 0 or a positive duration", cfg.Warmup)
	case cfg.Requests < 1:
		return usagef("-requests %d: want at least 1", cfg.Requests)
	case cfg.Concurrency < 1:
		return usagef("-concurrency %d: want at least 1", cfg.Concurrency)
	case cfg.Timeout <= 0:
		return usagef("-timeout %s: want a positive duration", cfg.Timeout)
	case cfg.Drain <= 0:
		return usagef("-drain %s: want a positive duration", cfg.Drain)
	case cfg.Quantity < 1 || cfg.Quantity > 100:
		return usagef("-quantity %d: want 1 to 100", cfg.Quantity)
	case cfg.Hold < 0 || cfg.Hold > driver.MaxHold || cfg.Pause < 0 || cfg.Pause > driver.MaxHold:
		return usagef("-hold %s, -pause %s: want 0 to %s", cfg.Hold, cfg.Pause, driver.MaxHold)
	case cfg.Hold%time.Millisecond != 0 || cfg.Pause%time.Millisecond != 0:
		return usagef("-hold %s, -pause %s: the service takes whole milliseconds", cfg.Hold, cfg.Pause)
	case raw.set["batch"] && (cfg.Batch < 1 || cfg.Batch > driver.MaxBatch):
		return usagef("-batch %d: want 1 to %d", cfg.Batch, driver.MaxBatch)
	case cfg.Stock < 0:
		return usagef("-stock %d: want 0 or more", cfg.Stock)
	case cfg.ProductID < 0:
		return usagef("-product %d: want a product id, or 0 to create one", cfg.ProductID)
	case raw.get != "" && (raw.set["strategy"] || raw.set["hold"] || raw.set["pause"] || raw.set["batch"] || raw.set["fencing"] || raw.set["product"] || raw.set["stock"] || raw.set["quantity"] || raw.set["drain"] || raw.set["cancel"]):
		return usagef("-get fires plain GETs: -strategy, -hold, -pause, -batch, -fencing, -product, -stock, -quantity, -drain and -cancel do not apply")
	case cfg.Cancel < 0 || cfg.Cancel > 1 || cfg.Cancel != cfg.Cancel:
		return usagef("-cancel %v: want a fraction from 0 to 1", cfg.Cancel)
	case raw.get == "" && cfg.Stock > 0 && cfg.AdminToken == "":
		return usagef("-stock resets the stock through the admin API: give -admin-token")
	case raw.get == "" && cfg.ProductID == 0 && cfg.AdminToken == "":
		return usagef("no -product: give one, or -admin-token to use (or create) the product named loadtest")
	case raw.newProduct && cfg.ProductID != 0:
		return usagef("-new-product creates the product that -product names: give one")
	case cfg.Products < 0 || cfg.Products > driver.MaxProducts:
		return usagef("-products %d: want 0 (one product) or 1 to %d", cfg.Products, driver.MaxProducts)
	case cfg.Products > 0 && (cfg.ProductID != 0 || raw.newProduct):
		return usagef("-products buys the catalogue loadtest-1 to loadtest-%d: -product and -new-product do not apply", cfg.Products)
	case raw.set["zipf"] && cfg.Products == 0:
		return usagef("-zipf picks among the products of -products: give -products")
	case !(cfg.Zipf >= 0) || math.IsInf(cfg.Zipf, 0):
		return usagef("-zipf %g: want 0 (uniform) or more", cfg.Zipf)
	case raw.get != "" && (raw.set["products"] || raw.set["new-product"]):
		return usagef("-get fires plain GETs: -products and -new-product do not apply")
	case raw.buyerKey == "" && (raw.set["buyer-kid"] || raw.set["buyer-audience"] || raw.set["buyer-issuer"]):
		return usagef("-buyer-kid, -buyer-audience and -buyer-issuer shape the tokens of -buyer-key: give it")
	case raw.buyerKey != "" && raw.get != "":
		return usagef("-get fires plain GETs: -buyer-key does not apply")
	case raw.buyerKey != "" && (raw.set["strategy"] || raw.set["hold"] || raw.set["pause"] || raw.set["batch"] || raw.set["fencing"]):
		return usagef("-buyer-key sends each buyer's token, and -strategy, -hold, -pause, -batch and -fencing need the admin token in the same header: run against the instance's SECKILL_LOCK")
	}
	return nil
}
