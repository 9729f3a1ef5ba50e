package reserve

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The writers' side of the streams: every instance's writer joins one
// consumer group (Group) on every bucket's stream, reads the reservations
// no writer has read (Read), acknowledges each once the database holds it
// or has refused it (Ack, after Fail), and takes over what a writer that
// died left unacknowledged (Claim).

// Group is the consumer group of the writers.
const Group = "writers"

// Entry is one reservation as a stream holds it.
type Entry struct {
	// Stream and ID name the entry, for Ack.
	Stream, ID string
	Request
	// Generation is the generation the units were taken in; Left the stock
	// the counter was left with.
	Generation, Left int64
	// Bad, when not nil, says the entry is not a reservation reserve.lua
	// wrote: it can never be written, and is to be acknowledged (and kept
	// aside) rather than read again for ever.
	Bad error
}

// Made is when the entry was appended, by Redis's clock: the time in
// its ID. ok is false for an ID that carries none.
func (e Entry) Made() (t time.Time, ok bool) {
	ms, _, found := strings.Cut(e.ID, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !found || err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}

// Join creates the writers' group on every bucket's stream (and the
// stream, if it is not there yet), reading from its start; a group that
// exists already is kept as it is.
func (s *Store) Join(ctx context.Context) error {
	for b := range Buckets {
		err := s.rdb.XGroupCreateMkStream(ctx, s.StreamOf(b), Group, "0").Err()
		if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
			return fmt.Errorf("reserve: join the writers of bucket %d: %w", b, err)
		}
	}
	return nil
}

// Read reads, for consumer, up to count entries of every bucket that no
// writer has read yet, waiting up to block when there are none (0: not at
// all). The entries are pending on consumer until acknowledged. On one
// node it is one XREADGROUP over every bucket's stream; on a Redis Cluster,
// where the streams are in different slots, one XREADGROUP per bucket in a
// pipeline, and a pause of block when none had any.
func (s *Store) Read(ctx context.Context, consumer string, count int64, block time.Duration) ([]Entry, error) {
	if _, cluster := s.rdb.(*redis.ClusterClient); cluster {
		return s.readEach(ctx, consumer, count, block)
	}
	streams := make([]string, 0, 2*Buckets)
	for b := range Buckets {
		streams = append(streams, s.StreamOf(b))
	}
	for range Buckets {
		streams = append(streams, ">")
	}
	if block <= 0 {
		block = -1 // go-redis: no BLOCK argument
	}
	got, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: consumer, Streams: streams, Count: count, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reserve: read the streams: %w", err)
	}
	return entriesOf(got), nil
}

// readEach is Read one bucket at a time, for a Redis Cluster.
func (s *Store) readEach(ctx context.Context, consumer string, count int64, block time.Duration) ([]Entry, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.XStreamSliceCmd, Buckets)
	for b := range Buckets {
		cmds[b] = pipe.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: consumer,
			Streams: []string{s.StreamOf(b), ">"}, Count: count, Block: -1})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reserve: read the streams: %w", err)
	}
	var out []Entry
	for _, c := range cmds {
		got, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return out, fmt.Errorf("reserve: read the streams: %w", err)
		}
		out = append(out, entriesOf(got)...)
	}
	if len(out) == 0 && block > 0 {
		t := time.NewTimer(block)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return out, nil
}

// entriesOf reads the entries of an XREADGROUP's answer.
func entriesOf(got []redis.XStream) []Entry {
	var out []Entry
	for _, st := range got {
		for _, m := range st.Messages {
			out = append(out, entryOf(st.Stream, m))
		}
	}
	return out
}

// entryOf reads a stream entry as reserve.lua wrote it; one that is not
// comes back with Bad set.
func entryOf(stream string, m redis.XMessage) Entry {
	e, err := readEntry(stream, m)
	e.Bad = err
	return e
}

func readEntry(stream string, m redis.XMessage) (Entry, error) {
	e := Entry{Stream: stream, ID: m.ID}
	str := func(k string) string { v, _ := m.Values[k].(string); return v }
	var errs []error
	num := func(k string) int64 {
		n, err := strconv.ParseInt(str(k), 10, 64)
		errs = append(errs, err)
		return n
	}
	e.Product, e.Quantity, e.Generation, e.Left = num("p"), num("q"), num("g"), num("l")
	e.User, e.RequestID = str("u"), str("r")
	if err := errors.Join(errs...); err != nil {
		return e, fmt.Errorf("reserve: entry %s of %s is not a reservation: %v: %w", m.ID, stream, m.Values, err)
	}
	if e.RequestID == "" || e.User == "" {
		return e, fmt.Errorf("reserve: entry %s of %s is not a reservation: %v", m.ID, stream, m.Values)
	}
	return e, nil
}

// Claim takes over for consumer up to count entries of each bucket that
// a writer read and has not acknowledged for minIdle or more: a writer
// that died, or stalled, or whose write failed. It walks each bucket's
// pending entries to their end, so that entries that keep failing at the
// head do not hide those behind them.
func (s *Store) Claim(ctx context.Context, consumer string, minIdle time.Duration, count int64) ([]Entry, error) {
	var out []Entry
	for b := range Buckets {
		stream := s.StreamOf(b)
		claimed := int64(0)
		for start := "0-0"; claimed < count; {
			msgs, next, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: stream, Group: Group, Consumer: consumer,
				MinIdle: minIdle, Start: start, Count: count - claimed}).Result()
			if err != nil {
				return out, fmt.Errorf("reserve: claim the pending reservations of bucket %d: %w", b, err)
			}
			for _, m := range msgs {
				out = append(out, entryOf(stream, m))
			}
			claimed += int64(len(msgs))
			if next == "0-0" {
				break
			}
			start = next
		}
	}
	return out, nil
}

// PendingOf returns how many reservations of a bucket the writers have
// read and not acknowledged.
func (s *Store) PendingOf(ctx context.Context, bucket int) (int64, error) {
	p, err := s.rdb.XPending(ctx, s.StreamOf(bucket), Group).Result()
	if NoGroup(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reserve: the pending reservations of bucket %d: %w", bucket, err)
	}
	return p.Count, nil
}

// NoGroup says err is Redis's answer to a read of a stream whose group is
// not there: the Redis lost its data, or the stream was deleted. Join again.
func NoGroup(err error) bool {
	return redis.HasErrorPrefix(err, "NOGROUP")
}

// Ack acknowledges entries: the database holds them, or refused them
// (Fail).
func (s *Store) Ack(ctx context.Context, entries []Entry) error {
	ids := map[string][]string{}
	for _, e := range entries {
		ids[e.Stream] = append(ids[e.Stream], e.ID)
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for stream, list := range ids {
			p.XAck(ctx, stream, Group, list...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reserve: acknowledge %d reservations: %w", len(entries), err)
	}
	return nil
}

// Fail records that the database refused a reservation, and why (code),
// once: its request's record says so from then on, and unless code is
// sold_out (the database had fewer units than the counter) its units go
// back to the counter and to its buyer's count. Recording it again
// changes nothing.
func (s *Store) Fail(ctx context.Context, e Entry, code string) error {
	k := s.KeysOf(e.Product)
	rec := Record{Quantity: e.Quantity, Left: e.Left, User: e.User, Code: code}
	refund := 0
	if code != "sold_out" {
		refund = 1
	}
	err := failScript.Run(ctx, s.rdb, []string{k.Counter, k.Units, k.Requests},
		e.RequestID, rec.String(), e.Quantity, e.User, e.Generation, refund).Err()
	if err != nil {
		return fmt.Errorf("reserve: record the failure of request %s: %w", e.RequestID, err)
	}
	return nil
}

// Dead moves an entry the writers gave up on to its bucket's dead-letter
// stream (DeadOf), with the reason, and acknowledges it: a reservation
// (not Bad) is recorded as failed with code first (Fail), so that its
// buyer learns of it.
func (s *Store) Dead(ctx context.Context, e Entry, code, reason string) error {
	if e.Bad == nil {
		if err := s.Fail(ctx, e, code); err != nil {
			return err
		}
	}
	bucket := Bucket(e.Product)
	if e.Bad != nil {
		bucket = bucketOfStream(s, e.Stream)
	}
	pipe := s.rdb.TxPipeline()
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: s.DeadOf(bucket), Values: []any{
		"stream", e.Stream, "id", e.ID, "code", code, "reason", reason,
		"p", e.Product, "u", e.User, "q", e.Quantity, "r", e.RequestID, "g", e.Generation}})
	pipe.XAck(ctx, e.Stream, Group, e.ID)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("reserve: move entry %s of %s to the dead letters: %w", e.ID, e.Stream, err)
	}
	return nil
}

// bucketOfStream is the bucket whose stream is named stream (0 when none
// is: the dead letter then goes to bucket 0's).
func bucketOfStream(s *Store, stream string) int {
	for b := range Buckets {
		if s.StreamOf(b) == stream {
			return b
		}
	}
	return 0
}

// DeadLetters reads up to count entries of every bucket's dead-letter
// stream, for an operator.
func (s *Store) DeadLetters(ctx context.Context, count int64) ([]redis.XMessage, error) {
	var out []redis.XMessage
	for b := range Buckets {
		msgs, err := s.rdb.XRangeN(ctx, s.DeadOf(b), "-", "+", count).Result()
		if err != nil {
			return out, fmt.Errorf("reserve: read the dead letters of bucket %d: %w", b, err)
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// Tidy drops from every bucket's stream what the writers have
// acknowledged, and returns how many reservations they have not written
// yet: read and not acknowledged, or not read.
func (s *Store) Tidy(ctx context.Context) (unwritten int64, err error) {
	for b := range Buckets {
		v, err := tidyScript.Run(ctx, s.rdb, []string{s.StreamOf(b)}, Group).Int64Slice()
		if err != nil {
			return unwritten, fmt.Errorf("reserve: tidy the stream of bucket %d: %w", b, err)
		}
		if len(v) != 3 {
			return unwritten, fmt.Errorf("reserve: tidy the stream of bucket %d: the script answered %v", b, v)
		}
		unwritten += v[0] + v[1]
	}
	return unwritten, nil
}
