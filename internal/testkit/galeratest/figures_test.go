package galeratest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/loadtest/driver"
	"github.com/seckill/seckill/loadtest/report"
)

// TestGaleraFigures measures each safe strategy on a three-node Galera
// Cluster (two instances, on nodes 0 and 2) beside a single MariaDB (two
// instances on it), the driver of issue 46's runs over both instances
// (stock 500, 3,000 purchases, 64 at once, a history checked), the two
// alternated SECKILL_GALERA_ROUNDS times (1), and prints each strategy's
// sales per second while the stock lasted on Galera as a ratio of the
// single server's. Every run must pass
// the driver's own verdict: exact audits and linearizable histories.
// Only with SECKILL_GALERA_FIGURES=1: it takes minutes
// (docs/figures.md quotes it).
func TestGaleraFigures(t *testing.T) {
	if os.Getenv("SECKILL_GALERA_FIGURES") == "" {
		t.Skip("SECKILL_GALERA_FIGURES is not set: these figures take minutes (docs/figures.md)")
	}
	figureStrategies := []string{"redlock", "token", "pessimistic", "optimistic", "reserve"}
	rounds := 1
	if v := os.Getenv("SECKILL_GALERA_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SECKILL_GALERA_ROUNDS=%q: want a whole number from 1", v)
		}
		rounds = n
	}
	single := testenv.StartMariaDB(t)
	one := apptest.Start(t, map[string]string{"SECKILL_MYSQL_DSN": testenv.DatabaseDSN(t, single.DSN, testenv.RandomName("seckill_test_")), "SECKILL_LOCK_WAIT": "30s"})
	setups := map[string][]*apptest.Instance{"MariaDB": {one, one.Another(t)}}
	g := testenv.StartGalera(t)
	name := g.Database(t)
	a := apptest.Start(t, map[string]string{"SECKILL_MYSQL_DSN": g.Nodes[0].DatabaseDSN(name), "SECKILL_LOCK_WAIT": "30s"})
	setups["Galera"] = []*apptest.Instance{a, a.AnotherOn(t, map[string]string{"SECKILL_MYSQL_DSN": g.Nodes[2].DatabaseDSN(name)})}

	rates := map[string]map[string][]float64{"MariaDB": {}, "Galera": {}}
	for round := range rounds {
		for _, setup := range []string{"MariaDB", "Galera"} {
			ins := setups[setup]
			rep, err := driver.Run(t.Context(), driver.Config{
				URLs: []string{ins[0].URL, ins[1].URL}, AdminToken: ins[0].AdminToken, Stock: 500,
				Strategies: figureStrategies, Requests: 3000, Concurrency: 64,
				History: filepath.Join(t.TempDir(), "history.jsonl"),
			})
			if err != nil {
				t.Fatalf("%s, round %d: driver.Run = %v", setup, round+1, err)
			}
			if f := rep.Failures(); len(f) != 0 {
				t.Errorf("%s, round %d: Failures() = %q; want none", setup, round+1, f)
			}
			for _, res := range rep.Results {
				rates[setup][res.Strategy] = append(rates[setup][res.Strategy], res.SellRate)
				t.Logf("%s, round %d: %s", setup, round+1, summary(res))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %16s %16s %8s\n", "strategy", "MariaDB sales/s", "Galera sales/s", "ratio")
	for _, st := range figureStrategies {
		m, gal := mean(rates["MariaDB"][st]), mean(rates["Galera"][st])
		fmt.Fprintf(&b, "%-12s %16.0f %16.0f %7.2fx\n", st, m, gal, gal/m)
	}
	t.Logf("sales per second while the stock lasted (SellRate), over both instances, mean of %d round(s), alternated:\n%s", rounds, b.String())
}

// summary is one result in a line: its answers and its verdict.
func summary(res report.Result) string {
	h := "no history"
	if res.History != nil {
		h = fmt.Sprintf("linearizable %t", res.History.Linearizable)
	}
	return fmt.Sprintf("%s: %.0f sales/s while the stock lasted, %.0f answers/s, %d sold, outcomes %v, codes %v, audit held %t, %s",
		res.Strategy, res.SellRate, res.Throughput, res.Successes, res.Outcomes, res.Codes, res.Audit.Held(), h)
}

// mean is the mean of xs (0 for none).
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
