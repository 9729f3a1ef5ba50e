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
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Buckets is how many streams the reservations are spread over. A
// product's keys are in the hash slot of its bucket's stream.
const Buckets = 16

var (
	//go:embed reserve.lua
	reserveLua    string
	reserveScript = redis.NewScript(reserveLua)
	//go:embed load.lua
	loadLua    string
	loadScript = redis.NewScript(loadLua)
	//go:embed retire.lua
	retireLua    string
	retireScript = redis.NewScript(retireLua)
	//go:embed fail.lua
	failLua    string
	failScript = redis.NewScript(failLua)
	//go:embed tidy.lua
	tidyLua    string
	tidyScript = redis.NewScript(tidyLua)
	//go:embed check.lua
	checkLua    string
	checkScript = redis.NewScript(checkLua)
	//go:embed adjust.lua
	adjustLua    string
	adjustScript = redis.NewScript(adjustLua)
	//go:embed refund.lua
	refundLua    string
	refundScript = redis.NewScript(refundLua)
)

// Store is the reserve strategy's keys on one Redis (a node, or a
// cluster through a cluster client), under a key prefix.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	acks   Acks
}

// New returns the store of rdb's keys under prefix.
func New(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, prefix: prefix}
}

// Keys are the Redis keys of one product.
type Keys struct {
	// Counter is a hash: the stock left ("stock") and the generation of
	// the database's stock it was loaded from ("gen").
	Counter string
	// Units maps each buyer to the units reserved in this generation.
	Units string
	// Requests maps each request ID to its Record.
	Requests string
	// Stream is the stream of reservations of the product's bucket.
	Stream string
	// Where is the bucket's index of request IDs: each one maps to the
	// product whose Requests hold its record.
	Where string
}

// Bucket is the bucket of a product.
func Bucket(product int64) int { return int(product % Buckets) }

// KeysOf returns the keys of a product.
func (s *Store) KeysOf(product int64) Keys {
	tag := s.prefix + "reserve:{" + strconv.Itoa(Bucket(product)) + "}:"
	p := tag + "p:" + strconv.FormatInt(product, 10)
	return Keys{Counter: p, Units: p + ":units", Requests: p + ":req", Stream: tag + "stream", Where: tag + "where"}
}

// DeadOf returns the dead-letter stream of a bucket: the reservations the
// writers gave up on, with the reason.
func (s *Store) DeadOf(bucket int) string {
	return s.prefix + "reserve:{" + strconv.Itoa(bucket) + "}:dead"
}

// StreamOf returns the stream of a bucket.
func (s *Store) StreamOf(bucket int) string {
	return s.prefix + "reserve:{" + strconv.Itoa(bucket) + "}:stream"
}

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

// Retire ends a product's generation in Redis at a stock reset to
// generation gen: its counter, its buyers' units, its requests' records
// and their entries in the index go, and a counter of generation gen
// without stock stays. (Its reservations still in the stream are
// discarded by the writers.) A counter of generation gen or a newer one
// (loaded after the reset) is left as it is.
func (s *Store) Retire(ctx context.Context, product, gen int64) error {
	k := s.KeysOf(product)
	if err := retireScript.Run(ctx, s.rdb, []string{k.Counter, k.Units, k.Requests, k.Where}, gen, product).Err(); err != nil {
		return fmt.Errorf("reserve: retire product %d: %w", product, err)
	}
	return nil
}

// Loaded is what Load did.
type Loaded struct {
	// Loaded says the counter was set; false: it held the generation
	// already.
	Loaded bool
	// Stock and Generation are the counter's as Load left it.
	Stock, Generation int64
	// Waiting and Taken are the reservations of the generation found in
	// the stream not yet written, and the units they took: the counter is
	// the database's stock less Taken.
	Waiting, Taken int64
	// Before is the generation of the counter Load found; -1: none (never
	// loaded, or lost by Redis).
	Before int64
	// Returns is the counter's count of the product's returns it has
	// taken back: the version of its stock (Refund).
	Returns int64
}

// Written is an order of a product in the database, as Load needs it:
// its request's record, so that a replay of it is seen.
type Written struct {
	RequestID string
	Record    Record
}

// Load sets a product's counter for generation gen from the database:
// stock and units (each buyer's units in the database's orders of the
// generation), less what the generation's reservations still in the
// stream took, unless the counter holds that generation already; the
// orders written give their request IDs records where there are none.
// locked says the caller holds the product's row lock, with the
// generation read under it: no writer commits and no reset happens
// meanwhile, and a counter of any other generation is replaced; without
// it (a first load after its COMMIT), a counter of a newer generation (a
// reset since) is kept. first says it is the generation's first load: no
// reservation of it can be in the stream, and the stream (which may hold a
// long backlog of other products') is not scanned. returned are the orders
// whose units the database took back and whose return has not reached
// Redis (Refund): the counter is marked as having them back.
func (s *Store) Load(ctx context.Context, product, stock, gen, returns int64, units map[string]int64, returned []int64, written []Written, first, locked bool) (Loaded, error) {
	k := s.KeysOf(product)
	args := make([]any, 0, 7+2*len(units)+len(returned)+2*len(written))
	group := Group
	if first {
		group = "" // nothing of the generation can be waiting: no scan
	}
	lock := "0"
	if locked {
		lock = "1"
	}
	args = append(args, stock, strconv.FormatInt(gen, 10)+":"+strconv.FormatInt(returns, 10), product, group, lock, len(units), len(returned))
	for u, n := range units {
		args = append(args, u, n)
	}
	for _, id := range returned {
		args = append(args, id)
	}
	for _, w := range written {
		args = append(args, w.RequestID, w.Record.String())
	}
	v, err := loadScript.Run(ctx, s.rdb, []string{k.Counter, k.Units, k.Requests, k.Stream, k.Where}, args...).Int64Slice()
	if err != nil {
		return Loaded{}, fmt.Errorf("reserve: load product %d: %w", product, err)
	}
	if len(v) != 7 {
		return Loaded{}, fmt.Errorf("reserve: load product %d: the script answered %v", product, v)
	}
	return Loaded{Loaded: v[0] == 1, Stock: v[1], Generation: v[2], Waiting: v[3], Taken: v[4], Before: v[5], Returns: v[6]}, nil
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

// Snapshot is a product's counter and the reservations of a generation
// waiting in the stream (read and not acknowledged, or not read), taken
// at one instant (Check).
type Snapshot struct {
	// Stock and Generation are the counter's; Present is false when there
	// is no counter with stock.
	Stock, Generation int64
	Present           bool
	// Waiting are the reservations not refused: request ID to quantity.
	Waiting map[string]int64
	// Refunded are those of the orders asked about whose units the
	// counter took back (Refund).
	Refunded map[int64]bool
}

// Check takes a Snapshot of a product for generation gen, asking which of
// orders the counter took back the units of.
func (s *Store) Check(ctx context.Context, product, gen int64, orders []int64) (Snapshot, error) {
	k := s.KeysOf(product)
	args := []any{product, gen, Group, len(orders)}
	for _, id := range orders {
		args = append(args, id)
	}
	v, err := checkScript.Run(ctx, s.rdb, []string{k.Counter, k.Requests, k.Stream}, args...).Slice()
	if err != nil {
		return Snapshot{}, fmt.Errorf("reserve: check product %d: %w", product, err)
	}
	bad := func() (Snapshot, error) {
		return Snapshot{}, fmt.Errorf("reserve: check product %d: the script answered %v", product, v)
	}
	if len(v) < 4 {
		return bad()
	}
	present, ok1 := v[0].(int64)
	stock, ok2 := v[1].(int64)
	cgen, ok3 := v[2].(int64)
	marked, ok4 := v[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || marked < 0 || int64(len(v)) < 4+marked || (int64(len(v))-4-marked)%2 != 0 {
		return bad()
	}
	snap := Snapshot{Stock: stock, Generation: cgen, Present: present == 1, Waiting: map[string]int64{}, Refunded: map[int64]bool{}}
	for _, x := range v[4 : 4+marked] {
		id, ok := x.(int64)
		if !ok {
			return bad()
		}
		snap.Refunded[id] = true
	}
	for i := 4 + int(marked); i < len(v); i += 2 {
		rid, ok1 := v[i].(string)
		q, ok2 := v[i+1].(int64)
		if !ok1 || !ok2 {
			return bad()
		}
		snap.Waiting[rid] += q
	}
	return snap, nil
}

// Refund gives the units of order (quantity q, bought by user) back to
// the product's counter of generation gen and to the buyer's count, once
// however often it is asked (refund.lua), and raises the counter's count
// of returns to returns, the product's with this one. It says whether the counter has
// them back, now or from before: false when there is no counter of gen
// with stock (not loaded yet: ask again once it is; a load under the row
// lock marks the orders whose returns are on their way).
func (s *Store) Refund(ctx context.Context, product, gen, returns, order, q int64, user string) (bool, error) {
	k := s.KeysOf(product)
	n, err := refundScript.Run(ctx, s.rdb, []string{k.Counter, k.Units}, gen, order, q, user, returns).Int64()
	if err != nil {
		return false, fmt.Errorf("reserve: give order %d's units back to product %d: %w", order, product, err)
	}
	return n != 0, nil
}

// Adjust moves a product's counter by delta if it is still of generation
// gen and has stock, and returns it as it is then; changed is false when
// it was not.
func (s *Store) Adjust(ctx context.Context, product, gen, delta int64) (stock int64, changed bool, err error) {
	v, err := adjustScript.Run(ctx, s.rdb, []string{s.KeysOf(product).Counter}, gen, delta).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("reserve: adjust the counter of product %d: %w", product, err)
	}
	if len(v) != 2 {
		return 0, false, fmt.Errorf("reserve: adjust the counter of product %d: the script answered %v", product, v)
	}
	return v[1], v[0] == 1, nil
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
