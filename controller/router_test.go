package controller

import (
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestRouteCounters: counts made through routeCounters, from goroutines at
// once, for routes and statuses first seen at once, are the vector's, each
// under its own labels.
func TestRouteCounters(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_total", Help: "h"}, []string{"route", "code"})
	rc := &routeCounters{vec: vec}
	rc.m.Store(&map[routeStatus]prometheus.Counter{})
	routes := []string{"/healthz", "/api/v1/products/:id/purchase", "unmatched"}
	statuses := []int{200, 404, 409, 503}
	const goroutines, rounds = 8, 25
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				for _, route := range routes {
					for i, status := range statuses {
						for range i + 1 {
							rc.get(route, status).Inc()
						}
					}
				}
			}
		})
	}
	wg.Wait()
	for _, route := range routes {
		for i, status := range statuses {
			want := float64(goroutines * rounds * (i + 1))
			var m dto.Metric
			if err := vec.WithLabelValues(route, strconv.Itoa(status)).Write(&m); err != nil {
				t.Fatalf("read the counter: %v", err)
			}
			if got := m.GetCounter().GetValue(); got != want {
				t.Errorf("requests_total{route=%q,code=\"%d\"} = %v; want %v", route, status, got, want)
			}
		}
	}
	if n := len(*rc.m.Load()); n != len(routes)*len(statuses) {
		t.Errorf("routeCounters keeps %d counters; want %d", n, len(routes)*len(statuses))
	}
}
