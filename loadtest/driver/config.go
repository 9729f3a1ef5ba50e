package driver

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/loadtest/driver/load"
)

// Defaults of Config.
const (
	// DefaultConcurrency is the number of workers when Config.Concurrency is 0.
	DefaultConcurrency = 64
	// DefaultRequests is the closed loop's request count when neither
	// Config.Requests nor Config.Duration is set.
	DefaultRequests = 1000
	// DefaultStock is the stock of a product the driver creates when
	// Config.Stock is 0.
	DefaultStock = 100
	// DefaultTimeout is the longest wait for an answer when Config.Timeout
	// is 0.
	DefaultTimeout = 30 * time.Second
	// DefaultDrain is the longest wait after a run for its promises (the
	// 202s of reserve) to become orders when Config.Drain is 0.
	DefaultDrain = 30 * time.Second
	// MaxHold is the longest hold (and pause) the service accepts
	// (hold_ms=10000).
	MaxHold = api.MaxHold
	// MaxBatch is the largest batch the service accepts (api.MaxBatch).
	MaxBatch = api.MaxBatch
	// MaxClients is the most loopback source addresses (Config.Clients).
	MaxClients = 65536
	// MaxProducts is the largest catalogue (Config.Products).
	MaxProducts = 100000
	// DefaultProductName is the name of the product the command reuses
	// (Config.ProductName) and the prefix of its catalogue's names.
	DefaultProductName = "loadtest"
	// hottestShown is the number of products in a run's HOTTEST block.
	hottestShown = 5
)

// Config says what to fire at which instances.
type Config struct {
	// URLs are the base URLs of the instances, e.g. http://127.0.0.1:8080;
	// requests go to them in turn (round robin).
	URLs []string
	// ProductID is the product on sale; 0 uses the product named
	// ProductName, or creates a new one when ProductName is empty (either
	// needs AdminToken).
	ProductID int64
	// ProductName, when ProductID is 0 and Products is 0, names the product
	// on sale: the first of that name in the product list (the lowest id),
	// created when there is none. "" creates a new product every Run,
	// named after the time. Either way the product starts with Stock units,
	// DefaultStock when Stock is 0, and is reset to them before each run.
	ProductName string
	// Products > 0 spreads the purchases over a catalogue of that many
	// products, named ProductName-1 … ProductName-N (DefaultProductName
	// when ProductName is empty), created once and reused by name, each
	// reset to Stock units (DefaultStock when 0) before each run. Each
	// request picks its product by a Zipf law of exponent Zipf, drawn
	// from a hash of its index; 0 means the one product of ProductID or
	// ProductName.
	Products int
	// Zipf is the exponent of the law that picks each request's product in
	// a catalogue: product k of N is chosen with a probability in
	// proportion to 1/k^Zipf; 0 is uniform. Any value >= 0.
	Zipf float64
	// Stock > 0 resets the product's stock to Stock before each run, which
	// also deletes its orders (needs AdminToken).
	Stock int64
	// AdminToken is the bearer token of /api/v1/admin/*, the audit and
	// the purchases' override parameters.
	AdminToken string
	// Strategies are the strategies to run, one run each: nil or ["all"]
	// is every strategy the server lists, [""] the server's default (no
	// strategy parameter).
	Strategies []string
	// Requests is the closed loop's number of requests per strategy
	// (warmup not included). 0 means Duration, or DefaultRequests when
	// Duration is 0 too.
	Requests int
	// Concurrency is the number of workers of the closed loop and the most
	// requests in flight of the open loop; 0 means DefaultConcurrency.
	Concurrency int
	// Rates, when not empty, select the open loop: Rates[0] requests per
	// second for Duration, then Rates[1] for Duration, and so on. A
	// request that cannot be sent within one interval (at least 1 ms) of
	// its time, because Concurrency requests are in flight, is dropped:
	// counted apart, never sent.
	Rates []float64
	// Duration is the closed loop's length when Requests is 0 (requests in
	// flight at its end are waited for and counted), and the length of
	// each of the open loop's steps.
	Duration time.Duration
	// Warmup is a stretch of load before the measured one (at Rates[0] in
	// the open loop) whose answers are left out of the figures; they are
	// still checked against the audit.
	Warmup time.Duration
	// Hold is passed to every purchase as hold_ms (whole milliseconds);
	// 0 passes nothing.
	Hold time.Duration
	// Pause is passed to every purchase as pause_ms (whole milliseconds);
	// 0 passes nothing.
	Pause time.Duration
	// Batch > 0 is passed to every purchase as batch.
	Batch int
	// Clients > 1 sends the load from that many loopback addresses
	// (127.0.0.1, 127.0.0.2, ...), the connections spread over them in
	// turn, so that a per-IP limit (SECKILL_IP_LIMIT) sees that many
	// clients. Linux routes all of 127.0.0.0/8 to loopback; the instances
	// must be on loopback too. 0 or 1: the system's choice.
	Clients int
	// History, when not empty, is a file to write every purchase to as it
	// is answered (package history): every purchase then carries a unique
	// request ID, and each run checks its own history.
	History string
	// Fencing, when not nil, is passed to every purchase as fencing=.
	Fencing *bool
	// Quantity is the units of every purchase; 0 means 1.
	Quantity int64
	// Progress receives a progress line per run, redrawn in place; nil
	// draws none.
	Progress io.Writer
	// ProgressEvery, when not 0, makes the progress plain lines instead,
	// one every ProgressEvery and one at the end: for a log or a pipe,
	// where a line redrawn in place would be a stream of carriage returns.
	ProgressEvery time.Duration
	// Endpoint, when not empty, is a path (e.g. /healthz) that the driver
	// GETs instead of purchasing: the raw mode, for measuring the driver
	// itself. It needs no product and reads no audit.
	Endpoint string
	// Drain is, after a run that got 202s (reserve's promises), the
	// longest wait for every promise to become an order, asked for by its
	// request ID (GET /api/v1/purchases/{request_id}) from its 202 on; the
	// audit is read after it. A promise that failed, was lost or is still
	// pending when the drain runs out fails the run. 0 means DefaultDrain.
	Drain time.Duration
	// Cancel is the fraction (0 to 1) of the orders a run makes that their
	// buyers cancel as soon as they have them, while the run goes on
	// (POST /api/v1/orders/{id}/cancel); the history records the cancels.
	Cancel float64
	// BuyerTokens, when not nil, signs a token for each buyer and sends
	// it on the buyer's purchase and cancel (SECKILL_BUYER_AUTH=jwt);
	// the admin token still reads the audit and the promises.
	BuyerTokens *BuyerTokens
	// Buyers, when above 0, is how many buyers make a run's purchases:
	// request i's buyer is the (i mod Buyers)th, so each buys again and
	// again, with the same token each time under BuyerTokens (a buyer's
	// retries: every buyer's token is signed before the run; more than a
	// unit each needs SECKILL_PER_USER_LIMIT=0).
	// 0: every purchase is a buyer of its own. Not with History, whose
	// checker knows a purchase's buyer by its request.
	Buyers int
	// Timeout is the longest wait for an answer once its request is sent:
	// for the load, until its whole response is read (the load goes
	// through fasthttp, with a connection per worker and instance); for the
	// driver's own calls (health, admin, audit; net/http), until its
	// headers. 0 means DefaultTimeout.
	Timeout time.Duration
}

// ErrConfig is wrapped by every error about a Config that cannot run.
var ErrConfig = errors.New("driver: invalid config")

// Open says the config selects the open loop.
func (c Config) Open() bool { return len(c.Rates) > 0 }

// withDefaults checks c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	urls, err := checkURLs(c.URLs)
	if err != nil {
		return c, err
	}
	c.URLs = urls
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Quantity == 0 {
		c.Quantity = 1
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Drain == 0 {
		c.Drain = DefaultDrain
	}
	if err := c.checkLoad(); err != nil {
		return c, err
	}
	if !c.Open() && c.Requests == 0 && c.Duration == 0 {
		c.Requests = DefaultRequests
	}
	if c.Endpoint != "" {
		if c.Products > 0 {
			return c, invalid("the raw mode (GET %s) buys no product: a catalogue of %d does not apply", c.Endpoint, c.Products)
		}
		if !strings.HasPrefix(c.Endpoint, "/") {
			c.Endpoint = "/" + c.Endpoint
		}
		return c, nil
	}
	return c, c.checkPurchases()
}

// invalid is an error about a Config that cannot run.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
}

// checkURLs checks that there is a URL and each is http(s)://host:port,
// and returns them without a trailing slash.
func checkURLs(raws []string) ([]string, error) {
	if len(raws) == 0 {
		return nil, invalid("no URL")
	}
	urls := make([]string, len(raws))
	for i, raw := range raws {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, invalid("URL %q must be http(s)://host:port", raw)
		}
		urls[i] = strings.TrimSuffix(u.String(), "/")
	}
	return urls, nil
}

// checkLoad checks the shape of the load: its rates, workers, length and
// timeout.
func (c Config) checkLoad() error {
	for _, r := range c.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			return invalid("rate %g must be a positive number", r)
		}
	}
	switch {
	case c.Concurrency < 0:
		return invalid("concurrency %d must be positive", c.Concurrency)
	case c.Requests < 0:
		return invalid("requests %d must be positive", c.Requests)
	case c.Duration < 0 || c.Warmup < 0:
		return invalid("duration %s and warmup %s must not be negative", c.Duration, c.Warmup)
	case c.Open() && c.Duration <= 0:
		return invalid("the open loop (rates %v) needs a positive duration", c.Rates)
	case c.Open() && c.Requests > 0:
		return invalid("requests %d belongs to the closed loop; the open loop runs its rates for a duration", c.Requests)
	case c.Open() && c.scheduled() < 1:
		return invalid("rates %v for %s send no request", c.Rates, c.Duration)
	case !c.Open() && c.Requests > 0 && c.Duration > 0:
		return invalid("the closed loop runs a request count (%d) or a duration (%s), not both", c.Requests, c.Duration)
	case c.Timeout < 0:
		return invalid("timeout %s must be positive", c.Timeout)
	case c.Drain < 0:
		return invalid("drain %s must be positive", c.Drain)
	case c.Cancel < 0 || c.Cancel > 1 || c.Cancel != c.Cancel:
		return invalid("cancel %v must be a fraction from 0 to 1", c.Cancel)
	}
	return nil
}

// checkPurchases checks what the purchases ask for and of which products.
func (c Config) checkPurchases() error {
	switch {
	case c.Quantity < 1 || c.Quantity > 100:
		return invalid("quantity %d must be from 1 to 100", c.Quantity)
	case c.Clients < 0 || c.Clients > MaxClients:
		return invalid("clients %d must be from 0 to %d", c.Clients, MaxClients)
	case c.Hold < 0 || c.Hold > MaxHold || c.Pause < 0 || c.Pause > MaxHold:
		return invalid("hold %s and pause %s must be from 0 to %s", c.Hold, c.Pause, MaxHold)
	case c.Hold%time.Millisecond != 0 || c.Pause%time.Millisecond != 0:
		return invalid("hold %s and pause %s must be whole milliseconds", c.Hold, c.Pause)
	case c.Batch < 0 || c.Batch > MaxBatch:
		return invalid("batch %d must be from 1 to %d (0: the server's)", c.Batch, MaxBatch)
	case c.Stock < 0:
		return invalid("stock %d must not be negative", c.Stock)
	case c.ProductID < 0:
		return invalid("product %d must not be negative", c.ProductID)
	case c.ProductID == 0 && c.AdminToken == "":
		return invalid("no product: name one, or give an admin token to use or create one")
	case c.Products < 0 || c.Products > MaxProducts:
		return invalid("products %d must be from 0 to %d", c.Products, MaxProducts)
	case c.Products > 0 && c.ProductID != 0:
		return invalid("a catalogue of %d products is named by its prefix, not by a product id (%d)", c.Products, c.ProductID)
	case !(c.Zipf >= 0) || math.IsInf(c.Zipf, 0):
		return invalid("zipf %g must be a number from 0 up", c.Zipf)
	case c.Stock > 0 && c.AdminToken == "":
		return invalid("resetting the stock needs an admin token")
	case c.Buyers < 0:
		return invalid("buyers %d must not be negative", c.Buyers)
	case c.Buyers > 0 && c.History != "":
		return invalid("a history knows a purchase's buyer by its request: buyers %d does not apply", c.Buyers)
	}
	return nil
}

// phases lays out the load of one run.
func (c Config) phases() []load.Phase {
	var out []load.Phase
	var at time.Duration
	first := 0
	add := func(warm bool, rate float64, length time.Duration) {
		n := 0
		if rate > 0 {
			n = int(math.Round(rate * length.Seconds()))
		}
		out = append(out, load.Phase{Warm: warm, Rate: rate, Start: at, Length: length, First: first, N: n})
		at += length
		first += n
	}
	rate := 0.0
	if c.Open() {
		rate = c.Rates[0]
	}
	if c.Warmup > 0 {
		add(true, rate, c.Warmup)
	}
	if !c.Open() {
		add(false, 0, c.Duration)
		return out
	}
	for _, r := range c.Rates {
		add(false, r, c.Duration)
	}
	return out
}

// scheduled is the number of requests the open loop schedules in its
// measured steps.
func (c Config) scheduled() int {
	n := 0
	for _, p := range c.phases() {
		if !p.Warm {
			n += p.N
		}
	}
	return n
}
