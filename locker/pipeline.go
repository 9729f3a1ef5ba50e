package locker

import (
	"context"
	_ "embed"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

// Lock rounds of many keys at once share their round trips. Each Redlock
// round sends a command to every node (SET NX to take a key, a
// compare-and-delete to give it back), and a service that sells many
// products at once runs many rounds at the same moment: sent one by one,
// each command costs a write and a read on the node's connection, for the
// service and for Redis alike. A nodePipe sends the commands that wait for
// one node at a moment as one pipeline: redsync keeps the algorithm (the
// quorum, the validity, the release of a failed round), and only the
// transport changes.
//
// There is no goroutine of its own: a caller that finds fewer than
// pipeSenders sending becomes a sender, and sends what waits, a pipeline
// at a time, until nothing waits, or its own command is answered and
// another sender is left to send the rest. A caller alone is sent at once,
// so a single hot key pays nothing but a mutex. A release announces itself
// in its own pipeline (announcing). What the pipes saved on a catalogue is
// in docs/figures.md.

const (
	// pipeSenders is how many pipelines may be in flight to one node.
	pipeSenders = 2
	// maxPipe is the most commands in one pipeline.
	maxPipe = 128
)

// nodePipe sends the commands for one node.
type nodePipe struct {
	client goredislib.UniversalClient

	mu      sync.Mutex
	queue   []*pipeCall
	senders int

	// pipelines and commands count what was sent, for the tests.
	pipelines, commands atomic.Int64
}

// pipeCall is one caller's command: add queues it on the pipeline; err is
// set when the pipeline could not be sent at all (the command's own error
// is in the command).
type pipeCall struct {
	ctx  context.Context
	add  func(goredislib.Pipeliner)
	err  error
	done chan struct{}
}

// do sends the command that add queues, with those of other callers
// waiting at the moment, and returns once it is answered.
func (n *nodePipe) do(ctx context.Context, add func(goredislib.Pipeliner)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &pipeCall{ctx: ctx, add: add, done: make(chan struct{})}
	n.mu.Lock()
	n.queue = append(n.queue, c)
	send := n.senders < pipeSenders
	if send {
		n.senders++
	}
	n.mu.Unlock()
	if send {
		n.send(c)
	}
	<-c.done
	return c.err
}

// send sends what waits, a pipeline at a time, until own is answered and
// either nothing waits or another sender is left to send it.
func (n *nodePipe) send(own *pipeCall) {
	for {
		n.mu.Lock()
		ownDone := isClosed(own.done)
		if len(n.queue) == 0 || (ownDone && n.senders > 1) {
			n.senders--
			n.mu.Unlock()
			return
		}
		k := min(len(n.queue), maxPipe)
		calls := make([]*pipeCall, k)
		copy(calls, n.queue)
		n.queue = append(n.queue[:0], n.queue[k:]...)
		n.mu.Unlock()
		n.sendPipeline(calls)
	}
}

// sendPipeline sends calls as one pipeline, bounded by the earliest of
// their deadlines (a node too slow for it fails them all, as it would have
// failed the first); a call whose context ended before it is sent is not.
func (n *nodePipe) sendPipeline(calls []*pipeCall) {
	var deadline time.Time
	live := calls[:0:0]
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		if d, ok := c.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if !deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	pipe := n.client.Pipeline()
	for _, c := range live {
		c.add(pipe)
	}
	n.pipelines.Add(1)
	n.commands.Add(int64(len(live)))
	// Each command carries its own reply or error (a connection that
	// failed sets it on every command): Exec's error is the first of them.
	_, _ = pipe.Exec(ctx)
	for _, c := range live {
		close(c.done)
	}
}

// isClosed says ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pipedPool is a redsync pool of one node whose SET NX and scripts (the
// release and the extension) go through the node's pipe; the rest goes to
// the node as redsync's own go-redis pool sends it.
type pipedPool struct {
	direct redsyncredis.Pool
	pipe   *nodePipe
}

func newPipedPool(c goredislib.UniversalClient, pipe *nodePipe) *pipedPool {
	return &pipedPool{direct: goredis.NewPool(c), pipe: pipe}
}

func (p *pipedPool) Get(ctx context.Context) (redsyncredis.Conn, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	conn, err := p.direct.Get(ctx)
	if err != nil {
		return nil, err
	}
	return &pipedConn{Conn: conn, ctx: ctx, pipe: p.pipe}, nil
}

//go:embed release.lua
var releaseLua string

// releaseScript is release.lua: redsync's compare-and-delete that
// announces the release when it deletes.
var releaseScript = goredislib.NewScript(releaseLua)

// announcement is the context key that marks an unlock's compare-and-delete
// as one to announce (announcing).
type announcement struct{}

// announcing returns ctx marked so that each node's compare-and-delete
// (pipedConn.Eval) runs as releaseScript, which publishes on the key's
// channel when it deletes, as token's unlock script does, with no round
// trip of its own, the value released as the message. A Redlock waiter
// tries again once a majority of the nodes has announced the release
// (Releases.WatchOthers).
func announcing(ctx context.Context) context.Context {
	return context.WithValue(ctx, announcement{}, true)
}

// release runs releaseScript in place of redsync's compare-and-delete (an
// unlock's only script): the same answer, and the release announced when
// it deletes, in the same round trip.
func (c *pipedConn) release(keys []string, args []any) (any, error) {
	var cmd *goredislib.Cmd
	if err := c.pipe.do(c.ctx, func(p goredislib.Pipeliner) { cmd = releaseScript.EvalSha(c.ctx, p, keys, args...) }); err != nil {
		return nil, err
	}
	v, err := cmd.Result()
	if err != nil && strings.Contains(err.Error(), "NOSCRIPT ") {
		// The node has not seen the script yet: send it whole.
		if err := c.pipe.do(c.ctx, func(p goredislib.Pipeliner) { cmd = releaseScript.Eval(c.ctx, p, keys, args...) }); err != nil {
			return nil, err
		}
		v, err = cmd.Result()
	}
	return v, err
}

type pipedConn struct {
	redsyncredis.Conn
	ctx  context.Context
	pipe *nodePipe
}

func (c *pipedConn) SetNX(name, value string, expiry time.Duration) (bool, error) {
	var cmd *goredislib.BoolCmd
	if err := c.pipe.do(c.ctx, func(p goredislib.Pipeliner) { cmd = p.SetNX(c.ctx, name, value, expiry) }); err != nil {
		return false, err
	}
	return cmd.Result()
}

func (c *pipedConn) Eval(script *redsyncredis.Script, keysAndArgs ...any) (any, error) {
	keys := make([]string, script.KeyCount)
	for i := range script.KeyCount {
		keys[i] = keysAndArgs[i].(string)
	}
	args := keysAndArgs[script.KeyCount:]
	if announce, _ := c.ctx.Value(announcement{}).(bool); announce {
		return c.release(keys, args)
	}
	var cmd *goredislib.Cmd
	if err := c.pipe.do(c.ctx, func(p goredislib.Pipeliner) { cmd = p.EvalSha(c.ctx, script.Hash, keys, args...) }); err != nil {
		return nil, err
	}
	v, err := cmd.Result()
	switch {
	case err != nil && strings.Contains(err.Error(), "NOSCRIPT "):
		// The node has not seen the script yet: redsync's own conn sends it.
		return c.Conn.Eval(script, keysAndArgs...)
	case err == goredislib.Nil:
		return v, nil
	}
	return v, err
}
