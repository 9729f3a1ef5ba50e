package locker

import (
	"context"
	"crypto/rand"
	_ "embed"
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

// NewToken returns a Token on client's node.
func NewToken(client redis.UniversalClient, opts Options) *Token {
	return &Token{client: client, opts: opts.withDefaults()}
}

// Lock sets key to a fresh random token if it does not exist, retrying
// every 25-75 ms (50 ms on average, as in article 002) until the wait runs
// out.
func (t *Token) Lock(ctx context.Context, key string) (Lease, error) {
	token := rand.Text() // 26 base32 characters, 130 random bits
	err := retry(ctx, t.opts.Wait, 25*time.Millisecond, 75*time.Millisecond, func(ctx context.Context) (bool, error) {
		return t.client.SetNX(ctx, key, token, t.opts.TTL).Result()
	})
	if err != nil {
		return nil, fmt.Errorf("locker: token %s: %w", key, err)
	}
	return &tokenLease{client: t.client, key: key, token: token}, nil
}

type tokenLease struct {
	client redis.UniversalClient
	key    string
	token  string
}

// Unlock deletes the key if it still holds this lease's token, or wraps
// ErrNotHeld when it expired or holds another holder's token.
func (l *tokenLease) Unlock(ctx context.Context) error {
	n, err := unlockScript.Run(ctx, l.client, []string{l.key}, l.token).Int()
	if err != nil {
		return fmt.Errorf("locker: token unlock %s: %w", l.key, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: token %s", ErrNotHeld, l.key)
	}
	return nil
}
