package reserve

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Record is what the store keeps of a request ID: the reservation's
// quantity, the stock it left, and its buyer; while the writers have not
// refused it, it is pending (Code ""); once refused, Code is the reason
// (sold_out, limit_exceeded, request_id_reused).
type Record struct {
	Quantity, Left int64
	User           string
	Code           string
}

// Pending says the reservation waits to be written, or was written.
func (r Record) Pending() bool { return r.Code == "" }

// String is the record as the store keeps it: "p|quantity|left|user"
// while pending, "f|quantity|left|code|user" once refused (the user last:
// it may hold a "|").
func (r Record) String() string {
	q, left := strconv.FormatInt(r.Quantity, 10), strconv.FormatInt(r.Left, 10)
	if r.Pending() {
		return "p|" + q + "|" + left + "|" + r.User
	}
	return "f|" + q + "|" + left + "|" + r.Code + "|" + r.User
}

// parseRecord reads Record.String's form.
func parseRecord(s string) (Record, error) {
	bad := func(err error) (Record, error) {
		return Record{}, fmt.Errorf("reserve: a record %q: %w", s, err)
	}
	state, rest, _ := strings.Cut(s, "|")
	n := 3
	if state == "f" {
		n = 4
	} else if state != "p" {
		return bad(errors.New("neither pending nor failed"))
	}
	parts := strings.SplitN(rest, "|", n)
	if len(parts) != n {
		return bad(errors.New("too few fields"))
	}
	q, qerr := strconv.ParseInt(parts[0], 10, 64)
	left, lerr := strconv.ParseInt(parts[1], 10, 64)
	if err := errors.Join(qerr, lerr); err != nil {
		return bad(err)
	}
	r := Record{Quantity: q, Left: left, User: parts[n-1]}
	if state == "f" {
		r.Code = parts[2]
		if r.Code == "" {
			return bad(errors.New("a failure without its code"))
		}
	}
	return r, nil
}

// RecordOf returns the record of a request ID of a product; ok is false
// when the store has none.
func (s *Store) RecordOf(ctx context.Context, product int64, requestID string) (rec Record, ok bool, err error) {
	v, err := s.rdb.HGet(ctx, s.KeysOf(product).Requests, requestID).Result()
	if errors.Is(err, redis.Nil) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("reserve: read the record of request %s: %w", requestID, err)
	}
	rec, err = parseRecord(v)
	return rec, err == nil, err
}

// Find returns the product and the record of a request ID, looked up in
// every bucket's index; ok is false when no product's records hold it.
func (s *Store) Find(ctx context.Context, requestID string) (product int64, rec Record, ok bool, err error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, Buckets)
	for b := range Buckets {
		cmds[b] = pipe.HGet(ctx, s.prefix+"reserve:{"+strconv.Itoa(b)+"}:where", requestID)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, Record{}, false, fmt.Errorf("reserve: find request %s: %w", requestID, err)
	}
	for _, c := range cmds {
		p, err := c.Int64()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return 0, Record{}, false, fmt.Errorf("reserve: find request %s: %w", requestID, err)
		}
		// A reset's retired records leave the index behind: look on.
		rec, ok, err := s.RecordOf(ctx, p, requestID)
		if err != nil || ok {
			return p, rec, ok, err
		}
	}
	return 0, Record{}, false, nil
}

// PendingRecords returns the request IDs of a product's records that are
// pending (not refused): every reservation of the generation Redis still
// knows of, written or not.
func (s *Store) PendingRecords(ctx context.Context, product int64) ([]string, error) {
	var out []string
	key := s.KeysOf(product).Requests
	for cursor := uint64(0); ; {
		kv, next, err := s.rdb.HScan(ctx, key, cursor, "", 1000).Result()
		if err != nil {
			return out, fmt.Errorf("reserve: read the records of product %d: %w", product, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if strings.HasPrefix(kv[i+1], "p|") {
				out = append(out, kv[i])
			}
		}
		if next == 0 {
			return out, nil
		}
		cursor = next
	}
}
