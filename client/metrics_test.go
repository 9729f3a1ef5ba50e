package client_test

import (
	"testing"

	"github.com/seckill/seckill/client"
)

// TestBucketOf: the bucket that holds a histogram's quantile, its samples
// added up; none for a histogram without observations, or a quantile past
// its last finite bucket.
func TestBucketOf(t *testing.T) {
	m, err := client.ParseMetrics([]byte(`# TYPE lag histogram
lag_bucket{i="a",le="0.5"} 90
lag_bucket{i="a",le="1"} 99
lag_bucket{i="a",le="2"} 100
lag_bucket{i="a",le="+Inf"} 100
lag_sum{i="a"} 40
lag_count{i="a"} 100
lag_bucket{i="b",le="0.5"} 0
lag_bucket{i="b",le="1"} 0
lag_bucket{i="b",le="2"} 0
lag_bucket{i="b",le="+Inf"} 100
lag_sum{i="b"} 900
lag_count{i="b"} 100
# TYPE none histogram
none_bucket{le="1"} 0
none_bucket{le="+Inf"} 0
none_sum 0
none_count 0
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		q      float64
		want   float64
		wantOK bool
	}{
		{"lag", 0.45, 0.5, true},
		{"lag", 0.495, 1, true},
		{"lag", 0.5, 2, true},
		{"lag", 0.99, 0, false}, // the half of b's past 2
		{"none", 0.5, 0, false},
		{"absent", 0.5, 0, false},
	} {
		if got, ok := m.BucketOf(tc.name, tc.q); got != tc.want || ok != tc.wantOK {
			t.Errorf("BucketOf(%s, %v) = %v, %v; want %v, %v", tc.name, tc.q, got, ok, tc.want, tc.wantOK)
		}
	}
}
