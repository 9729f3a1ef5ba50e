// Package sqlproxy is a TCP proxy between a MySQL client and its server
// that breaks the path on demand, as networks and failovers do. Tests and
// the fault soak put it between the service and MariaDB.
//
// It reads the MySQL client/server protocol just enough to know each
// packet's boundaries and to recognise a COMMIT a client sends (a
// COM_QUERY whose last statement is COMMIT), so that it can let the COMMIT reach the
// server, and commit, while the reply to it is held or lost: the case a
// buyer must never be told "failed" for. The faults:
//
//   - HoldCommitReplies: every statement passes; the reply to each COMMIT
//     is held (the transaction is committed, its client does not know).
//   - HoldReplies: every byte from the server is held, the greeting of a
//     new connection included; what clients send still reaches it.
//   - Partition: nothing passes either way and new connections are not
//     connected through (their clients wait for a greeting that does not
//     come), as when a network path is down.
//   - Cut: every open connection is closed now, both sides.
//   - DropHeldAndCut: the connections holding a reply are closed and the
//     reply is lost.
//
// Pass ends the holds, delivering what was held in order; Heal ends a
// partition. The proxy must not be used with TLS (go-sql-driver's
// default against a server that offers none).
package sqlproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ErrClosed is returned by the calls of a proxy that was closed.
var ErrClosed = errors.New("sqlproxy: closed")

// mode is what the proxy lets through.
type mode int

const (
	pass mode = iota
	holdCommitReplies
	holdReplies
)

// Proxy forwards the connections it accepts to one upstream server.
type Proxy struct {
	upstream string
	ln       net.Listener

	mu          sync.Mutex
	changed     *sync.Cond // broadcast on every change of the fields below
	mode        mode
	partitioned bool
	closed      bool
	conns       map[*conn]struct{}
	commits     int // COMMITs seen, in all
	held        int // COMMIT replies held, in all
	wg          sync.WaitGroup
}

// conn is one client's connection and the proxy's to the server.
type conn struct {
	client, server net.Conn
	// Guarded by Proxy.mu:
	closed bool
	// commitSent says the last command the client sent is a COMMIT whose
	// reply has not passed yet.
	commitSent bool
	// holding says a server packet is held.
	holding bool
}

// Start listens on a free port of 127.0.0.1 and forwards to upstream
// (host:port).
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sqlproxy: listen: %w", err)
	}
	p := &Proxy{upstream: upstream, ln: ln, conns: map[*conn]struct{}{}}
	p.changed = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's address (host:port), for the client's DSN.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// HoldCommitReplies holds the reply to every COMMIT from now on, until
// Pass.
func (p *Proxy) HoldCommitReplies() { p.set(func() { p.mode = holdCommitReplies }) }

// HoldReplies holds every byte from the server from now on, until Pass.
func (p *Proxy) HoldReplies() { p.set(func() { p.mode = holdReplies }) }

// Pass ends HoldCommitReplies and HoldReplies: what was held is delivered.
func (p *Proxy) Pass() { p.set(func() { p.mode = pass }) }

// Partition stops every byte either way, and keeps new connections from
// reaching the server, until Heal.
func (p *Proxy) Partition() { p.set(func() { p.partitioned = true }) }

// Heal ends a partition.
func (p *Proxy) Heal() { p.set(func() { p.partitioned = false }) }

// Cut closes every open connection, both sides. New ones are accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.closeLocked(c)
	}
}

// DropHeldAndCut closes every connection that holds a reply: the reply is
// lost. It returns how many it closed.
func (p *Proxy) DropHeldAndCut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if c.holding {
			p.closeLocked(c)
			n++
		}
	}
	return n
}

// CommitsSeen is how many COMMITs clients sent through the proxy.
func (p *Proxy) CommitsSeen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.commits
}

// CommitRepliesHeld is how many COMMIT replies the proxy has held, in all.
func (p *Proxy) CommitRepliesHeld() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Close stops accepting, closes every connection and waits until every
// goroutine of the proxy has ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	for c := range p.conns {
		p.closeLocked(c)
	}
	p.changed.Broadcast()
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("sqlproxy: close: %w", err)
	}
	return nil
}

func (p *Proxy) set(change func()) {
	p.mu.Lock()
	change()
	p.changed.Broadcast()
	p.mu.Unlock()
}

// closeLocked closes both sides of c. The caller holds p.mu.
func (p *Proxy) closeLocked(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	c.client.Close() // errors: it is being dropped either way
	if c.server != nil {
		c.server.Close()
	}
	delete(p.conns, c)
	p.changed.Broadcast()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		c := &conn{client: client}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve connects c to the server, once no partition is in the way, and
// pumps both ways until either side closes.
func (p *Proxy) serve(c *conn) {
	p.mu.Lock()
	for p.partitioned && !c.closed {
		p.changed.Wait()
	}
	closed := c.closed
	p.mu.Unlock()
	if closed {
		return
	}
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	p.mu.Lock()
	if err != nil || c.closed {
		p.closeLocked(c)
		p.mu.Unlock()
		if server != nil {
			server.Close()
		}
		return
	}
	c.server = server
	p.mu.Unlock()
	var pumps sync.WaitGroup
	pumps.Go(func() { p.pump(c, c.client, c.server, true) })
	pumps.Go(func() { p.pump(c, c.server, c.client, false) })
	pumps.Wait()
}

// pump forwards packets from src to dst until either side fails; then it
// closes both. fromClient says src is the client.
func (p *Proxy) pump(c *conn, src, dst net.Conn, fromClient bool) {
	defer func() {
		p.mu.Lock()
		p.closeLocked(c)
		p.mu.Unlock()
	}()
	for {
		pkt, err := readPacket(src)
		if err != nil {
			return
		}
		if !p.admit(c, pkt, fromClient) {
			return
		}
		if _, err := dst.Write(pkt); err != nil {
			return
		}
	}
}

// admit waits until pkt may pass and notes what it is; false says c was
// closed meanwhile.
func (p *Proxy) admit(c *conn, pkt []byte, fromClient bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fromClient {
		for p.partitioned && !c.closed {
			p.changed.Wait()
		}
		if isCommit(pkt) {
			p.commits++
			c.commitSent = true
		}
		return !c.closed
	}
	counted := false
	for !c.closed {
		commitReply := c.commitSent
		hold := p.partitioned || p.mode == holdReplies || (p.mode == holdCommitReplies && commitReply)
		if !hold {
			break
		}
		if commitReply && !counted {
			p.held++
			counted = true
			p.changed.Broadcast()
		}
		c.holding = true
		p.changed.Wait()
	}
	c.holding = false
	// The COMMIT's reply is one packet: it passes now. Noted here, under
	// the lock and before it is forwarded, not after: once forwarded, the
	// client may send its next COMMIT before this goroutine takes the lock
	// again.
	c.commitSent = false
	return !c.closed
}

// readPacket reads one protocol packet: a 3-byte little-endian payload
// length, a sequence number, the payload.
func readPacket(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
	pkt := make([]byte, 4+n)
	copy(pkt, head[:])
	if _, err := io.ReadFull(r, pkt[4:]); err != nil {
		return nil, err
	}
	return pkt, nil
}

// comQuery is the command byte of a text query.
const comQuery = 0x03

// isCommit says pkt is a command packet (sequence 0) of a COM_QUERY whose
// text is COMMIT or ends with it, as its last statement (a sale reads its
// orders' IDs back in the trip that commits), give or take spaces, a
// semicolon and letter case.
func isCommit(pkt []byte) bool {
	if len(pkt) < 5 || pkt[3] != 0 || pkt[4] != comQuery {
		return false
	}
	q := bytes.TrimSpace(pkt[5:])
	q = bytes.TrimSpace(bytes.TrimSuffix(q, []byte(";")))
	if i := bytes.LastIndexByte(q, ';'); i >= 0 {
		q = bytes.TrimSpace(q[i+1:])
	}
	return bytes.EqualFold(q, []byte("COMMIT"))
}
