package load

import (
	"context"
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
	idleTimeout = 90 * time.Second
)

// loadClient sends the load: a fasthttp.HostClient per instance, whose
// pool holds a connection per worker, that never goes through a proxy and
// never asks for gzip. It opens every connection itself, so that close can
// end them all, the busy ones included.
type loadClient struct {
	ctx   context.Context
	hosts []*fasthttp.HostClient // per target; targets on one host share one
	// sources, when not empty, are the local addresses new connections
	// are made from, in turn (-clients): each looks like a client of its
	// own to a per-IP limit.
	sources []net.IP
	dials   atomic.Int64
	mu      sync.Mutex
	open    map[*loadConn]struct{}
	closed  bool
}

// errLoadClosed is what a dial after close returns.
var errLoadClosed = errors.New("the run is over")

func newLoadClient(ctx context.Context, targets []string, workers int, timeout time.Duration, sources []net.IP) (*loadClient, error) {
	lc := &loadClient{ctx: ctx, hosts: make([]*fasthttp.HostClient, len(targets)), open: map[*loadConn]struct{}{},
		sources: sources}
	byHost := map[string]*fasthttp.HostClient{}
	for i, t := range targets {
		u, err := url.Parse(t)
		if err != nil {
			return nil, err
		}
		tls := u.Scheme == "https"
		addr := fasthttp.AddMissingPort(u.Host, tls)
		key := u.Scheme + "://" + addr
		hc := byHost[key]
		if hc == nil {
			hc = &fasthttp.HostClient{
				Addr:                   addr,
				IsTLS:                  tls,
				DialTimeout:            lc.dial,
				MaxConns:               workers + 4,
				MaxIdleConnDuration:    idleTimeout,
				ReadTimeout:            timeout, // from the request's end to the answer's
				DisablePathNormalizing: true,    // send the path as given
				RetryIfErr:             retryIfErr,
			}
			byHost[key] = hc
		}
		lc.hosts[i] = hc
	}
	return lc, nil
}

// retryIfErr sends a GET again (never a purchase, which may have been
// served) when its connection was closed before any byte of an answer, as
// net/http does when a kept-alive connection turns out to be closed. A
// timeout, or any other error, is counted at once.
func retryIfErr(req *fasthttp.Request, _ int, err error) (resetTimeout, retry bool) {
	return false, req.Header.IsGet() && (errors.Is(err, io.EOF) || errors.Is(err, fasthttp.ErrConnectionClosed))
}

// dial opens a connection of the load; it gives up when the run's context
// ends.
func (lc *loadClient) dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
	if n := len(lc.sources); n > 0 {
		d.LocalAddr = &net.TCPAddr{IP: lc.sources[int(lc.dials.Add(1)-1)%n]}
	}
	if timeout > 0 && timeout < d.Timeout {
		d.Timeout = timeout
	}
	conn, err := d.DialContext(lc.ctx, "tcp", addr)
	if err != nil {
		return nil, err
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
	for c := range open {
		_ = c.Conn.Close() // closing is all that is asked of it
	}
	for _, hc := range lc.hosts {
		hc.CloseIdleConnections()
	}
}

// loadConn is a connection of the load; it leaves the set of open ones
// when fasthttp closes it.
type loadConn struct {
	net.Conn
	lc *loadClient
}

func (c *loadConn) Close() error {
	c.lc.mu.Lock()
	delete(c.lc.open, c)
	c.lc.mu.Unlock()
	return c.Conn.Close()
}
