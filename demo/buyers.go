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

// Series is one product on sale in a scenario, and what its buyers got.
type Series struct {
	ID, Label string
	Product   int64
	initial   int64
	Seller    *Instance // reads its stock and audit

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
func (w *World) NewSeries(id, label string, seller *Instance, stock int64) (*Series, error) {
	p, err := seller.Client.CreateProduct(w.ctx, "demo "+id, stock)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	s := &Series{ID: id, Label: label, Product: p.ID, initial: stock, Seller: seller, stock: stock,
		answers: map[string]int{}, inflight: map[int64]time.Time{}}
	w.mu.Lock()
	w.series = append(w.series, s)
	w.mu.Unlock()
	return s, nil
}

// finish reads the series' audit: what the rows report.
func (w *World) Finish(s *Series) (client.Audit, error) {
	a, err := s.Seller.Client.Audit(w.ctx, s.Product)
	if err != nil {
		return a, fmt.Errorf("demo: audit %s: %w", s.Label, err)
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
		if a, err = s.Seller.Client.Audit(w.ctx, s.Product); err != nil {
			return a, fmt.Errorf("demo: audit %s: %w", s.Label, err)
		}
	}
	s.mu.Lock()
	s.audit, s.stock = &a, a.Stock
	s.mu.Unlock()
	return a, nil
}

func (s *Series) snapshot(now time.Time) Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{ID: s.ID, Label: s.Label, Product: s.Product, Initial: s.initial, Stock: s.stock,
		Audited: s.audit != nil, Answers: map[string]int{}, Waiting: len(s.inflight),
		AuditURL: "/api/audit?series=" + url.QueryEscape(s.ID)}
	for k, v := range s.answers {
		snap.Answers[k] = v
	}
	for _, t := range s.inflight {
		snap.Longest = max(snap.Longest, now.Sub(t).Milliseconds())
	}
	return snap
}

// Answer is what one purchase got.
type Answer struct {
	Status int    // 0: no answer (a transport error)
	Code   string // the contract's error code
	Order  client.Order
	// requestID is a 202's: its reservation's, which the server made.
	RequestID string
	Sent      time.Time
	Took      time.Duration
	Err       error // transport error
}

// created says the purchase made an order, or under reserve a
// reservation (202) whose order is written moments later.
func (a Answer) Created() bool {
	return a.Status == http.StatusCreated || a.Status == http.StatusAccepted
}

// String says it as a person reads it: "201 created", "503 lock_lost".
func (a Answer) String() string {
	switch {
	case a.Status == 0:
		return "no answer"
	case a.Status == http.StatusAccepted:
		return "202 accepted"
	case a.Created():
		return "201 created"
	case a.Code != "":
		return fmt.Sprintf("%d %s", a.Status, a.Code)
	}
	return fmt.Sprintf("%d", a.Status)
}

// label is the answer's key in a series' counts.
func (a Answer) Label() string {
	if a.Created() {
		return strconv.Itoa(a.Status)
	}
	return a.String()
}

// user returns a buyer's name no other purchase of the world has used.
func (w *World) User() string { return fmt.Sprintf("buyer-%d", w.users.Add(1)) }

// buy makes one purchase of s's product on in as a new buyer, with o's
// query, and counts its answer in s.
func (w *World) Buy(ctx context.Context, s *Series, in *Instance, o client.Override) Answer {
	return w.BuyAs(ctx, s, in, o, "")
}

// buyAs is buy with a request ID of the caller's (empty: none).
func (w *World) BuyAs(ctx context.Context, s *Series, in *Instance, o client.Override, requestID string) Answer {
	s.mu.Lock()
	ticket := s.next
	s.next++
	a := Answer{Sent: time.Now()}
	s.inflight[ticket] = a.Sent
	s.mu.Unlock()

	got, err := in.Client.Purchase(ctx, s.Product, client.Purchase{UserID: w.User(), Quantity: 1, RequestID: requestID}, o)
	a.Took = time.Since(a.Sent)
	var e *client.Error
	switch {
	case err == nil:
		a.Status, a.Order = got.Status, got.Order
		if got.Reservation != nil {
			a.RequestID = got.Reservation.RequestID
		}
	case errors.As(err, &e):
		a.Status, a.Code = e.Status, e.Code
	default:
		a.Err = err
	}
	s.mu.Lock()
	delete(s.inflight, ticket)
	if ctx.Err() == nil {
		s.answers[a.Label()]++
	}
	s.mu.Unlock()
	return a
}

// buyAsync makes the purchase in the background; the channel gives its
// answer.
func (w *World) BuyAsync(ctx context.Context, s *Series, in *Instance, o client.Override) <-chan Answer {
	c := make(chan Answer, 1)
	go func() { c <- w.Buy(ctx, s, in, o) }()
	return c
}

// crowd sends n purchases of s, k at a time, spread over ins in turn, and
// returns their answers in the order they were sent.
func (w *World) Crowd(ctx context.Context, s *Series, ins []*Instance, n, k int, o client.Override) []Answer {
	out := make([]Answer, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(k, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				out[i] = w.Buy(ctx, s, ins[i%len(ins)], o)
			}
		})
	}
	wg.Wait()
	return out
}

// sellOut has n buyers of s, k at a time, buy on ins in turn with o, then
// reads the audit: every answer, in the order sent, and the audit.
func (w *World) SellOut(s *Series, ins []*Instance, n, k int, o client.Override) ([]Answer, client.Audit, error) {
	w.Note("%s: %d buyers", s.Label, n)
	as := w.Crowd(w.ctx, s, ins, n, k, o)
	if err := w.ctx.Err(); err != nil {
		return nil, client.Audit{}, err
	}
	audit, err := w.Finish(s)
	return as, audit, err
}

// stream keeps k buyers of s buying on ins in turn, each pausing gap
// between purchases, until d has passed; it returns every answer.
func (w *World) Stream(ctx context.Context, s *Series, ins []*Instance, d time.Duration, k int, gap time.Duration, o client.Override) []Answer {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu  sync.Mutex
		out []Answer
		wg  sync.WaitGroup
	)
	for b := range k {
		wg.Go(func() {
			for i := b; ctx.Err() == nil; i += k {
				a := w.Buy(ctx, s, ins[i%len(ins)], o)
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
func count(as []Answer, label string) int {
	n := 0
	for _, a := range as {
		if a.Label() == label {
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
