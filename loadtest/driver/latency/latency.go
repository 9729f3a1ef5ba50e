// Package latency is how the load-test driver measures its latencies: HDR
// histograms in microseconds, from 1µs to Max, and the figures a report
// gives of one.
package latency

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/seckill/seckill/loadtest/report"
)

// Of the histograms.
const (
	// Max is the longest latency a histogram holds, in microseconds;
	// Record counts a longer one as Max.
	Max = int64(10 * time.Minute / time.Microsecond)
	// RunSigFigs are the significant digits of the figures of a run.
	RunSigFigs = 3
	// SecondSigFigs are those of the figures of one second.
	SecondSigFigs = 2
)

// New is an empty histogram of sigFigs significant digits.
func New(sigFigs int) *hdrhistogram.Histogram {
	return hdrhistogram.New(1, Max, sigFigs)
}

// Micros is d in whole microseconds, within the histograms' range: from 1
// to Max.
func Micros(d time.Duration) int64 {
	return max(1, min(d.Microseconds(), Max))
}

// Record adds d to h, within the histograms' range (Micros).
func Record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(Micros(d)) // within the range: RecordValue cannot fail
}

// Merge adds src to *dst, which it creates (of sigFigs significant
// digits) when it is nil; a nil src adds nothing.
func Merge(dst **hdrhistogram.Histogram, src *hdrhistogram.Histogram, sigFigs int) {
	if src == nil {
		return
	}
	if *dst == nil {
		*dst = New(sigFigs)
	}
	(*dst).Merge(src)
}

// Figures are h's count, mean and percentiles; zero for a nil or empty h.
func Figures(h *hdrhistogram.Histogram) report.Latency {
	if h == nil || h.TotalCount() == 0 {
		return report.Latency{}
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return report.Latency{
		Count: int(h.TotalCount()),
		Min:   us(h.Min()),
		Mean:  time.Duration(h.Mean() * float64(time.Microsecond)),
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P95:   us(h.ValueAtQuantile(95)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
	}
}
