package apptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/service"
)

// callTimeout bounds each call the harness makes.
const callTimeout = 30 * time.Second

// Service is what a test holds of a running instance, however it was
// started (Start: in the test's process; Run and Exec: the whole program):
// where it answers, its admin token, the Redis keys it makes, and the calls
// of a sale (create, buy, audit) that fail the test when the call itself
// does. Instance and Program embed it.
type Service struct {
	// URL is the instance's base URL, http://127.0.0.1:port.
	URL string
	// AdminToken is the bearer token the instance takes for an admin's;
	// the harness's calls send it. A program that made its token up has
	// none here until the test reads it from the output and sets it.
	AdminToken string
	redisAddrs []string
	keyPrefix  string
}

// Client returns a client of the instance's API that sends the admin
// token.
func (s *Service) Client() *client.Client {
	return &client.Client{BaseURL: s.URL, AdminToken: s.AdminToken, HTTP: http.DefaultClient, CallTimeout: callTimeout}
}

// KeyPrefix starts every Redis key the instance makes.
func (s *Service) KeyPrefix() string { return s.keyPrefix }

// LockKey is the Redis key of a product's lock under strategy on the
// instance's nodes.
func (s *Service) LockKey(strategy string, productID int64) string {
	return s.keyPrefix + "lock:" + strategy + ":product:" + strconv.FormatInt(productID, 10)
}

// LockHolders counts the instance's Redis nodes that hold the product's
// lock key under strategy (redlock holds it on a majority, setnx and token
// on the first node). A node that does not answer holds nothing.
func (s *Service) LockHolders(t testing.TB, strategy string, productID int64) int {
	t.Helper()
	key := s.LockKey(strategy, productID)
	held := 0
	for _, addr := range s.redisAddrs {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if n, err := c.Exists(ctx, key).Result(); err == nil && n == 1 {
			held++
		}
		cancel()
		if err := c.Close(); err != nil {
			t.Errorf("apptest: close the client of %s: %v", addr, err)
		}
	}
	return held
}

// Create creates a product of stock units and returns its ID.
func (s *Service) Create(t testing.TB, name string, stock int64) int64 {
	t.Helper()
	body, err := json.Marshal(api.NewProduct{Name: name, Stock: stock})
	if err != nil {
		t.Fatalf("apptest: %v", err)
	}
	var p api.Product
	wantDecoded(t, s.Admin(t, http.MethodPost, "/api/v1/admin/products", string(body)), http.StatusCreated, &p)
	return p.ID
}

// Product reads product id.
func (s *Service) Product(t testing.TB, id int64) api.Product {
	t.Helper()
	var p api.Product
	wantDecoded(t, s.Get(t, "/api/v1/products/"+strconv.FormatInt(id, 10)), http.StatusOK, &p)
	return p
}

// Audit reads product id's audit.
func (s *Service) Audit(t testing.TB, id int64) api.Audit {
	t.Helper()
	var a api.Audit
	wantDecoded(t, s.Admin(t, http.MethodGet, "/api/v1/products/"+strconv.FormatInt(id, 10)+"/audit", ""), http.StatusOK, &a)
	return a
}

// WantConsistent reads product id's audit and fails t unless the stock
// invariant held: consistent (initial - stock = units sold), stock >= 0,
// nothing oversold. It returns the audit for the test's own checks.
func (s *Service) WantConsistent(t testing.TB, id int64) api.Audit {
	t.Helper()
	a := s.Audit(t, id)
	if !a.Held() || a.Stock < 0 {
		t.Errorf("audit of product %d = %+v; want stock >= 0, initial - stock = units sold, nothing oversold", id, a)
	}
	return a
}

// Metrics reads the instance's /metrics.
func (s *Service) Metrics(t testing.TB) client.Metrics {
	t.Helper()
	m, err := s.Client().Metrics(context.Background())
	if err != nil {
		t.Fatalf("apptest: read the metrics of %s: %v", s.URL, err)
	}
	return m
}

// NoAnswer is Answer.Outcome when no answer came.
const NoAnswer = "no answer"

// Answer is what one purchase got.
type Answer struct {
	// Purchase is the purchase's body, as sent.
	Purchase api.Purchase
	// Status is the HTTP status: 201, a replay's 200, an error's; 0 when
	// no answer came (the instance died, stopped listening or hung past
	// the call's bound).
	Status int
	// Code is the contract's error code of an error answer.
	Code string
	// Order is the order of a 201 or a 200; Reservation the reservation of
	// a 202 (under reserve).
	Order       api.Order
	Reservation *api.Reservation
	// Err says what went wrong: the error answer, or why none came.
	Err error
	// At is when the answer came; Took is how long the call took.
	At   time.Time
	Took time.Duration
}

// Outcome names the answer in one word, as the metrics' outcome label
// does: "ok" for a 2xx with its order, the error code, "status N" for any
// other answer, NoAnswer when none came.
func (a Answer) Outcome() string {
	switch {
	case a.Status == 0:
		return NoAnswer
	case a.Status/100 == 2 && a.Err == nil:
		return "ok"
	case a.Code == "":
		return "status " + strconv.Itoa(a.Status)
	}
	return a.Code
}

// Buy makes one purchase of product id, with o's override parameters, and
// says what it got. It sends the admin token, and never fails a test: a
// goroutine may call it.
func (s *Service) Buy(ctx context.Context, id int64, p api.Purchase, o client.Override) Answer {
	var header map[string]string
	if s.AdminToken != "" {
		header = s.AdminHeader()
	}
	start := time.Now()
	r, err := s.send(ctx, http.MethodPost, client.PurchasePath(id, o), p, header)
	a := Answer{Purchase: p, Status: r.Status, At: time.Now()}
	a.Took = a.At.Sub(start)
	switch {
	case err != nil:
		a.Err = err
	case r.Status == http.StatusAccepted:
		a.Reservation = &api.Reservation{}
		if err := decodeStrict(r.Body, a.Reservation); err != nil {
			a.Err = fmt.Errorf("apptest: purchase answered %v: %w", r, err)
		}
	case r.Status/100 == 2:
		if err := decodeStrict(r.Body, &a.Order); err != nil {
			a.Err = fmt.Errorf("apptest: purchase answered %v: %w", r, err)
		}
	default:
		var e api.ErrorBody
		_ = json.Unmarshal(r.Body, &e) // a body without a code leaves Code empty
		a.Code = e.Error.Code
		a.Err = fmt.Errorf("apptest: purchase answered %v", r)
	}
	return a
}

// SafeStrategies are the strategies the contract promises exact together,
// in the table's order: service.StrategyTable's safe ones but reserve,
// which sells a product alone (and answers 202).
func SafeStrategies() []string {
	return slices.DeleteFunc(service.StrategyNames(), func(name string) bool {
		st, _ := service.LookupStrategy(name)
		return !st.Safe || st.Deferred()
	})
}
