// Package metrics is the service's Prometheus instruments: purchases and
// their answers, the locks' waits, holds and failures, the stock seen, the
// reserve strategy's writers, an order's life and the transactions tried
// again. Every series a strategy can have is there from the start, at
// zero, so that a dashboard shows a flat line rather than no data.
package metrics

import (
	"container/list"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/seckill/seckill/service/failure"
)

// The reasons units come back, the label of seckill_order_returns_total.
const (
	ReturnCancel = "cancel"
	ReturnExpiry = "expiry"
)

// The reasons a transaction is tried again, the label of
// seckill_db_retries_total.
const (
	RetryDeadlock  = "deadlock"
	RetryRequestID = "request_id"
	RetryConnLost  = "connection_lost"
)

// maxStockSeries bounds the products seckill_stock reports.
const maxStockSeries = 100

// Strategy is what the instruments need of a strategy: its name, the
// label of its series, and whether it takes a lock in line (only those
// have lock series).
type Strategy struct {
	Name  string
	Lined bool
}

// Metrics are the service's instruments.
type Metrics struct {
	purchases    *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	lockWait     *prometheus.HistogramVec
	lockHold     *prometheus.HistogramVec
	batchSize    *prometheus.HistogramVec
	lockFailures *prometheus.CounterVec
	stockLeft    *prometheus.GaugeVec

	// The reserve strategy's writers and counters.
	reservePending    prometheus.Gauge
	reserveWritten    prometheus.Counter
	reserveLag        prometheus.Histogram
	reserveFailed     *prometheus.CounterVec
	reserveDead       prometheus.Counter
	reserveRecoveries prometheus.Counter
	reserveMoved      *prometheus.CounterVec
	reserveLost       prometheus.Counter

	// returns counts the orders whose units came back, by reason;
	// payments the orders paid; retries the transactions tried again, by
	// reason.
	returns  *prometheus.CounterVec
	payments prometheus.Counter
	retries  *prometheus.CounterVec

	// series are the purchase series of every strategy and outcome,
	// resolved once in New and only read afterwards (no lock): a purchase
	// counts itself without the vectors' label lookups.
	series map[purchaseLabels]purchaseSeries

	// stockSeries are the products seckill_stock has a series for, the
	// most recently changed first: at most maxStockSeries, so that a
	// catalogue of any size keeps /metrics small.
	stockMu     sync.Mutex
	stockSeries *list.List
	stockIndex  map[int64]*list.Element
}

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
	outcomes := []string{"ok", "reserved", "replayed"}
	for _, c := range []failure.Code{failure.CodeInvalid, failure.CodeNotFound, failure.CodeSoldOut,
		failure.CodeLimitExceeded, failure.CodeRequestIDReused, failure.CodeStrategyConflict,
		failure.CodeLockTimeout, failure.CodeLockLost, failure.CodeUnavailable,
		failure.CodeOutcomeUnknown, failure.CodeInternal} {
		outcomes = append(outcomes, string(c))
	}
	return outcomes
}

// seconds are the buckets of every duration histogram.
func seconds() []float64 {
	return []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
}

// New makes the instruments of strategies and registers them with reg.
func New(reg prometheus.Registerer, strategies []Strategy) *Metrics {
	m := &Metrics{stockSeries: list.New(), stockIndex: map[int64]*list.Element{}, series: map[purchaseLabels]purchaseSeries{}}
	m.newPurchases(promauto.With(reg), strategies)
	m.newReserve(promauto.With(reg))
	m.newOrders(promauto.With(reg))
	return m
}

// newPurchases makes the instruments of purchases and locks, with every
// series of strategies.
func (m *Metrics) newPurchases(f promauto.Factory, strategies []Strategy) {
	m.purchases = f.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_purchases_total",
		Help: "Purchases answered, by strategy and outcome: ok (201), reserved (202), replayed (200, or 202 of an earlier reservation), or the error code answered.",
	}, []string{"strategy", "outcome"})
	m.duration = f.NewHistogramVec(prometheus.HistogramOpts{
		Name: "seckill_purchase_duration_seconds", Help: "Time to answer a purchase, by strategy and outcome.", Buckets: seconds(),
	}, []string{"strategy", "outcome"})
	m.lockWait = f.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "seckill_lock_wait_seconds",
		Help:    "Time spent waiting for a purchase's lock, by strategy and result: acquired, timeout (held by others the whole wait) or unavailable (too few nodes answered).",
		Buckets: seconds(),
	}, []string{"strategy", "result"})
	m.lockHold = f.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "seckill_lock_hold_seconds",
		Help:    "Time one hold of a product's lock lasted (the held work and the batch's transaction), by strategy.",
		Buckets: seconds(),
	}, []string{"strategy"})
	m.batchSize = f.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "seckill_batch_size",
		Help:    "Purchases sold under one hold of a product's lock, by strategy.",
		Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
	}, []string{"strategy"})
	m.stockLeft = f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_stock",
		Help: "A product's stock as this instance last saw it, for the 100 products whose stock it saw change last.",
	}, []string{"product"})
	m.lockFailures = f.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_lock_failures_total",
		Help: "Lock failures by strategy and reason: timeout (not acquired within the wait), unavailable (too few nodes answered), lost (fenced write refused), expired (lease gone by unlock time), unlock_error.",
	}, []string{"strategy", "reason"})
	for _, st := range strategies {
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
}

// newReserve makes the instruments of the reserve strategy's writers and
// counters.
func (m *Metrics) newReserve(f promauto.Factory) {
	m.reservePending = f.NewGauge(prometheus.GaugeOpts{
		Name: "seckill_reserve_pending",
		Help: "Reservations of the reserve strategy not yet written to the database (read by no writer, or read and not acknowledged), as this instance's writer last counted them.",
	})
	m.reserveWritten = f.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reserve_written_total",
		Help: "Reservations this instance's writer wrote to the database (a reservation written again after a writer died before acknowledging it counts again).",
	})
	m.reserveLag = f.NewHistogram(prometheus.HistogramOpts{
		Name:    "seckill_reserve_write_lag_seconds",
		Help:    "Time from a reservation (its entry in the stream, by Redis's clock) to its acknowledgement after its order's COMMIT, of those this instance's writer wrote.",
		Buckets: []float64{.05, .1, .25, .5, .75, 1, 1.5, 2, 3, 5, 10, 30},
	})
	m.reserveFailed = f.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reserve_failed_total",
		Help: "Reservations the database refused, by reason (sold_out, limit_exceeded, request_id_reused): broken promises.",
	}, []string{"reason"})
	for _, code := range []failure.Code{failure.CodeSoldOut, failure.CodeLimitExceeded, failure.CodeRequestIDReused} {
		m.reserveFailed.WithLabelValues(string(code))
	}
	m.reserveDead = f.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reserve_dead_letters_total",
		Help: "Stream entries this instance's writer gave up on and moved to the dead-letter stream: entries that are not reservations, and reservations whose write kept failing.",
	})
	m.reserveRecoveries = f.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reserve_counters_recovered_total",
		Help: "Counters of the reserve strategy found gone from Redis (it lost what it acknowledged) and derived again from the database and the reservations still waiting.",
	})
	m.reserveMoved = f.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reserve_counter_corrections_total",
		Help: "Counters of the reserve strategy found to disagree with the database and the reservations waiting, and moved: down (the counter was high: Redis lost decrements it had acknowledged) or up (it was low: units taken by reservations Redis no longer holds).",
	}, []string{"direction"})
	m.reserveMoved.WithLabelValues("down")
	m.reserveMoved.WithLabelValues("up")
	m.reserveLost = f.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reserve_lost_reservations_total",
		Help: "Reservations Redis had records of but neither its stream nor the database held when their counter was reconciled: promises lost.",
	})
}

// newOrders makes the instruments of an order's life and of the
// transactions tried again.
func (m *Metrics) newOrders(f promauto.Factory) {
	m.returns = f.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_order_returns_total",
		Help: "Orders whose units this instance put back on sale, by reason: cancel (by its buyer) or expiry (unpaid past SECKILL_PAYMENT_TIMEOUT).",
	}, []string{"reason"})
	m.returns.WithLabelValues(ReturnCancel)
	m.returns.WithLabelValues(ReturnExpiry)
	m.payments = f.NewCounter(prometheus.CounterOpts{
		Name: "seckill_order_payments_total",
		Help: "Orders this instance marked paid (a payment of an order paid already is not counted again).",
	})
	m.retries = f.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_db_retries_total",
		Help: "Transactions this instance tried again, by reason: deadlock (the database chose it as a deadlock's victim; on a Galera Cluster, certification found another node's write to the same row first), request_id (another purchase wrote one of its request IDs meanwhile), connection_lost (its connection went before COMMIT).",
	}, []string{"reason"})
	for _, reason := range []string{RetryDeadlock, RetryRequestID, RetryConnLost} {
		m.retries.WithLabelValues(reason)
	}
}

// Purchase counts a purchase's answer, outcome (one of
// PurchaseOutcomes), and how long it took, in the series New resolved; a
// pair of labels it did not make (none the service answers with) is looked
// up.
func (m *Metrics) Purchase(strategy, outcome string, d time.Duration) {
	if ps, ok := m.series[purchaseLabels{strategy, outcome}]; ok {
		ps.count.Inc()
		ps.duration.Observe(d.Seconds())
		return
	}
	m.purchases.WithLabelValues(strategy, outcome).Inc()
	m.duration.WithLabelValues(strategy, outcome).Observe(d.Seconds())
}

// LockWaited records a wait for a lock and how it ended.
func (m *Metrics) LockWaited(strategy, result string, d time.Duration) {
	m.lockWait.WithLabelValues(strategy, result).Observe(d.Seconds())
}

// LockFailed counts a lock failure.
func (m *Metrics) LockFailed(strategy, reason string) {
	m.lockFailures.WithLabelValues(strategy, reason).Inc()
}

// Held records one hold of a lock: how many purchases it sold and how long
// it lasted.
func (m *Metrics) Held(strategy string, n int, d time.Duration) {
	m.batchSize.WithLabelValues(strategy).Observe(float64(n))
	m.lockHold.WithLabelValues(strategy).Observe(d.Seconds())
}

// ReservePending records the reservations not yet written, as a writer
// counted them.
func (m *Metrics) ReservePending(n int64) { m.reservePending.Set(float64(n)) }

// ReserveWritten counts n reservations written.
func (m *Metrics) ReserveWritten(n int) { m.reserveWritten.Add(float64(n)) }

// ReserveLag observes the write lag of a reservation written: from its
// entry in the stream to its acknowledgement after its order's COMMIT.
func (m *Metrics) ReserveLag(d time.Duration) { m.reserveLag.Observe(d.Seconds()) }

// ReserveFailed counts a reservation the database refused with code.
func (m *Metrics) ReserveFailed(code failure.Code) {
	m.reserveFailed.WithLabelValues(string(code)).Inc()
}

// ReserveDead counts a stream entry moved to the dead letters.
func (m *Metrics) ReserveDead() { m.reserveDead.Inc() }

// ReserveCorrected counts a counter moved by delta, and the reservations
// found lost.
func (m *Metrics) ReserveCorrected(delta, lost int64) {
	direction := "up"
	if delta < 0 {
		direction = "down"
	}
	m.reserveMoved.WithLabelValues(direction).Inc()
	m.reserveLost.Add(float64(lost))
}

// ReserveRecovered counts a counter found gone from Redis.
func (m *Metrics) ReserveRecovered() { m.reserveRecoveries.Inc() }

// Paid counts an order paid.
func (m *Metrics) Paid() { m.payments.Inc() }

// Retried counts a transaction tried again for reason.
func (m *Metrics) Retried(reason string) { m.retries.WithLabelValues(reason).Inc() }

// Returned counts n orders whose units came back for reason.
func (m *Metrics) Returned(reason string, n int) { m.returns.WithLabelValues(reason).Add(float64(n)) }

// Stock records a product's stock as seen.
func (m *Metrics) Stock(product, stock int64) {
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
