// Package reserve is the Redis side of the reserve strategy: a stock
// counter per product kept in Redis, checked and decremented by one Lua
// script (reserve.lua) that also checks and counts the buyer's units,
// records the request ID and appends the reservation to a stream, as one
// atomic step. The database learns of each reservation later, from the
// stream.
//
// Every key of a product, and the stream of its bucket, share one hash tag
// (the bucket), so that the script's keys are in one slot and the same code
// runs on a Redis Cluster; the keys are passed in KEYS, never built inside
// the script.
package reserve

import (
	"context"
	"fmt"
	"strconv"
)

// Request is one purchase under reserve.
type Request struct {
	Product   int64
	User      string
	Quantity  int64
	RequestID string
	// Limit is the most units one buyer may hold of the product; 0 is no
	// limit.
	Limit int64
	// Generation is the product's generation as the caller knows it: a
	// counter of an older one (loaded before a reset) is not sold from.
	Generation int64
}

// Verdict is what the script made of a request.
type Verdict int

// The verdicts.
const (
	// Reserved: the units are taken and the reservation is in the
	// stream. Result.Left is the stock it left, Result.Generation its
	// generation.
	Reserved Verdict = iota + 1
	// Seen: the request ID was used; Result.Record is its record.
	Seen
	// SoldOut: fewer units are left (Result.Left) than the quantity.
	SoldOut
	// OverLimit: the buyer holds Result.Units, and the quantity would take
	// them past the limit.
	OverLimit
	// NotLoaded: the product's counter is not in Redis, or is of an
	// older generation than Request.Generation: Load it first.
	NotLoaded
)

// Result is what Reserve answers.
type Result struct {
	Verdict    Verdict
	Left       int64
	Units      int64
	Generation int64
	Record     Record
	// Returns is the product's count of returns the counter had taken
	// back when it answered (Refund): its stock is of that version.
	Returns int64
	// Unacked says the master answered before the replicas the store's
	// Acks asks for acknowledged what the answer read (see WithAcks): a
	// reservation (Reserved, Seen) stands on the master alone, and a
	// failover may lose it; a SoldOut or OverLimit counted reservations a
	// failover may lose.
	Unacked bool
}

// Reserve runs the script for r: see Verdict for its answers.
func (s *Store) Reserve(ctx context.Context, r Request) (Result, error) {
	rs, err := s.ReserveBatch(ctx, r.Product, r.Limit, r.Generation, []Item{{User: r.User, Quantity: r.Quantity, RequestID: r.RequestID}})
	if err != nil {
		return Result{}, err
	}
	return rs[0], nil
}

// Item is one purchase of a batch (ReserveBatch).
type Item struct {
	User      string
	Quantity  int64
	RequestID string
}

// ReserveBatch runs the script once for purchases of one product, in
// order, each decided as if alone after those before it: one result each,
// or, when the counter is not loaded in generation gen, NotLoaded for all.
func (s *Store) ReserveBatch(ctx context.Context, product, limit, gen int64, items []Item) ([]Result, error) {
	k := s.KeysOf(product)
	waits := s.acks.Replicas > 0
	args := make([]any, 0, 4+3*len(items))
	args = append(args, product, limit, gen, waits)
	for _, it := range items {
		args = append(args, it.User, it.Quantity, it.RequestID)
	}
	keys := []string{k.Counter, k.Units, k.Requests, k.Stream, k.Where}
	var v []any
	var err error
	acked := int64(s.acks.Replicas)
	if waits {
		v, acked, err = s.runAcked(ctx, reserveScript, keys, args)
	} else {
		v, err = reserveScript.Run(ctx, s.rdb, keys, args...).Slice()
	}
	if err != nil {
		return nil, fmt.Errorf("reserve: product %d: %w", product, err)
	}
	out := make([]Result, len(items))
	if len(v) == 1 && v[0] == "load" {
		for i := range out {
			out[i] = Result{Verdict: NotLoaded}
		}
		return out, nil
	}
	ret, ok := v[0].(int64)
	if !ok || len(v) != 1+3*len(items) {
		return nil, fmt.Errorf("reserve: product %d: the script answered %v for %d purchases", product, v, len(items))
	}
	for i := range out {
		if out[i], err = readResult(v[1+3*i : 4+3*i]); err != nil {
			return nil, err
		}
		out[i].Returns = ret
		out[i].Unacked = acked < int64(s.acks.Replicas)
	}
	return out, nil
}

// readResult reads the script's answer to one purchase.
func readResult(v []any) (Result, error) {
	verdict, _ := v[0].(string)
	n, _ := v[1].(int64)
	switch verdict {
	case "sold_out":
		return Result{Verdict: SoldOut, Left: n}, nil
	case "limit":
		return Result{Verdict: OverLimit, Units: n}, nil
	case "ok":
		gen, err := strconv.ParseInt(fmt.Sprint(v[2]), 10, 64)
		if err != nil {
			return Result{}, fmt.Errorf("reserve: the generation %v: %w", v[2], err)
		}
		return Result{Verdict: Reserved, Left: n, Generation: gen}, nil
	case "seen":
		rec, err := parseRecord(fmt.Sprint(v[2]))
		return Result{Verdict: Seen, Record: rec}, err
	}
	return Result{}, fmt.Errorf("reserve: the script answered %v", v)
}
