package reserve

import (
	"context"
	"fmt"
	"strconv"
)

// A product's counter outside a purchase: loaded from the database
// (Load), retired at a stock reset (Retire), given a return's units back
// (Refund), moved (Adjust), and read with the reservations still waiting
// (Check).

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

// Counter is a product's counter as Redis holds it.
type Counter struct {
	// Present is false when there is no counter with stock: never loaded,
	// retired by a reset, or lost by Redis.
	Present bool
	// Stock, Generation and Returns are its stock, the generation of the
	// database's stock it was loaded from, and its count of the returns it
	// has taken back (Refund): the version of its stock.
	Stock, Generation, Returns int64
}

// CounterOf reads a product's counter. A counter with stock was loaded
// from the database under the product's row lock (Load), and a reset
// retires it before the other instances hear of the reset (Retire): its
// generation is the database's unless that retirement failed.
func (s *Store) CounterOf(ctx context.Context, product int64) (Counter, error) {
	v, err := s.rdb.HMGet(ctx, s.KeysOf(product).Counter, "stock", "gen", "ret").Result()
	if err != nil {
		return Counter{}, fmt.Errorf("reserve: read the counter of product %d: %w", product, err)
	}
	var c Counter
	if len(v) != 3 || v[0] == nil || v[1] == nil {
		return c, nil
	}
	fields := []*int64{&c.Stock, &c.Generation, &c.Returns}
	for i, f := range fields {
		str, ok := v[i].(string)
		if !ok {
			continue // no "ret": no return taken back yet
		}
		if *f, err = strconv.ParseInt(str, 10, 64); err != nil {
			return Counter{}, fmt.Errorf("reserve: read the counter of product %d: field %d is %q", product, i, str)
		}
	}
	c.Present = true
	return c, nil
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
