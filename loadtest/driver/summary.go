package driver

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/loadtest/report"
)

// setStock fills in each second's stock left, from the stock before the
// run and the units of each second's successes (201s and 202s).
func setStock(series []report.Second, before, quantity int64) {
	stock := before
	for i := range series {
		stock -= int64(series[i].Created) * quantity
		left := stock
		series[i].Stock = &left
	}
}

func targets(bases []string, path string) []string {
	out := make([]string, len(bases))
	for i, b := range bases {
		out[i] = b + path
	}
	return out
}

func label(st client.Strategy) string {
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
func settings(cfg Config, products []client.Product) report.Settings {
	s := report.Settings{
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
		s.Catalogue = make([]report.CatalogueProduct, len(products))
		for k, p := range products {
			s.Catalogue[k] = report.CatalogueProduct{ID: p.ID, Name: p.Name}
		}
	}
	return s
}

func environment() report.Environment {
	host, _ := os.Hostname() // a report without a host name is still a report
	return report.Environment{
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Hostname:   host,
	}
}
