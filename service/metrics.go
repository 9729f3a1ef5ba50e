package service

import (
	"container/list"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/seckill/seckill/service/failure"
)

// Metrics are the service's Prometheus instruments. Every series a
// strategy can have is there from the start, at zero.
type Metrics struct {
	purchases    *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	lockWait     *prometheus.HistogramVec
	lockHold     *prometheus.HistogramVec
	batchSize    *prometheus.HistogramVec
	lockFailures *prometheus.CounterVec
	stockLeft    *prometheus.GaugeVec

	// The reserve strategy's writers.
	reservePending    prometheus.Gauge
	reserveWritten    prometheus.Counter
	reserveFailed     *prometheus.CounterVec
	reserveDead       prometheus.Counter
	reserveRecoveries prometheus.Counter
	reserveMoved      *prometheus.CounterVec
	reserveLost       prometheus.Counter

	// returns counts the orders whose units came back, by reason;
	// payments the orders paid.
	returns  *prometheus.CounterVec
	payments prometheus.Counter

	// retries counts the transactions tried again, by reason.
	retries *prometheus.CounterVec

	// series are the purchase series of every strategy and outcome,
	// resolved once in NewMetrics and only read afterwards (no lock): a
	// purchase counts itself without the vectors' label lookups.
	series map[purchaseLabels]purchaseSeries

	// stockSeries are the products seckill_stock has a series for, the
	// most recently changed first: at most maxStockSeries, so that a
	// catalogue of any size keeps /metrics small.
	stockMu     sync.Mutex
	stockSeries *list.List
	stockIndex  map[int64]*list.Element
}

// maxStockSeries bounds the products seckill_stock reports.
const maxStockSeries = 100

// purchaseLabels are the labels of a purchase's series.
type purchaseLabels struct{ strategy, outcome string }

// purchaseSeries are the series a purchase of one strategy and outcome
// counts itself in.
type purchaseSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// PurchaseOutcomes are the outcomes of a purchase as the metrics label
// them: ok (201), reserved (202 under reserve), replayed (200, or a 202
// of a reservation made before), or the code of the error it answered.
func PurchaseOutcomes() []string {
	return []string{"ok", "reserved", "replayed", string(failure.CodeInvalid), string(failure.CodeNotFound), string(failure.CodeSoldOut),
		string(failure.CodeLimitExceeded), string(failure.CodeRequestIDReused), string(failure.CodeStrategyConflict), string(failure.CodeLockTimeout), string(failure.CodeLockLost),
		string(failure.CodeUnavailable), string(failure.CodeOutcomeUnknown), string(failure.CodeInternal)}
}

// NewMetrics makes the instruments and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		purchases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_purchases_total",
			Help: "Purchases answered, by strategy and outcome: ok (201), reserved (202), replayed (200, or 202 of an earlier reservation), or the error code answered.",
		}, []string{"strategy", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_purchase_duration_seconds",
			Help:    "Time to answer a purchase, by strategy and outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"strategy", "outcome"}),
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_lock_wait_seconds",
			Help:    "Time spent waiting for a purchase's lock, by strategy and result: acquired, timeout (held by others the whole wait) or unavailable (too few nodes answered).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"strategy", "result"}),
		lockHold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_lock_hold_seconds",
			Help:    "Time one hold of a product's lock lasted (the held work and the batch's transaction), by strategy.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"strategy"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_batch_size",
			Help:    "Purchases sold under one hold of a product's lock, by strategy.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}, []string{"strategy"}),
		stockLeft: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_stock",
			Help: "A product's stock as this instance last saw it, for the 100 products whose stock it saw change last.",
		}, []string{"product"}),
		lockFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_lock_failures_total",
			Help: "Lock failures by strategy and reason: timeout (not acquired within the wait), unavailable (too few nodes answered), lost (fenced write refused), expired (lease gone by unlock time), unlock_error.",
		}, []string{"strategy", "reason"}),
	}
	m.reservePending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_reserve_pending",
		Help: "Reservations of the reserve strategy not yet written to the database (read by no writer, or read and not acknowledged), as this instance's writer last counted them.",
	})
	m.reserveWritten = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reserve_written_total",
		Help: "Reservations this instance's writer wrote to the database (a reservation written again after a writer died before acknowledging it counts again).",
	})
	m.reserveFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reserve_failed_total",
		Help: "Reservations the database refused, by reason (sold_out, limit_exceeded, request_id_reused): broken promises.",
	}, []string{"reason"})
	m.reserveDead = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reserve_dead_letters_total",
		Help: "Stream entries this instance's writer gave up on and moved to the dead-letter stream: entries that are not reservations, and reservations whose write kept failing.",
	})
	m.reserveRecoveries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reserve_counters_recovered_total",
		Help: "Counters of the reserve strategy found gone from Redis (it lost what it acknowledged) and derived again from the database and the reservations still waiting.",
	})
	m.reserveMoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reserve_counter_corrections_total",
		Help: "Counters of the reserve strategy found to disagree with the database and the reservations waiting, and moved: down (the counter was high: Redis lost decrements it had acknowledged) or up (it was low: units taken by reservations Redis no longer holds).",
	}, []string{"direction"})
	m.reserveLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reserve_lost_reservations_total",
		Help: "Reservations Redis had records of but neither its stream nor the database held when their counter was reconciled: promises lost.",
	})
	m.returns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_order_returns_total",
		Help: "Orders whose units this instance put back on sale, by reason: cancel (by its buyer) or expiry (unpaid past SECKILL_PAYMENT_TIMEOUT).",
	}, []string{"reason"})
	m.returns.WithLabelValues(returnCancel)
	m.returns.WithLabelValues(returnExpiry)
	m.payments = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_order_payments_total",
		Help: "Orders this instance marked paid (a payment of an order paid already is not counted again).",
	})
	reg.MustRegister(m.returns, m.payments)
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_db_retries_total",
		Help: "Transactions this instance tried again, by reason: deadlock (the database chose it as a deadlock's victim; on a Galera Cluster, certification found another node's write to the same row first), request_id (another purchase wrote one of its request IDs meanwhile), connection_lost (its connection went before COMMIT).",
	}, []string{"reason"})
	for _, reason := range []string{retryDeadlock, retryRequestID, retryConnLost} {
		m.retries.WithLabelValues(reason)
	}
	reg.MustRegister(m.retries)
	m.reserveMoved.WithLabelValues("down")
	m.reserveMoved.WithLabelValues("up")
	reg.MustRegister(m.reserveMoved, m.reserveLost)
	for _, code := range []failure.Code{failure.CodeSoldOut, failure.CodeLimitExceeded, failure.CodeRequestIDReused} {
		m.reserveFailed.WithLabelValues(string(code))
	}
	reg.MustRegister(m.reservePending, m.reserveWritten, m.reserveFailed, m.reserveDead, m.reserveRecoveries)
	m.stockSeries, m.stockIndex = list.New(), map[int64]*list.Element{}
	m.series = map[purchaseLabels]purchaseSeries{}
	reg.MustRegister(m.purchases, m.duration, m.lockWait, m.lockHold, m.batchSize, m.lockFailures, m.stockLeft)
	for _, st := range StrategyTable() {
		for _, o := range PurchaseOutcomes() {
			m.series[purchaseLabels{st.Name, o}] = purchaseSeries{
				count:    m.purchases.WithLabelValues(st.Name, o),
				duration: m.duration.WithLabelValues(st.Name, o),
			}
		}
		if !st.Lined {
			continue
		}
		m.lockHold.WithLabelValues(st.Name)
		m.batchSize.WithLabelValues(st.Name)
		for _, r := range []string{"acquired", "timeout", "unavailable"} {
			m.lockWait.WithLabelValues(st.Name, r)
		}
		for _, r := range []string{"timeout", "unavailable", "lost", "expired", "unlock_error"} {
			m.lockFailures.WithLabelValues(st.Name, r)
		}
	}
	return m
}

// observePurchase counts a purchase's answer and how long it took, in the
// series NewMetrics resolved; a pair of labels it did not make (none the
// service answers with) is looked up.
func (m *Metrics) observePurchase(strategy string, r Receipt, err error, d time.Duration) {
	outcome := "ok"
	switch {
	case err != nil:
		outcome = string(failure.CodeOf(err))
	case r.Replayed:
		outcome = "replayed"
	case r.Reservation != nil:
		outcome = "reserved"
	}
	if ps, ok := m.series[purchaseLabels{strategy, outcome}]; ok {
		ps.count.Inc()
		ps.duration.Observe(d.Seconds())
		return
	}
	m.purchases.WithLabelValues(strategy, outcome).Inc()
	m.duration.WithLabelValues(strategy, outcome).Observe(d.Seconds())
}

// lockWaited records a wait for a lock and how it ended.
func (m *Metrics) lockWaited(strategy, result string, d time.Duration) {
	m.lockWait.WithLabelValues(strategy, result).Observe(d.Seconds())
}

// lockFailed counts a lock failure.
func (m *Metrics) lockFailed(strategy, reason string) {
	m.lockFailures.WithLabelValues(strategy, reason).Inc()
}

// held records one hold of a lock: how many purchases it sold and how long
// it lasted.
func (m *Metrics) held(strategy string, n int, d time.Duration) {
	m.batchSize.WithLabelValues(strategy).Observe(float64(n))
	m.lockHold.WithLabelValues(strategy).Observe(d.Seconds())
}

// reserveCorrected counts a counter moved by delta, and the reservations
// found lost.
func (m *Metrics) reserveCorrected(delta, lost int64) {
	direction := "up"
	if delta < 0 {
		direction = "down"
	}
	m.reserveMoved.WithLabelValues(direction).Inc()
	m.reserveLost.Add(float64(lost))
}

// reserveRecovered counts a counter found gone from Redis.
func (m *Metrics) reserveRecovered() { m.reserveRecoveries.Inc() }

// paid counts an order paid.
func (m *Metrics) paid() { m.payments.Inc() }

// retried counts a transaction tried again for reason.
func (m *Metrics) retried(reason string) { m.retries.WithLabelValues(reason).Inc() }

// returned counts n orders whose units came back for reason.
func (m *Metrics) returned(reason string, n int) { m.returns.WithLabelValues(reason).Add(float64(n)) }

// stock records a product's stock as seen.
func (m *Metrics) stock(product, stock int64) {
	m.stockMu.Lock()
	defer m.stockMu.Unlock()
	if e, ok := m.stockIndex[product]; ok {
		m.stockSeries.MoveToFront(e)
	} else {
		m.stockIndex[product] = m.stockSeries.PushFront(product)
		if m.stockSeries.Len() > maxStockSeries {
			oldest := m.stockSeries.Remove(m.stockSeries.Back()).(int64)
			delete(m.stockIndex, oldest)
			m.stockLeft.DeleteLabelValues(strconv.FormatInt(oldest, 10))
		}
	}
	m.stockLeft.WithLabelValues(strconv.FormatInt(product, 10)).Set(float64(stock))
}
