package locker

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Token is the lock of article 002 on one Redis node: `SET key <token> NX PX
// ttl` with a random token of its own per acquisition, released by a Lua
// compare-and-delete (unlock.lua) that deletes the key only while it still
// holds that token. Setting the value and the expiry is one command, and no
// client clock is read: Redis expires the key.
//
// Safe while the one node is up and keeps its keys and no holder overruns
// the TTL. It fails when a holder overruns (a pause, slow work): the key
// expires, a second holder enters while the first still works, and only
// fencing protects the stock then; the first holder's Unlock leaves the
// second's lock alone and returns ErrNotHeld. It fails when the node is
// lost: down, nobody gets the lock; restarted empty or replaced by a replica
// that had not yet received the key, two holders.
type Token struct {
	client redis.UniversalClient
	opts   Options
}

var _ Locker = (*Token)(nil)

//go:embed unlock.lua
var unlockLua string

// unlockScript runs unlock.lua by EVALSHA, falling back to EVAL when the
// node does not have it cached.
var unlockScript = redis.NewScript(unlockLua)

//go:embed extend.lua
var extendLua string

// extendScript runs extend.lua.
var extendScript = redis.NewScript(extendLua)

// NewToken returns a Token on client's node.
func NewToken(client redis.UniversalClient, opts Options) *Token {
	return &Token{client: client, opts: opts.withDefaults()}
}

// TryLock sets key to a fresh random token if it does not exist, once. The
// SET runs on a context of its own: when its answer is lost (a timeout, the
// node dropping the connection) the token may still have been set, so it is
// taken back with the compare-and-delete before TryLock returns.
func (t *Token) TryLock(ctx context.Context, key string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: token %s: %w", ErrNotAcquired, key, err)
	}
	lease := &tokenLease{client: t.client, key: key, token: rand.Text(), ttl: t.opts.TTL} // 26 base32 characters, 130 random bits
	actx, cancel := detached(ctx, t.opts.attemptTimeout())
	defer cancel()
	ok, err := t.client.SetNX(actx, key, lease.token, t.opts.TTL).Result()
	switch {
	case err != nil:
		err = fmt.Errorf("%w: %w: token %s: %w", ErrNotAcquired, ErrUnavailable, key, err)
		cctx, cancel := detached(ctx, cleanupBudget)
		defer cancel()
		if uerr := lease.Unlock(cctx); uerr != nil && !errors.Is(uerr, ErrNotHeld) {
			err = errors.Join(err, fmt.Errorf("locker: token %s: take back an unanswered SET: %w", key, uerr))
		}
		return nil, err
	case !ok:
		return nil, fmt.Errorf("%w: token %s is held", ErrNotAcquired, key)
	case ctx.Err() != nil:
		return nil, handBack(ctx, "token", key, lease)
	}
	return lease, nil
}

// Lock tries TryLock again at each release of key, announced by the holder's
// unlock, or after a fallback of 25-75 ms (article 002 polls every 50 ms)
// when none is heard, until it holds key or the wait runs out.
func (t *Token) Lock(ctx context.Context, key string) (Lease, error) {
	return retry(ctx, t.opts, key, 1, 25*time.Millisecond, 75*time.Millisecond, func(ctx context.Context) (Lease, error) {
		return t.TryLock(ctx, key)
	})
}

type tokenLease struct {
	client redis.UniversalClient
	key    string
	token  string
	ttl    time.Duration
}

var _ Renewable = (*tokenLease)(nil)

// Extend gives the key a full TTL again if it still holds this lease's
// token (extend.lua: a compare-and-pexpire), or wraps ErrNotHeld.
func (l *tokenLease) Extend(ctx context.Context) error {
	n, err := extendScript.Run(ctx, l.client, []string{l.key}, l.token, l.ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("locker: token extend %s: %w", l.key, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: token %s", ErrNotHeld, l.key)
	}
	return nil
}

// Held says whether the key still holds this lease's token: the node
// expires the key, so a token still there is a lease still running.
func (l *tokenLease) Held(ctx context.Context) (bool, error) {
	v, err := l.client.Get(ctx, l.key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("locker: token %s: read the holder: %w", l.key, err)
	}
	return v == l.token, nil
}

// Unlock deletes the key if it still holds this lease's token, or wraps
// ErrNotHeld when it expired or holds another holder's token.
func (l *tokenLease) Unlock(ctx context.Context) error {
	n, err := unlockScript.Run(ctx, l.client, []string{l.key}, l.token, releasedMessage).Int()
	if err != nil {
		return fmt.Errorf("locker: token unlock %s: %w", l.key, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: token %s", ErrNotHeld, l.key)
	}
	return nil
}
