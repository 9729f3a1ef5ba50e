package controller_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// buyFrom makes a purchase through in as a client behind X-Forwarded-For
// xff ("" sends none) and returns its answer.
func buyFrom(t *testing.T, in *apptest.Instance, id int64, user, xff string) apptest.Response {
	t.Helper()
	header := map[string]string{}
	if xff != "" {
		header["X-Forwarded-For"] = xff
	}
	return in.Do(t, http.MethodPost, apptest.PurchasePath(id, ""), fmt.Sprintf(`{"user_id":%q,"quantity":1}`, user), header)
}

// TestIPLimitExactUnderConcurrency: 60 purchases at once from one address,
// over two instances, with SECKILL_IP_LIMIT=20/30s: 20 get through (and
// those the limiter let through uncounted, which its metric names), the
// rest answer 429 rate_limited with a Retry-After within the window, and
// nothing of theirs is written.
func TestIPLimitExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	// optimistic takes no Redis lock: the limit is all this test asks of
	// Redis, so a lock round slowed by a loaded machine cannot answer 503.
	a := apptest.Start(t, map[string]string{"SECKILL_IP_LIMIT": "20/30s", "SECKILL_PER_USER_LIMIT": "0", "SECKILL_LOCK": "optimistic"})
	b := a.Another(t)
	id := a.Create(t, "phone", 100)
	results := make([]apptest.Response, 60)
	var wg sync.WaitGroup
	for i := range results {
		in := []*apptest.Instance{a, b}[i%2]
		wg.Go(func() {
			r, err := in.Send(t.Context(), http.MethodPost, apptest.PurchasePath(id, ""), fmt.Sprintf(`{"user_id":"u-%d","quantity":1}`, i), nil)
			if err != nil {
				r.Status = -1
			}
			results[i] = r
		})
	}
	wg.Wait()
	created, limited := 0, 0
	for _, r := range results {
		switch r.Status {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
			limited++
			apptest.WantError(t, "a purchase over the limit", r, http.StatusTooManyRequests, "rate_limited")
			if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 30 {
				t.Errorf("Retry-After %q; want 1 to 30 seconds", r.Header.Get("Retry-After"))
			}
		default:
			t.Errorf("a purchase = %v; want 201 or 429", r)
		}
	}
	// A count Redis did not answer in time lets its request through, by
	// design, and says so in the metric: each such request may add one
	// sale past the 20 (its INCR may still have taken one of the 20).
	uncounted := ipLimitUnavailable(t, a) + ipLimitUnavailable(t, b)
	if created < 20 || created > 20+uncounted || created+limited != 60 {
		t.Errorf("%d created, %d rate_limited, %d let through uncounted; want 20 created (at most 20 + uncounted) and the rest limited",
			created, limited, uncounted)
	}
	if au := a.Audit(t, id); au.Orders != int64(created) {
		t.Errorf("audit %+v; want %d orders", au, created)
	}
}

// ipLimitUnavailable is the count of requests in let through because Redis
// did not answer the count in time.
func ipLimitUnavailable(t *testing.T, in *apptest.Instance) int {
	t.Helper()
	const series = `seckill_ip_limit_total{result="unavailable"} `
	for l := range strings.Lines(string(in.Get(t, "/metrics").Body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), series); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s%q: %v", series, v, err)
			}
			return int(n)
		}
	}
	t.Fatalf("GET /metrics has no %s", series)
	return 0
}

// TestIPLimitWindow: the window starts at the address's first counted
// request and ends by itself; the limit does not let a spoofed
// X-Forwarded-For through when the peer is not a trusted proxy.
func TestIPLimitWindow(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_IP_LIMIT": "2/1s", "SECKILL_PER_USER_LIMIT": "0"})
	id := in.Create(t, "phone", 100)
	for i, xff := range []string{"", "198.51.100.1"} {
		if r := buyFrom(t, in, id, fmt.Sprint("u-", i), xff); r.Status != http.StatusCreated {
			t.Fatalf("purchase %d = %v; want 201", i, r)
		}
	}
	// A third, claiming to be another client: the peer is not trusted.
	r := buyFrom(t, in, id, "u-3", "203.0.113.9")
	apptest.WantError(t, "a third purchase with a spoofed X-Forwarded-For", r, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q; want 1", r.Header.Get("Retry-After"))
	}
	// The window ends by itself.
	testenv.Eventually(t, 10*time.Second, "a purchase allowed after the window", func() bool {
		return buyFrom(t, in, id, "u-4", "").Status == http.StatusCreated
	})
}

// TestIPLimitTrustedProxies: behind a trusted proxy the client is the
// right-most untrusted address of X-Forwarded-For, IPv4 or IPv6, through
// several hops.
func TestIPLimitTrustedProxies(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, map[string]string{"SECKILL_IP_LIMIT": "1/30s", "SECKILL_PER_USER_LIMIT": "0",
		"SECKILL_TRUSTED_PROXIES": "127.0.0.1/32,::1,10.0.0.0/8"})
	id := in.Create(t, "phone", 100)
	for i, tc := range []struct {
		xff  string
		want int
	}{
		{"198.51.100.1", http.StatusCreated},
		{"198.51.100.2", http.StatusCreated},
		{"198.51.100.1", http.StatusTooManyRequests}, // the same client again
		{"2001:db8::1", http.StatusCreated},
		{"2001:db8::1", http.StatusTooManyRequests},
		// Several hops: the client spoofs the first, a trusted proxy 10.1.2.3
		// added its peer: the client is 198.51.100.7.
		{"203.0.113.1, 198.51.100.7, 10.1.2.3", http.StatusCreated},
		{"203.0.113.2, 198.51.100.7", http.StatusTooManyRequests},
		// No header behind the trusted proxy: the proxy itself is the client.
		{"", http.StatusCreated},
		{"", http.StatusTooManyRequests},
	} {
		if r := buyFrom(t, in, id, fmt.Sprint("u-", i), tc.xff); r.Status != tc.want {
			t.Errorf("purchase with X-Forwarded-For %q = %v; want %d", tc.xff, r, tc.want)
		}
	}
}
