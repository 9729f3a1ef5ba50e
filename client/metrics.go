package client

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are the metric families of an instance's GET /metrics, by name.
type Metrics map[string]*dto.MetricFamily

// Metrics reads the instance's GET /metrics (the Prometheus text format).
func (c *Client) Metrics(ctx context.Context) (Metrics, error) {
	data, err := c.send(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	m, err := ParseMetrics(data)
	if err != nil {
		return nil, fmt.Errorf("client: GET %s/metrics: %w", c.BaseURL, err)
	}
	return m, nil
}

// Sum adds up the samples of the family called name whose labels include
// every name, value pair of labels (given in turn: "strategy", "token",
// ...): a counter's or a gauge's value, a histogram's count of
// observations. A family that is not there sums to 0.
func (m Metrics) Sum(name string, labels ...string) float64 {
	f, ok := m[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, s := range f.GetMetric() {
		if !hasLabels(s, labels) {
			continue
		}
		switch {
		case s.Counter != nil:
			sum += s.Counter.GetValue()
		case s.Gauge != nil:
			sum += s.Gauge.GetValue()
		case s.Histogram != nil:
			sum += float64(s.Histogram.GetSampleCount())
		case s.Untyped != nil:
			sum += s.Untyped.GetValue()
		}
	}
	return sum
}

func hasLabels(s *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range s.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// BucketOf is the upper bound of the bucket of the histogram called name
// (its samples' buckets added up) that holds its quantile q: the q-th
// share of its observations were at most that; q = 1 bounds the largest.
// ok is false when the histogram has no observation, or its quantile is
// past its last finite bucket.
func (m Metrics) BucketOf(name string, q float64) (upper float64, ok bool) {
	f, found := m[name]
	if !found {
		return 0, false
	}
	counts := map[float64]uint64{}
	var total uint64
	for _, s := range f.GetMetric() {
		h := s.GetHistogram()
		if h == nil {
			continue
		}
		total += h.GetSampleCount()
		for _, b := range h.GetBucket() {
			counts[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	if total == 0 {
		return 0, false
	}
	bounds := slices.Sorted(maps.Keys(counts))
	for _, b := range bounds {
		if float64(counts[b]) < q*float64(total) {
			continue
		}
		if math.IsInf(b, 1) {
			return 0, false
		}
		return b, true
	}
	return 0, false
}

// ParseMetrics reads metric families in the Prometheus text format.
func ParseMetrics(data []byte) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("client: read metrics: %w", err)
	}
	return families, nil
}
