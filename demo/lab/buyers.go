package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/client"
)

// Series is one product on sale in a scenario, and what its buyers got.
type Series struct {
	// ID names it for programs (Row.Series, the page's audit links);
	// Label names it in notes.
	ID, Label string
	// Product is the product's id; Seller is the instance that reads its
	// stock and audit.
	Product int64
	Seller  *Instance
	initial int64

	mu       sync.Mutex
	answers  map[string]int
	inflight map[int64]time.Time
	next     int64
	stock    int64
	audit    *client.Audit
	// broken counts its 202s known lost or refused: Finish does not wait
	// for their orders.
	broken int
}

// NewSeries creates a product of stock units, sold under label.
func (w *World) NewSeries(id, label string, seller *Instance, stock int64) (*Series, error) {
	p, err := seller.Client.CreateProduct(w.ctx, "demo "+id, stock)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	s := &Series{ID: id, Label: label, Product: p.ID, initial: stock, Seller: seller, stock: stock,
		answers: map[string]int{}, inflight: map[int64]time.Time{}}
	w.mu.Lock()
	w.series = append(w.series, s)
	w.mu.Unlock()
	return s, nil
}

// Finish reads the series' audit, which its rows report. Under reserve the
// orders are written moments after the 202s: it waits for them, 10 s at
// most (the verdict says what is missing then).
func (w *World) Finish(s *Series) (client.Audit, error) {
	s.mu.Lock()
	reserved := int64(s.answers["202"] - s.broken)
	s.mu.Unlock()
	return w.FinishWhen(s, func(a client.Audit) bool { return a.UnitsSold >= reserved }, 10*time.Second)
}

// FinishWhen reads s's audit until done says so, for limit at most, and
// keeps it as the series' last word: the stock it shows from then on.
func (w *World) FinishWhen(s *Series, done func(client.Audit) bool, limit time.Duration) (client.Audit, error) {
	a, err := w.WaitAudit(s, done, limit)
	if err != nil {
		return a, err
	}
	s.mu.Lock()
	s.audit, s.stock = &a, a.Stock
	s.mu.Unlock()
	return a, nil
}

// SetBroken says n of the series' 202s are known lost or refused: Finish
// does not wait for their orders.
func (s *Series) SetBroken(n int) {
	s.mu.Lock()
	s.broken = n
	s.mu.Unlock()
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
	Status int          // 0: no answer (a transport error)
	Code   string       // the contract's error code
	Order  client.Order // a 201's
	// RequestID is a 202's: its reservation's, which the server made.
	RequestID string
	// Sent is when it was sent; Took, how long its answer took.
	Sent time.Time
	Took time.Duration
	Err  error // transport error
}

// Created says the purchase made an order, or under reserve a
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

// Label is the answer's key in a series' counts.
func (a Answer) Label() string {
	if a.Created() {
		return strconv.Itoa(a.Status)
	}
	return a.String()
}

// User returns a buyer's name no other purchase of the world has used.
func (w *World) User() string { return fmt.Sprintf("buyer-%d", w.users.Add(1)) }

// Buy makes one purchase of s's product on in as a new buyer, with o's
// query, and counts its answer in s.
func (w *World) Buy(ctx context.Context, s *Series, in *Instance, o client.Override) Answer {
	return w.BuyAs(ctx, s, in, o, "")
}

// BuyAs is Buy with a request ID of the caller's (empty: none).
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

// BuyAsync makes the purchase in the background; the channel gives its
// answer.
func (w *World) BuyAsync(ctx context.Context, s *Series, in *Instance, o client.Override) <-chan Answer {
	c := make(chan Answer, 1)
	go func() { c <- w.Buy(ctx, s, in, o) }()
	return c
}

// Crowd sends n purchases of s, k at a time, spread over ins in turn, and
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

// SellOut has n buyers of s, k at a time, buy on ins in turn with o, then
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

// Stream keeps k buyers of s buying on ins in turn, each pausing gap
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

// Count returns how many answers were label ("201", "503 unavailable").
func Count(as []Answer, label string) int {
	n := 0
	for _, a := range as {
		if a.Label() == label {
			n++
		}
	}
	return n
}

// Short says an answer in a word: "201", "lock_lost", "sold_out".
func (a Answer) Short() string {
	switch {
	case a.Created():
		return "201"
	case a.Code != "":
		return a.Code
	}
	return a.String()
}

// WaitAudit reads s's audit until done says so, for limit at most.
func (w *World) WaitAudit(s *Series, done func(client.Audit) bool, limit time.Duration) (client.Audit, error) {
	deadline := time.Now().Add(limit)
	for {
		a, err := s.Seller.Client.Audit(w.ctx, s.Product)
		if err != nil {
			return a, fmt.Errorf("lab: audit %s: %w", s.Label, err)
		}
		if done(a) || time.Now().After(deadline) {
			return a, nil
		}
		select {
		case <-w.ctx.Done():
			return a, w.ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PromisesOf asks in what became of each reservation of rids, until none
// is pending or unanswered (10 s at most): how many became orders and how many no
// instance knows.
func (w *World) PromisesOf(in *Instance, rids []string) (kept, lost int, err error) {
	pending := rids
	for deadline := time.Now().Add(10 * time.Second); len(pending) > 0 && time.Now().Before(deadline); {
		var still []string
		for _, rid := range pending {
			st, err := in.Client.PurchaseState(w.ctx, rid)
			var e *client.Error
			switch {
			case errors.As(err, &e) && e.Code == "purchase_not_found":
				lost++
			case errors.As(err, &e) && e.Status == http.StatusServiceUnavailable:
				// A store between two states (a Redis Cluster's failover
				// not yet seen by the client): ask again.
				still = append(still, rid)
			case err != nil:
				return kept, lost, fmt.Errorf("lab: what became of %s: %w", rid, err)
			case st.State == "ordered":
				kept++
			case st.State == "pending":
				still = append(still, rid)
			}
		}
		if pending = still; len(pending) > 0 {
			select {
			case <-w.ctx.Done():
				return kept, lost, w.ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return kept, lost, nil
}
