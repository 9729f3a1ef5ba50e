package locker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// SetNX is the classic Redis lock of articles 000 and 001 (the Jedis
// recipe), kept as published: the lock is a key whose value is its expiry
// time, `SETNX key <now + ttl + 1, unix ms>`. When the key exists, Lock GETs
// it, and if that time has passed it takes the lock over with
// `GETSET key <new expiry>`, owning it only if the old value GETSET returned
// is the one it read. Otherwise it sleeps a random 50-200 ms and tries again
// until the wait runs out. Unlock DELs the key if the holder's own expiry
// has not passed by its own clock. The key gets no Redis expiry: only the
// value says when the lock ends.
//
// Safe on one Redis node while every client's clock agrees, no holder
// overruns the TTL and nothing pauses a holder between its expiry check and
// its DEL. Its flaws, kept on purpose:
//   - It trusts every client's clock. A client whose clock runs ahead sees a
//     live lock as expired and takes it over: two holders.
//   - Unlock can delete another holder's lock. Its check of its own expiry
//     and its DEL are two steps and the DEL is unconditional, so a holder
//     whose clock lags, or who pauses between the check and the DEL, deletes
//     the lock a second client has taken over since; a third then enters.
//   - A GETSET that loses the race still writes: it overwrites the winner's
//     expiry with its own, so the winner's lock ends later than the winner
//     believes. A GETSET that finds the key already deleted writes a lock
//     nobody owns, which blocks everyone until that time passes.
//   - A key whose value is not a time blocks the key until it is deleted.
type SetNX struct {
	client redis.UniversalClient
	opts   Options
	now    func() time.Time
}

var _ Locker = (*SetNX)(nil)

// NewSetNX returns a SetNX on client's node that reads the time from now
// (time.Now when nil): the recipe compares the clocks of all its clients.
func NewSetNX(client redis.UniversalClient, opts Options, now func() time.Time) *SetNX {
	if now == nil {
		now = time.Now
	}
	return &SetNX{client: client, opts: opts.withDefaults(), now: now}
}

// TryLock takes key with SETNX, or with GETSET when the expiry stored in it
// has passed by this client's clock, once. The commands run on a context of
// their own; when an answer is lost the value written may be this
// attempt's, so it is taken back with a compare-and-delete of that value
// (the recipe's own unlock is a plain DEL) before TryLock returns.
func (s *SetNX) TryLock(ctx context.Context, key string) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: setnx %s: %w", ErrNotAcquired, key, err)
	}
	until := s.now().Add(s.opts.TTL).UnixMilli() + 1
	expires := strconv.FormatInt(until, 10)
	actx, cancel := detached(ctx, s.opts.attemptTimeout())
	defer cancel()
	ok, wrote, err := s.try(actx, key, expires)
	if err != nil {
		err = fmt.Errorf("%w: setnx %s: %w", ErrNotAcquired, key, err)
		if wrote {
			cctx, cancel := detached(ctx, cleanupBudget)
			defer cancel()
			if cerr := unlockScript.Run(cctx, s.client, []string{key}, expires, releasedMessage).Err(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("locker: setnx %s: take back an unanswered write: %w", key, cerr))
			}
		}
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: setnx %s is held", ErrNotAcquired, key)
	}
	lease := &setnxLease{s: s, key: key, until: until}
	if ctx.Err() != nil {
		return nil, handBack(ctx, "setnx", key, lease)
	}
	return lease, nil
}

// try is one pass of the recipe. wrote says a command that may have
// written expires was sent and its answer is unknown.
func (s *SetNX) try(ctx context.Context, key, expires string) (ok, wrote bool, err error) {
	ok, err = s.client.SetNX(ctx, key, expires, 0).Result()
	if err != nil {
		return false, true, unavailable(err)
	}
	if ok {
		return true, false, nil
	}
	current, err := s.client.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return false, false, nil // released in between: try again later
	}
	if err != nil {
		return false, false, unavailable(err)
	}
	held, err := strconv.ParseInt(current, 10, 64)
	if err != nil {
		return false, false, fmt.Errorf("holds %q, not a time: %w", current, err)
	}
	if held >= s.now().UnixMilli() {
		return false, false, nil // held and not expired
	}
	old, err := s.client.GetSet(ctx, key, expires).Result()
	if errors.Is(err, redis.Nil) {
		return false, false, nil // deleted in between; our GETSET wrote a lock nobody owns
	}
	if err != nil {
		return false, true, unavailable(err)
	}
	// Only one of the clients that read the same expired value gets it
	// back; the others have overwritten the winner's expiry regardless.
	return old == current, false, nil
}

// Lock tries TryLock again at each release of key or after a fallback of
// 50-200 ms when none is heard, until it holds key or the wait runs out.
func (s *SetNX) Lock(ctx context.Context, key string) (Lease, error) {
	return retry(ctx, s.opts, key, 1, 50*time.Millisecond, 200*time.Millisecond, func(ctx context.Context) (Lease, error) {
		return s.TryLock(ctx, key)
	})
}

type setnxLease struct {
	s     *SetNX
	key   string
	until int64 // this holder's expiry, unix ms
}

// Held says whether the key still holds this holder's expiry and that
// time has not passed by its own clock: the recipe's own view. A client
// whose clock runs ahead and took the lock over with GETSET has written
// its own expiry, so the holder it took over from can tell; a GETSET that
// lost the race overwrote the winner's expiry too (a flaw), and then the
// winner cannot tell it still holds.
func (l *setnxLease) Held(ctx context.Context) (bool, error) {
	if l.s.now().UnixMilli() >= l.until {
		return false, nil
	}
	v, err := l.s.client.Get(ctx, l.key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("locker: setnx %s: read the holder: %w", l.key, err)
	}
	return v == strconv.FormatInt(l.until, 10), nil
}

// Unlock DELs the key if this holder's expiry has not passed by its clock,
// and announces the release. The DEL does not look at the value: see the
// flaws in SetNX.
func (l *setnxLease) Unlock(ctx context.Context) error {
	if l.s.now().UnixMilli() >= l.until {
		return fmt.Errorf("%w: setnx %s: lease ran out", ErrNotHeld, l.key)
	}
	// The DEL and the announcement of the release go in one round trip.
	pipe := l.s.client.Pipeline()
	del := pipe.Del(ctx, l.key)
	pipe.Publish(ctx, l.key, releasedMessage)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("locker: setnx unlock %s: %w", l.key, err)
	}
	if n := del.Val(); n == 0 {
		return fmt.Errorf("%w: setnx %s: key was gone", ErrNotHeld, l.key)
	}
	return nil
}
