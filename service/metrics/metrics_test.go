package metrics

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStockSeriesBounded: seckill_stock keeps a series for the 100
// products whose stock changed last, whatever the catalogue's size.
func TestStockSeriesBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, nil)
	for id := int64(1); id <= 250; id++ {
		m.Stock(id, id)
	}
	m.Stock(3, 0) // an old product that changes again comes back
	shown := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "seckill_stock" {
			continue
		}
		for _, s := range mf.GetMetric() {
			shown[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
		}
	}
	if len(shown) != maxStockSeries {
		t.Fatalf("seckill_stock has %d series; want %d", len(shown), maxStockSeries)
	}
	for _, id := range []int64{3, 250, 152} {
		if _, ok := shown[strconv.FormatInt(id, 10)]; !ok {
			t.Errorf("product %d has no series; want one (among the last changed)", id)
		}
	}
	if _, ok := shown["151"]; ok {
		t.Error("product 151 still has a series; want it dropped for product 3")
	}
	if shown["3"] != 0 {
		t.Errorf("product 3's stock = %v; want 0", shown["3"])
	}
}
