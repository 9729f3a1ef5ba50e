package driver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

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
		if cfg.Progress != nil {
			// Seconds for a thousand products: say what the wait is.
			fmt.Fprintf(cfg.Progress, "catalogue: finding or creating %d products, %s-1 to %s-%d\n",
				cfg.Products, prefix, prefix, cfg.Products)
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
func override(cfg Config, st client.Strategy) client.Override {
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
func resolveStrategies(ctx context.Context, admin *client.Client, names []string) ([]client.Strategy, error) {
	if len(names) == 1 && names[0] == "" {
		return []client.Strategy{{}}, nil
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
	out := make([]client.Strategy, 0, len(names))
	for _, n := range names {
		i := slices.Index(known, n)
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown strategy %q (the server lists %s)", ErrConfig, n, strings.Join(known, ", "))
		}
		out = append(out, listed[i])
	}
	return out, nil
}
