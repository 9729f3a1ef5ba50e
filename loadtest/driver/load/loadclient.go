package load

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Of the load's connections.
const (
	dialTimeout = 5 * time.Second
	keepAlive   = 30 * time.Second
	connBuffer  = 4096 // each connection's read and write buffers
	// idleTimeout: a connection idle longer is closed before its next
	// request, and a new one dialled, so that no purchase goes on a
	// connection the server may be closing (the service closes one idle
	// for 2 minutes).
	idleTimeout = 90 * time.Second
)

// loadClient sends the load: every worker holds a connection of its own
// to each instance (a hostConn), on which it writes a request with
// fasthttp and reads its answer, one at a time, as wrk does. It never goes
// through a proxy and never asks for gzip. fasthttp's HostClient, which
// sent the load before, took a connection from a shared pool and set its
// deadlines for every request: about 2.5 µs per request in a bare loop;
// without it the driver spends 0.94x the CPU per request it did
// (docs/figures.md, "Is the driver the bottleneck?"). A request's timeout
// is kept by one watcher for the whole load instead (timeouts). The client opens every
// connection itself, so that close can end them all, the busy ones
// included.
type loadClient struct {
	ctx   context.Context
	hosts []host // per target
	// sources, when not empty, are the local addresses new connections
	// are made from, in turn (-clients): each looks like a client of its
	// own to a per-IP limit.
	sources  []net.IP
	dials    atomic.Int64
	timeouts *timeouts // nil: no timeout
	idle     time.Duration
	mu       sync.Mutex
	open     map[*loadConn]struct{}
	closed   bool
}

// host is where a target's connections go.
type host struct {
	addr       string // host:port
	tls        bool
	serverName string // for TLS
}

// errLoadClosed is what a dial after close returns.
var errLoadClosed = errors.New("the run is over")

func newLoadClient(ctx context.Context, targets []string, timeout time.Duration, sources []net.IP) (*loadClient, error) {
	lc := &loadClient{ctx: ctx, hosts: make([]host, len(targets)), open: map[*loadConn]struct{}{}, sources: sources,
		idle: idleTimeout}
	for i, t := range targets {
		u, err := url.Parse(t)
		if err != nil {
			return nil, err
		}
		secure := u.Scheme == "https"
		lc.hosts[i] = host{addr: fasthttp.AddMissingPort(u.Host, secure), tls: secure, serverName: u.Hostname()}
	}
	if timeout > 0 {
		lc.timeouts = newTimeouts(timeout)
	}
	return lc, nil
}

// dial opens a connection of the load to h; it gives up when the run's
// context ends.
func (lc *loadClient) dial(h host) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	if n := len(lc.sources); n > 0 {
		d.LocalAddr = &net.TCPAddr{IP: lc.sources[int(lc.dials.Add(1)-1)%n]}
	}
	if lc.timeouts != nil && lc.timeouts.timeout < d.Timeout {
		d.Timeout = lc.timeouts.timeout // no longer than a request may wait
	}
	conn, err := d.DialContext(lc.ctx, "tcp", h.addr)
	if err != nil {
		return nil, err
	}
	if h.tls {
		conn = tls.Client(conn, &tls.Config{ServerName: h.serverName})
	}
	c := &loadConn{Conn: conn, lc: lc}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		conn.Close()
		return nil, errLoadClosed
	}
	lc.open[c] = struct{}{}
	return c, nil
}

// close closes every connection of the load, idle or busy: a request in
// flight fails at once. It may be called more than once.
func (lc *loadClient) close() {
	lc.mu.Lock()
	if lc.closed {
		lc.mu.Unlock()
		return
	}
	lc.closed = true
	open := lc.open
	lc.open = nil
	lc.mu.Unlock()
	if lc.timeouts != nil {
		lc.timeouts.stop()
	}
	for c := range open {
		_ = c.Conn.Close() // closing is all that is asked of it
	}
}

// loadConn is a connection of the load; it leaves the set of open ones
// when it is closed.
type loadConn struct {
	net.Conn
	lc *loadClient
}

func (c *loadConn) Close() error {
	c.lc.mu.Lock()
	if c.lc.open != nil {
		delete(c.lc.open, c)
	}
	c.lc.mu.Unlock()
	return c.Conn.Close()
}

// hostConn is a worker's connection to one instance, dialled at its first
// request and again after the server closed it.
type hostConn struct {
	h    host
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time // when its last answer came
}

// roundTrip sends req on c's connection, dialling one when it has none,
// and reads its answer into resp; slot keeps its timeout. A GET whose
// kept-alive connection turns out to be closed before any byte of its
// answer is sent once more on a new one, as net/http does (never a
// purchase, which may have been served). On any error the connection is
// closed.
func (c *hostConn) roundTrip(lc *loadClient, slot *slot, req *fasthttp.Request, resp *fasthttp.Response) error {
	for again := true; ; again = false {
		now := time.Now()
		if c.conn != nil && now.Sub(c.used) > lc.idle {
			c.close()
		}
		fresh := c.conn == nil
		if fresh {
			conn, err := lc.dial(c.h)
			if err != nil {
				return err
			}
			c.conn = conn
			if c.br == nil {
				c.br, c.bw = bufio.NewReaderSize(conn, connBuffer), bufio.NewWriterSize(conn, connBuffer)
			} else {
				c.br.Reset(conn)
				c.bw.Reset(conn)
			}
			now = time.Now() // the timeout runs from the request, not the dial
		}
		// The path as given (parsing the URI again would normalize it).
		req.URI().DisablePathNormalizing = true
		slot.start(lc.timeouts, c.conn, now)
		err := req.Write(c.bw)
		if err == nil {
			err = c.bw.Flush()
		}
		if err == nil {
			err = resp.Read(c.br)
		}
		if slot.stop(lc.timeouts) {
			err = fasthttp.ErrTimeout
		}
		if err == nil && !resp.ConnectionClose() {
			c.used = time.Now()
			return nil
		}
		c.close()
		if err == nil || !again || fresh || !req.Header.IsGet() || !closedBeforeAnswer(err) {
			return err
		}
	}
}

// closedBeforeAnswer says err is a connection closed before any byte of an
// answer.
func closedBeforeAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, fasthttp.ErrConnectionClosed)
}

// close closes c's connection, if it has one.
func (c *hostConn) close() {
	if c.conn != nil {
		_ = c.conn.Close() // a connection given up: nothing to do about an error
		c.conn = nil
	}
}

// timeouts keeps the load's requests to their timeout: every worker's
// request in flight is in a slot, and a watcher looks at them all every
// tick (a twentieth of the timeout, from 1 ms to 100 ms) and closes the
// connection of one that has waited longer, which ends its read at once.
// A deadline set on the connection for every request costs each request a
// timer's update.
type timeouts struct {
	timeout time.Duration
	mu      sync.Mutex
	slots   []*slot
	done    chan struct{}
	wg      sync.WaitGroup
}

func newTimeouts(timeout time.Duration) *timeouts {
	t := &timeouts{timeout: timeout, done: make(chan struct{})}
	tick := min(max(timeout/20, time.Millisecond), 100*time.Millisecond)
	t.wg.Go(func() {
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-t.done:
				return
			case now := <-tk.C:
				t.expire(now)
			}
		}
	})
	return t
}

// add makes s one of the watched slots.
func (t *timeouts) add(s *slot) {
	t.mu.Lock()
	t.slots = append(t.slots, s)
	t.mu.Unlock()
}

// expire ends the requests that were sent more than the timeout before
// now.
func (t *timeouts) expire(now time.Time) {
	t.mu.Lock()
	slots := t.slots
	t.mu.Unlock()
	for _, s := range slots {
		s.expire(now, t.timeout)
	}
}

// stop ends the watcher.
func (t *timeouts) stop() {
	close(t.done)
	t.wg.Wait()
}

// slot is a worker's request in flight, as the timeouts see it.
type slot struct {
	mu      sync.Mutex
	sent    time.Time // zero: none in flight
	conn    net.Conn
	expired bool
	added   bool
}

// start marks a request sent on conn now.
func (s *slot) start(t *timeouts, conn net.Conn, now time.Time) {
	if t == nil {
		return
	}
	if !s.added {
		s.added = true
		t.add(s)
	}
	s.mu.Lock()
	s.sent, s.conn, s.expired = now, conn, false
	s.mu.Unlock()
}

// stop marks the request answered (or failed) and says whether its
// timeout ended it first.
func (s *slot) stop(t *timeouts) (expired bool) {
	if t == nil {
		return false
	}
	s.mu.Lock()
	expired = s.expired
	s.sent, s.conn = time.Time{}, nil
	s.mu.Unlock()
	return expired
}

// expire closes the connection of the slot's request when it was sent
// more than timeout before now.
func (s *slot) expire(now time.Time, timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent.IsZero() || s.expired || now.Sub(s.sent) < timeout {
		return
	}
	s.expired = true
	_ = s.conn.Close() // its reader sees the error and stop says why
}
