package service

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the service's Prometheus instruments.
type Metrics struct {
	purchases    *prometheus.CounterVec
	lockWait     *prometheus.HistogramVec
	lockFailures *prometheus.CounterVec
	duration     *prometheus.HistogramVec
}

// NewMetrics makes the instruments and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		purchases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_purchases_total",
			Help: "Purchase attempts by strategy and outcome (ok, replayed, sold_out, limit_exceeded, lock_timeout, lock_lost, ...).",
		}, []string{"strategy", "outcome"}),
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_lock_wait_seconds",
			Help:    "Time spent waiting for a purchase's lock, granted or not.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"strategy"}),
		lockFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_lock_failures_total",
			Help: "Lock failures by strategy and reason: timeout (not acquired), lost (fenced write refused), expired (lease gone by unlock time), unlock_error.",
		}, []string{"strategy", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_purchase_duration_seconds",
			Help:    "Time to answer a purchase, by strategy.",
			Buckets: prometheus.DefBuckets,
		}, []string{"strategy"}),
	}
	reg.MustRegister(m.purchases, m.lockWait, m.lockFailures, m.duration)
	return m
}
