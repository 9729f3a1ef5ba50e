package load

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// closedLoop is a plan of n GETs of target (or purchases, when post), one
// at a time, with timeout.
func closedLoop(target string, n int, post bool, timeout time.Duration) *Plan {
	p := &Plan{Timeout: timeout, Bases: []string{target}, Targets: []string{target}, Requests: n, Workers: 1,
		Phases: []Phase{{}}}
	if post {
		p.Purchase = true
		p.Head, p.Mid, p.Tail = []byte(`{"user_id":"u`), []byte(`","request_id":"r`), []byte(`"}`)
	}
	return p
}

// TestTimeoutEndsRequest: a request whose answer does not come within the
// plan's timeout is counted a transport failure, "timeout awaiting the
// answer", and its connection is closed: the server sees its request
// cancelled, long before it would have answered.
func TestTimeoutEndsRequest(t *testing.T) {
	var cancelled atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			cancelled.Add(1)
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	// Were the timeout not kept, the run would end by this context's.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	tally, err := closedLoop(srv.URL+"/slow", 2, false, 200*time.Millisecond).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := tally.counts[outTransport]; got != 2 {
		t.Fatalf("transport failures = %d; want 2 (counts %v)", got, tally.counts)
	}
	if !slices.ContainsFunc(tally.samples, func(s string) bool { return strings.Contains(s, "timeout awaiting the answer") }) {
		t.Errorf("samples %q; want one saying the timeout ended the request", tally.samples)
	}
	deadline := time.Now().Add(10 * time.Second)
	for cancelled.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := cancelled.Load(); got != 2 {
		t.Errorf("the server saw %d of the 2 requests cancelled; want both: the timeout closes the connection", got)
	}
}

// keepAliveCloser is a server that answers one request per connection
// without saying it will close it (no Connection: close), then closes it,
// as a server closes an idle kept-alive connection; it counts the
// connections it accepted and the request lines it read.
type keepAliveCloser struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	lines    []string
	wg       sync.WaitGroup
}

func newKeepAliveCloser(t *testing.T) *keepAliveCloser {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &keepAliveCloser{ln: ln}
	k.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			k.accepted.Add(1)
			k.wg.Go(func() { k.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		k.wg.Wait()
	})
	return k
}

func (k *keepAliveCloser) serve(c net.Conn) {
	defer c.Close()
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	k.mu.Lock()
	k.lines = append(k.lines, req.Method+" "+req.RequestURI)
	k.mu.Unlock()
	body := `{"status":"ok"}`
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// TestClosedKeepAliveRetriesGet: a GET whose kept-alive connection the
// server has closed is sent again on a new connection and succeeds; a
// purchase is not (it may have been served) and counts a transport
// failure. The path goes as given, %2F and all.
func TestClosedKeepAliveRetriesGet(t *testing.T) {
	k := newKeepAliveCloser(t)
	base := "http://" + k.ln.Addr().String()
	tally, err := closedLoop(base+"/api/v1/purchases/a%2Fb", 3, false, 10*time.Second).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tally.counts[outOK] != 3 || tally.counts[outTransport] != 0 {
		t.Fatalf("GET counts %v; want 3 answered, none failed", tally.counts)
	}
	if got := k.accepted.Load(); got != 3 {
		t.Errorf("the server accepted %d connections; want 3, one per GET", got)
	}
	k.mu.Lock()
	lines := slices.Clone(k.lines)
	k.mu.Unlock()
	for _, l := range lines {
		if l != "GET /api/v1/purchases/a%2Fb" {
			t.Errorf("the server read %q; want the path as given", l)
		}
	}

	k2 := newKeepAliveCloser(t)
	tally, err = closedLoop("http://"+k2.ln.Addr().String()+"/api/v1/products/1/purchase", 2, true, 10*time.Second).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := tally.counts[outTransport]; got != 1 {
		t.Errorf("purchase counts %v; want 1 failed: the second, on the connection the server closed, is not sent again", tally.counts)
	}
}

// countingServer answers every request {"status":"ok"}, after head has
// set its headers; conns counts the connections it has seen.
func countingServer(t *testing.T, head func(http.ResponseWriter)) (srv *httptest.Server, conns func() int) {
	var seen sync.Map
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		head(w)
		w.Write([]byte(`{"status":"ok"}`))
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			seen.Store(c.RemoteAddr().String(), true)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, func() (n int) {
		seen.Range(func(any, any) bool { n++; return true })
		return n
	}
}

// TestConnectionCloseAnswered: an answer with Connection: close is read,
// and the next request goes on a new connection. Purchases, which are never
// sent again: one sent on the closed connection would fail.
func TestConnectionCloseAnswered(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter) { w.Header().Set("Connection", "close") })
	tally, err := closedLoop(srv.URL+"/api/v1/products/1/purchase", 3, true, 10*time.Second).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tally.counts[outTransport] != 0 || tally.total() != 3 {
		t.Fatalf("counts %v; want 3 answered, none failed", tally.counts)
	}
	if n := conns(); n != 3 {
		t.Errorf("the server saw %d connections; want 3: each answer closed its own", n)
	}
}

// TestIdleConnectionRedialled: a connection idle longer than the client's
// idle time is closed before the next request, which goes on a new one.
func TestIdleConnectionRedialled(t *testing.T) {
	srv, count := countingServer(t, func(http.ResponseWriter) {})
	lc, err := newLoadClient(t.Context(), []string{srv.URL + "/healthz"}, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.close()
	p := closedLoop(srv.URL+"/healthz", 1, false, time.Minute)
	w := newWorker(p, lc, nil)
	defer w.release()
	for i, want := range []int{1, 1} { // kept alive
		if err := w.send(0, w.reqs[0]); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got := count(); got != want {
			t.Fatalf("after request %d the server saw %d connections; want %d", i, got, want)
		}
	}
	lc.idle = 10 * time.Millisecond
	time.Sleep(20 * time.Millisecond)
	if err := w.send(0, w.reqs[0]); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 2 {
		t.Errorf("after an idle spell the server saw %d connections; want 2: the idle one closed, a new one dialled", got)
	}
}

// TestTargetsOnOneHostShareAConnection: a worker keeps one connection per
// host, however many targets name it.
func TestTargetsOnOneHostShareAConnection(t *testing.T) {
	srv, conns := countingServer(t, func(http.ResponseWriter) {})
	p := closedLoop(srv.URL+"/a", 4, false, 10*time.Second)
	p.Bases = append(p.Bases, srv.URL)
	p.Targets = append(p.Targets, srv.URL+"/b")
	tally, err := p.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tally.counts[outOK] != 4 {
		t.Fatalf("counts %v; want 4 answered", tally.counts)
	}
	if n := conns(); n != 1 {
		t.Errorf("the server saw %d connections; want 1: the two targets are one host", n)
	}
}
