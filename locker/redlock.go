package locker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

// Redlock is the Redlock algorithm from github.com/go-redsync/redsync/v4 over
// independent Redis masters: SET key token NX PX ttl on every node at once,
// held when a majority (N/2+1) grants it with lease left over, released on
// every node otherwise and on Unlock.
//
// Safe while a majority of the nodes is up and keeps its keys, the holder
// finishes within the lease and no clock jumps. It fails when a holder
// overruns the lease (a pause, slow work): the lock expires and a second
// holder enters; only fencing protects the stock then. A node that restarts
// without persistence forgets the locks it granted, which can hand the same
// lock to two holders.
type Redlock struct {
	rs   *redsync.Redsync
	opts Options
}

var _ Locker = (*Redlock)(nil)

// NewRedlock returns a Redlock over clients, one per independent node.
// redsync's default random 50-250 ms retry delay is kept: short fixed delays
// make contending buyers split the votes so that nobody gets a majority.
func NewRedlock(clients []goredislib.UniversalClient, opts Options) *Redlock {
	pools := make([]redsyncredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = goredis.NewPool(c)
	}
	return &Redlock{rs: redsync.New(pools...), opts: opts.withDefaults()}
}

// Lock takes key on a majority of the nodes, retrying until the wait runs out.
func (r *Redlock) Lock(ctx context.Context, key string) (Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Wait)
	defer cancel()
	// A new Mutex per acquisition: a redsync Mutex must not be shared
	// between goroutines. Tries are bounded by the wait, not a count.
	m := r.rs.NewMutex(key,
		redsync.WithExpiry(r.opts.TTL),
		redsync.WithTries(maxTries(r.opts.Wait)),
	)
	if err := m.LockContext(ctx); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// redsync reports only ErrFailed when ctx ends; keep why.
			return nil, fmt.Errorf("%w: redlock %s: %w (%w)", ErrNotAcquired, key, err, ctxErr)
		}
		return nil, fmt.Errorf("%w: redlock %s: %w", ErrNotAcquired, key, err)
	}
	return &redlockLease{m: m}, nil
}

// maxTries is an upper bound on the attempts that fit in wait with
// redsync's shortest (50 ms) retry delay; the context ends them sooner.
func maxTries(wait time.Duration) int {
	return int(wait/(50*time.Millisecond)) + 2
}

type redlockLease struct{ m *redsync.Mutex }

func (l *redlockLease) Unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	var taken *redsync.ErrTaken
	switch {
	case ok:
		return nil // a majority released it; a node that was down forgets it at expiry
	case errors.Is(err, redsync.ErrLockAlreadyExpired), errors.As(err, &taken):
		// Expired, or a majority now holds another holder's value.
		return fmt.Errorf("%w: redlock %s: %w", ErrNotHeld, l.m.Name(), err)
	case err != nil:
		return fmt.Errorf("locker: redlock unlock %s: %w", l.m.Name(), err)
	}
	return fmt.Errorf("%w: redlock %s", ErrNotHeld, l.m.Name())
}
