package driver

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"time"
)

// Defaults of Config.
const (
	// DefaultConcurrency is the number of workers when Config.Concurrency is 0.
	DefaultConcurrency = 64
	// DefaultRequests is the closed loop's request count when Config.Requests is 0.
	DefaultRequests = 1000
	// DefaultStock is the stock of a product the driver creates when
	// Config.Stock is 0.
	DefaultStock = 100
	// DefaultTimeout is the longest wait for an answer when Config.Timeout
	// is 0.
	DefaultTimeout = 30 * time.Second
	// MaxHold is the longest hold the service accepts (hold_ms=10000).
	MaxHold = 10 * time.Second
)

// Config says what to fire at which instances.
type Config struct {
	// URLs are the base URLs of the instances, e.g. http://127.0.0.1:8080;
	// requests go to them in turn (round robin).
	URLs []string
	// ProductID is the product on sale; 0 creates one (needs AdminToken)
	// with Stock units, DefaultStock when Stock is 0.
	ProductID int64
	// Stock > 0 resets the product's stock to Stock before each run, which
	// also deletes its orders (needs AdminToken).
	Stock int64
	// AdminToken is the bearer token of /api/v1/admin/*.
	AdminToken string
	// Strategies are the strategies to run, one run each: nil or ["all"]
	// is every strategy the server lists, [""] the server's default (no
	// strategy parameter).
	Strategies []string
	// Requests is the closed loop's number of requests per strategy;
	// 0 means DefaultRequests.
	Requests int
	// Concurrency is the number of workers of the closed loop and the most
	// requests in flight of the open loop; 0 means DefaultConcurrency.
	Concurrency int
	// Rate > 0 selects the open loop: this many requests per second for
	// Duration.
	Rate float64
	// Duration is the open loop's length.
	Duration time.Duration
	// Hold is passed to every purchase as hold_ms (whole milliseconds);
	// 0 passes nothing.
	Hold time.Duration
	// Fencing, when not nil, is passed to every purchase as fencing=.
	Fencing *bool
	// Quantity is the units of every purchase; 0 means 1.
	Quantity int64
	// Progress receives a progress bar per run; nil draws none.
	Progress io.Writer
	// Endpoint, when not empty, is a path (e.g. /healthz) that the driver
	// GETs instead of purchasing: the raw mode, for measuring the driver
	// itself. It needs no product and reads no audit.
	Endpoint string
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
func (c Config) Open() bool { return c.Rate > 0 }

// withDefaults checks c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if len(c.URLs) == 0 {
		return bad("no URL")
	}
	urls := make([]string, len(c.URLs))
	for i, raw := range c.URLs {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("URL %q must be http(s)://host:port", raw)
		}
		urls[i] = strings.TrimSuffix(u.String(), "/")
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
	switch {
	case c.Concurrency < 0:
		return bad("concurrency %d must be positive", c.Concurrency)
	case c.Rate < 0:
		return bad("rate %g must not be negative", c.Rate)
	case c.Rate > 0 && c.Duration <= 0:
		return bad("the open loop (rate %g/s) needs a positive duration", c.Rate)
	case c.Rate > 0 && c.total() < 1:
		return bad("rate %g/s for %s sends no request", c.Rate, c.Duration)
	case c.Rate == 0 && c.Requests < 0:
		return bad("requests %d must be positive", c.Requests)
	case c.Timeout < 0:
		return bad("timeout %s must be positive", c.Timeout)
	}
	if c.Rate == 0 && c.Requests == 0 {
		c.Requests = DefaultRequests
	}
	if c.Endpoint != "" {
		if !strings.HasPrefix(c.Endpoint, "/") {
			c.Endpoint = "/" + c.Endpoint
		}
		return c, nil
	}
	switch {
	case c.Quantity < 1 || c.Quantity > 100:
		return bad("quantity %d must be from 1 to 100", c.Quantity)
	case c.Hold < 0 || c.Hold > MaxHold:
		return bad("hold %s must be from 0 to %s", c.Hold, MaxHold)
	case c.Hold%time.Millisecond != 0:
		return bad("hold %s must be whole milliseconds", c.Hold)
	case c.Stock < 0:
		return bad("stock %d must not be negative", c.Stock)
	case c.ProductID < 0:
		return bad("product %d must not be negative", c.ProductID)
	case c.ProductID == 0 && c.AdminToken == "":
		return bad("no product: name one, or give an admin token to create one")
	case c.Stock > 0 && c.AdminToken == "":
		return bad("resetting the stock needs an admin token")
	}
	return c, nil
}

// total is the number of requests of one run.
func (c Config) total() int {
	if c.Open() {
		return int(math.Round(c.Rate * c.Duration.Seconds()))
	}
	return c.Requests
}
