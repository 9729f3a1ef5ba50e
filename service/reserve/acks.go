package reserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicas acknowledging reservations. Redis replicates asynchronously: a
// master answers a script before any replica has it, and a replica promoted
// after its master died may lack the last reservations (their 202s become
// promises nobody keeps). With Acks set, every call of the reservation
// script is followed, on the same connection, by WAIT replicas timeout,
// which blocks until that many replicas have everything the connection
// wrote; Result.Acked says whether they did in time. WAIT makes a loss
// less likely, not impossible (a failover may still promote a replica that
// did not acknowledge, and acknowledged is not yet on its disk): Redis is
// not made strongly consistent by it.

// Acks is how many replicas must acknowledge a reservation, and how long
// the master waits for them.
type Acks struct {
	Replicas int
	Timeout  time.Duration
}

// WithAcks returns the store of the same keys whose reservations wait for
// acks (Replicas 0: none).
func (s *Store) WithAcks(acks Acks) *Store {
	c := *s
	c.acks = acks
	return &c
}

// markScript writes the counter's "seen" field: a write on the master of
// a product's slot that a WAIT after it on the same connection waits for,
// and with it everything the master had written before.
var markScript = redis.NewScript(`redis.call('HINCRBY', KEYS[1], 'seen', 1) return 1`)

// Replicated says whether the replicas Acks asks for have everything the
// master of product's slot had written when it was asked (true when Acks
// asks for none).
func (s *Store) Replicated(ctx context.Context, product int64) (bool, error) {
	if s.acks.Replicas == 0 {
		return true, nil
	}
	_, acked, err := s.runAcked(ctx, markScript, []string{s.KeysOf(product).Counter}, nil)
	if err != nil {
		return false, fmt.Errorf("reserve: product %d: %w", product, err)
	}
	return acked >= int64(s.acks.Replicas), nil
}

// ackAttempts bounds the tries of one acknowledged call while a cluster's
// slot moves or its master fails over.
const ackAttempts = 8

// runAcked runs script with keys and args, then WAIT on
// the same connection: on one node its pipeline, on a cluster one to the
// master of the keys' slot (a cluster client would send a keyless WAIT
// elsewhere). It returns the script's answer and how many replicas
// acknowledged. A slot moved (MOVED) tries the node named, a slot moving
// whose keys are gone from its old master (ASK) asks the new one, as a
// cluster client does; a master gone, or keys split between two nodes
// mid-move (TRYAGAIN), reload the cluster's map and try again a moment
// later. The script answers a request ID it has already reserved as seen,
// so a second try takes nothing twice.
func (s *Store) runAcked(ctx context.Context, script *redis.Script, keys []string, args []any) ([]any, int64, error) {
	cc, cluster := s.rdb.(*redis.ClusterClient)
	if !cluster {
		c, ok := s.rdb.(*redis.Client)
		if !ok {
			return nil, 0, fmt.Errorf("WAIT needs a node's client or a cluster's, not a %T", s.rdb)
		}
		return s.evalWait(ctx, c, script, false, keys, args)
	}
	var err error
	target, asking := "", false // where the cluster said the slot is
	for attempt := range ackAttempts {
		if attempt > 0 {
			cc.ReloadState(ctx)
		}
		if attempt > 0 && target == "" {
			select {
			case <-ctx.Done():
				return nil, 0, errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(attempt) * 25 * time.Millisecond):
			}
		}
		var node *redis.Client
		if target != "" {
			node, err = masterAt(ctx, cc, target)
		} else {
			node, err = cc.MasterForKey(ctx, keys[0])
		}
		if err != nil {
			target = ""
			continue
		}
		var v []any
		var acked int64
		if v, acked, err = s.evalWait(ctx, node, script, asking, keys, args); err == nil || !movedOn(err) {
			return v, acked, err
		}
		// MOVED: the slot is served elsewhere now, and the map is reloading;
		// ASK: the slot is moving, its keys are on the node it moves to,
		// which serves them to a client that says ASKING first.
		if target, asking = redis.IsAskError(err); !asking {
			target, _ = redis.IsMovedError(err)
		}
	}
	return nil, 0, err
}

// masterAt returns the client of the cluster's master at addr.
func masterAt(ctx context.Context, cc *redis.ClusterClient, addr string) (*redis.Client, error) {
	var mu sync.Mutex
	var found *redis.Client
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	if err == nil && found == nil {
		err = fmt.Errorf("no master of the cluster is at %s", addr)
	}
	return found, err
}

// movedOn says err is worth another try on a cluster: the slot is served
// elsewhere now or is moving (MOVED, ASK, TRYAGAIN), the cluster is
// between masters (CLUSTERDOWN), or the node did not answer.
func movedOn(err error) bool {
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	var ne net.Error
	return redis.IsTryAgainError(err) || redis.IsClusterDownError(err) || redis.HasErrorPrefix(err, "READONLY") ||
		errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, redis.ErrClosed)
}

// evalSlice is a script's answer as a slice, nil when it is not one.
func evalSlice(c *redis.Cmd) []any {
	v, _ := c.Val().([]any)
	return v
}

// evalWait sends the script and WAIT in one pipeline on one connection of
// c, loading the script first when c does not have it. The pipeline may
// wait for its answers the WAIT's timeout longer than c's commands.
func (s *Store) evalWait(ctx context.Context, c *redis.Client, script *redis.Script, asking bool, keys []string, args []any) ([]any, int64, error) {
	// A view of c's pool with a longer read timeout; it shares c's
	// connections, so it is not closed here (that would close c's pool).
	c = c.WithTimeout(c.Options().ReadTimeout + s.acks.Timeout)
	for range 2 {
		var eval *redis.Cmd
		var wait *redis.Cmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if asking {
				p.Do(ctx, "asking")
			}
			eval = script.EvalSha(ctx, p, keys, args...)
			wait = p.Do(ctx, "wait", s.acks.Replicas, s.acks.Timeout.Milliseconds())
			return nil
		})
		if redis.HasErrorPrefix(eval.Err(), "NOSCRIPT") {
			// SCRIPT LOAD needs no ASKING: it touches no key.
			if err := script.Load(ctx, c).Err(); err != nil {
				return nil, 0, fmt.Errorf("load the script: %w", err)
			}
			continue
		}
		if err := eval.Err(); err != nil {
			return nil, 0, err
		}
		if err != nil && wait.Err() == nil {
			return nil, 0, err
		}
		if err := wait.Err(); err != nil {
			return nil, 0, fmt.Errorf("WAIT %d %s after the script: %w", s.acks.Replicas, s.acks.Timeout, err)
		}
		acked, err := wait.Int64()
		if err != nil {
			return nil, 0, fmt.Errorf("WAIT answered %v: %w", wait.Val(), err)
		}
		return evalSlice(eval), acked, nil
	}
	return nil, 0, errors.New("the script is not loaded after SCRIPT LOAD")
}
