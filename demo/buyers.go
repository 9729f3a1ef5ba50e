package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/client"
)

// series is one product on sale in a scenario, and what its buyers got.
type series struct {
	id, label string
	product   int64
	initial   int64
	seller    *instance // reads its stock and audit

	mu       sync.Mutex
	answers  map[string]int
	inflight map[int64]time.Time
	next     int64
	stock    int64
	audit    *client.Audit
	// broken counts its 202s known lost or refused: finish does not wait
	// for their orders.
	broken int
}

// newSeries creates a product of stock units, sold under label.
func (w *world) newSeries(id, label string, seller *instance, stock int64) (*series, error) {
	p, err := seller.c.CreateProduct(w.ctx, "demo "+id, stock)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	s := &series{id: id, label: label, product: p.ID, initial: stock, seller: seller, stock: stock,
		answers: map[string]int{}, inflight: map[int64]time.Time{}}
	w.mu.Lock()
	w.series = append(w.series, s)
	w.mu.Unlock()
	return s, nil
}

// finish reads the series' audit: what the rows report.
func (w *world) finish(s *series) (client.Audit, error) {
	a, err := s.seller.c.Audit(w.ctx, s.product)
	if err != nil {
		return a, fmt.Errorf("demo: audit %s: %w", s.label, err)
	}
	// Under reserve the orders are written moments after the 202s: the
	// audit waits for them, 10 s at most (the verdict says what is
	// missing then).
	s.mu.Lock()
	reserved := int64(s.answers["202"] - s.broken)
	s.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); a.UnitsSold < reserved && time.Now().Before(deadline); {
		select {
		case <-w.ctx.Done():
			return a, w.ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if a, err = s.seller.c.Audit(w.ctx, s.product); err != nil {
			return a, fmt.Errorf("demo: audit %s: %w", s.label, err)
		}
	}
	s.mu.Lock()
	s.audit, s.stock = &a, a.Stock
	s.mu.Unlock()
	return a, nil
}

func (s *series) snapshot(now time.Time) Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{ID: s.id, Label: s.label, Product: s.product, Initial: s.initial, Stock: s.stock,
		Audited: s.audit != nil, Answers: map[string]int{}, Waiting: len(s.inflight),
		AuditURL: "/api/audit?series=" + url.QueryEscape(s.id)}
	for k, v := range s.answers {
		snap.Answers[k] = v
	}
	for _, t := range s.inflight {
		snap.Longest = max(snap.Longest, now.Sub(t).Milliseconds())
	}
	return snap
}

// answer is what one purchase got.
type answer struct {
	status int    // 0: no answer (a transport error)
	code   string // the contract's error code
	order  client.Order
	// requestID is a 202's: its reservation's, which the server made.
	requestID string
	sent      time.Time
	took      time.Duration
	err       error // transport error
}

// created says the purchase made an order, or under reserve a
// reservation (202) whose order is written moments later.
func (a answer) created() bool {
	return a.status == http.StatusCreated || a.status == http.StatusAccepted
}

// String says it as a person reads it: "201 created", "503 lock_lost".
func (a answer) String() string {
	switch {
	case a.status == 0:
		return "no answer"
	case a.status == http.StatusAccepted:
		return "202 accepted"
	case a.created():
		return "201 created"
	case a.code != "":
		return fmt.Sprintf("%d %s", a.status, a.code)
	}
	return fmt.Sprintf("%d", a.status)
}

// label is the answer's key in a series' counts.
func (a answer) label() string {
	if a.created() {
		return strconv.Itoa(a.status)
	}
	return a.String()
}

// user returns a buyer's name no other purchase of the world has used.
func (w *world) user() string { return fmt.Sprintf("buyer-%d", w.users.Add(1)) }

// buy makes one purchase of s's product on in as a new buyer, with o's
// query, and counts its answer in s.
func (w *world) buy(ctx context.Context, s *series, in *instance, o client.Override) answer {
	return w.buyAs(ctx, s, in, o, "")
}

// buyAs is buy with a request ID of the caller's (empty: none).
func (w *world) buyAs(ctx context.Context, s *series, in *instance, o client.Override, requestID string) answer {
	s.mu.Lock()
	ticket := s.next
	s.next++
	a := answer{sent: time.Now()}
	s.inflight[ticket] = a.sent
	s.mu.Unlock()

	got, err := in.c.Purchase(ctx, s.product, client.Purchase{UserID: w.user(), Quantity: 1, RequestID: requestID}, o)
	a.took = time.Since(a.sent)
	var e *client.Error
	switch {
	case err == nil:
		a.status, a.order = got.Status, got.Order
		if got.Reservation != nil {
			a.requestID = got.Reservation.RequestID
		}
	case errors.As(err, &e):
		a.status, a.code = e.Status, e.Code
	default:
		a.err = err
	}
	s.mu.Lock()
	delete(s.inflight, ticket)
	if ctx.Err() == nil {
		s.answers[a.label()]++
	}
	s.mu.Unlock()
	return a
}

// buyAsync makes the purchase in the background; the channel gives its
// answer.
func (w *world) buyAsync(ctx context.Context, s *series, in *instance, o client.Override) <-chan answer {
	c := make(chan answer, 1)
	go func() { c <- w.buy(ctx, s, in, o) }()
	return c
}

// crowd sends n purchases of s, k at a time, spread over ins in turn, and
// returns their answers in the order they were sent.
func (w *world) crowd(ctx context.Context, s *series, ins []*instance, n, k int, o client.Override) []answer {
	out := make([]answer, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(k, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				out[i] = w.buy(ctx, s, ins[i%len(ins)], o)
			}
		})
	}
	wg.Wait()
	return out
}

// sellOut has n buyers of s, k at a time, buy on ins in turn with o, then
// reads the audit: every answer, in the order sent, and the audit.
func (w *world) sellOut(s *series, ins []*instance, n, k int, o client.Override) ([]answer, client.Audit, error) {
	w.note("%s: %d buyers", s.label, n)
	as := w.crowd(w.ctx, s, ins, n, k, o)
	if err := w.ctx.Err(); err != nil {
		return nil, client.Audit{}, err
	}
	audit, err := w.finish(s)
	return as, audit, err
}

// stream keeps k buyers of s buying on ins in turn, each pausing gap
// between purchases, until d has passed; it returns every answer.
func (w *world) stream(ctx context.Context, s *series, ins []*instance, d time.Duration, k int, gap time.Duration, o client.Override) []answer {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu  sync.Mutex
		out []answer
		wg  sync.WaitGroup
	)
	for b := range k {
		wg.Go(func() {
			for i := b; ctx.Err() == nil; i += k {
				a := w.buy(ctx, s, ins[i%len(ins)], o)
				if ctx.Err() != nil {
					return // cut by the end of the stretch: not counted
				}
				mu.Lock()
				out = append(out, a)
				mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(gap):
				}
			}
		})
	}
	wg.Wait()
	return out
}

// count returns how many answers were label ("201", "503 unavailable").
func count(as []answer, label string) int {
	n := 0
	for _, a := range as {
		if a.label() == label {
			n++
		}
	}
	return n
}

// ms says a duration in whole milliseconds, or seconds from 10 s on.
func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// onOff says a flag.
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// fencing is the fencing= parameter of a purchase.
func fencing(on bool) *bool { return &on }

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, sep)
}
