package salestore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/salestore/mysqlrow"
)

// One purchase in two round trips: the MySQL form's buy sends its whole
// transaction as one multi-statement: START TRANSACTION, the conditional
// decrement (which leaves the stock it left in LAST_INSERT_ID), the user's
// units within the limit, the order (its remaining stock taken from
// LAST_INSERT_ID(), which the units' upsert leaves alone: user_units has no
// AUTO_INCREMENT column). When every statement did what a purchase needs, one
// COMMIT ends it; otherwise one ROLLBACK does, and the store's sale (three
// trips) has the rule find the purchase's exact answer (sold out, over the
// limit, a request ID already used, a deadlock). A purchase that goes
// through pays two round trips instead of three; one that does not pays
// three more.
//
// Purchases of different products share their transaction: a COMMIT costs
// the database a flush of its log, and it flushes only so many times a
// second however many connections ask. TripSenders senders each take the
// one-trip purchases waiting at that moment (never waiting for more to
// come), up to maxTripGroup, and send them as one multi-statement, their
// products in ascending order so that two groups never wait on each
// other's rows in a cycle, with one COMMIT for all when every purchase in
// it did what it needs. Otherwise the group rolls back: those that failed
// are sold in three trips, and the others are sent once more as a
// group of their own. A purchase alone in its group is sent alone.

const (
	// TripSenders is how many groups of one-trip purchases an instance
	// sends at once.
	TripSenders = 4
	// maxTripGroup is the most purchases in one group.
	maxTripGroup = 64
)

// newMySQLSales is the MySQL form of the sale store over pool, with its
// one-trip senders started: Close stops them.
func newMySQLSales(base sqlBase, pool *sql.DB) *mysqlSales {
	ctx, stop := context.WithCancel(context.Background())
	m := &mysqlSales{sqlBase: base, pool: pool, orders: mysqlrow.NewStatements(), trips: make(chan *tripRequest), tripsStopped: ctx.Done(), stop: stop}
	for range TripSenders {
		m.senders.Go(func() { m.sendTrips(ctx) })
	}
	return m
}

func (m *mysqlSales) Close() {
	m.stop()
	m.senders.Wait()
}

// Buy tries p's transaction in two round trips (see above). A purchase over
// the limit on its own is left to sell, which answers it.
func (m *mysqlSales) Buy(ctx context.Context, p Purchase, claim bool) (o model.Order, ok bool, err error) {
	limit := m.cfg.Limit
	if limit > 0 && p.Quantity > limit {
		return o, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.DBTimeout)
	defer cancel()
	o, trip := m.oneTripStatements(p, claim)
	out, err := m.sendTrip(ctx, trip)
	switch {
	case out.commitErr != nil:
		// It may have taken: its request ID's order says.
		return m.settleOne(ctx, p, fmt.Errorf("commit the purchase of product %d: %w", p.ProductID, out.commitErr))
	case out.committed:
		o.RemainingStock, o.ID = out.left, out.id
		return o, true, nil
	case ctx.Err() != nil:
		return model.Order{}, false, failure.Store(fmt.Sprintf("buy product %d", p.ProductID), ctx.Err())
	case err != nil:
		// Its group found no connection, or the connection dropped before
		// COMMIT or its ROLLBACK failed (it is closed, and the server rolls
		// back what it began): nothing was written.
		m.cfg.Log.WarnContext(ctx, "a purchase's one-trip transaction did not go through: it is sold in three", "product", p.ProductID, "err", err)
	}
	return model.Order{}, false, nil
}

// tripOutcome is what sending a one-trip purchase came to: committed, with
// the stock left and the order's ID; or a COMMIT that failed (commitErr:
// whether it took is not known, so it must not be sold again); or neither,
// nothing written. complete says it did all a purchase needs in a group
// that rolled back for another purchase's sake.
type tripOutcome struct {
	committed bool
	left, id  int64
	commitErr error
	complete  bool
}

// tripRequest is one purchase handed to a sender: its statements, the
// deadline of its database call, and, once done is closed, its outcome.
type tripRequest struct {
	trip     tripStatements
	deadline time.Time
	out      tripOutcome
	err      error
	done     chan struct{}
}

// sendTrip hands trip to a sender and waits for its outcome. A purchase
// whose context ends before a sender takes it, or that finds the senders
// stopped, is not sent.
func (m *mysqlSales) sendTrip(ctx context.Context, trip tripStatements) (tripOutcome, error) {
	deadline, _ := ctx.Deadline()
	part := &tripRequest{trip: trip, deadline: deadline, done: make(chan struct{})}
	m.tripsWaiting.Add(1)
	handed := false
	select {
	case m.trips <- part:
		handed = true
	case <-ctx.Done():
	case <-m.tripsStopped:
	}
	m.tripsWaiting.Add(-1)
	if !handed {
		return tripOutcome{}, nil
	}
	<-part.done
	return part.out, part.err
}

// sendTrips is one sender: it takes the purchases handed over, each with
// those waiting at that moment, and sends them as one group, until ctx
// ends.
func (m *mysqlSales) sendTrips(ctx context.Context) {
	for {
		var first *tripRequest
		select {
		case <-ctx.Done():
			return
		case first = <-m.trips:
		}
		group := []*tripRequest{first}
	gather:
		for len(group) < maxTripGroup {
			select {
			case p := <-m.trips:
				group = append(group, p)
			default:
				break gather
			}
		}
		if h := m.cfg.TripGroup; h != nil {
			h(len(group))
		}
		m.sendGroup(group)
	}
}

// sendGroup sends group as one transaction and answers every purchase in
// it; those that did all they need in a group that rolled back are sent
// once more, as a group of their own, and are otherwise not sent.
func (m *mysqlSales) sendGroup(group []*tripRequest) {
	slices.SortStableFunc(group, func(a, b *tripRequest) int { return cmp.Compare(a.trip.product, b.trip.product) })
	ctx, cancel := context.WithDeadline(context.Background(), groupDeadline(group))
	defer cancel()
	for attempt := 1; len(group) > 0; attempt++ {
		outs, err := m.sendTripsOnce(ctx, group)
		var again []*tripRequest
		for i, p := range group {
			if outs[i].complete && attempt == 1 {
				again = append(again, p)
				continue
			}
			p.out, p.err = outs[i], err
			p.out.complete = false
			close(p.done)
		}
		group = again
	}
}

// groupDeadline bounds a group's transaction: the latest of its
// purchases' deadlines. Every purchase waits for its group's outcome,
// and one whose own deadline passes meanwhile is still answered the truth
// (its order, once committed); the earliest deadline would fail the whole
// group for the sake of one buyer in a hurry.
func groupDeadline(group []*tripRequest) time.Time {
	deadline := group[0].deadline
	for _, p := range group[1:] {
		if p.deadline.After(deadline) {
			deadline = p.deadline
		}
	}
	return deadline
}

// sendTripsOnce sends the group's purchases as one multi-statement on a
// connection of the pool: outs[i] is group[i]'s outcome. Its error says
// the connection went (driver.ErrBadConn) before COMMIT.
func (m *mysqlSales) sendTripsOnce(ctx context.Context, group []*tripRequest) (outs []tripOutcome, err error) {
	outs = make([]tripOutcome, len(group))
	conn, err := m.pool.Conn(ctx)
	if err != nil {
		return outs, failure.Store("take a connection", err)
	}
	defer func() {
		// A connection that went (driver.ErrBadConn) is closed already.
		if cerr := conn.Close(); cerr != nil && !errors.Is(cerr, sql.ErrConnDone) {
			err = errors.Join(err, fmt.Errorf("return the connection: %w", cerr))
		}
	}()
	query, args, err := groupStatements(group)
	if err != nil {
		return outs, err
	}
	err = conn.Raw(func(dc any) error {
		var err error
		outs, err = m.sendStatements(ctx, dc, group, query, args)
		return err
	})
	return outs, err
}

// groupStatements is the group's multi-statement: START TRANSACTION, then
// each purchase's statements, in the group's order.
func groupStatements(group []*tripRequest) (string, []driver.NamedValue, error) {
	var b strings.Builder
	b.WriteString(stmtBegin)
	var args []any
	for _, p := range group {
		b.WriteString("; ")
		b.WriteString(p.trip.query)
		args = append(args, p.trip.args...)
	}
	named, err := namedValues(args)
	if err != nil {
		return "", nil, fmt.Errorf("buy %d products: %w", len(group), err)
	}
	return b.String(), named, nil
}

// sendStatements sends the group's query on the driver connection dc,
// then COMMIT when every purchase did what it needs, else ROLLBACK. Its
// error says the connection is to go (driver.ErrBadConn).
func (m *mysqlSales) sendStatements(ctx context.Context, dc any, group []*tripRequest, query string, args []driver.NamedValue) ([]tripOutcome, error) {
	outs := make([]tripOutcome, len(group))
	ex, isExecer := dc.(driver.ExecerContext)
	if !isExecer {
		return outs, fmt.Errorf("a MySQL connection of type %T takes no multi-statements", dc)
	}
	res, err := ex.ExecContext(ctx, query, args)
	if err != nil {
		// A statement failed (a request ID used, a deadlock): the
		// transaction is open still, unless the connection is gone. Its
		// purchases are sold in three trips, which answer why.
		return outs, m.rolledBack(ctx, ex, fmt.Errorf("%d one-trip purchases: %w", len(group), err))
	}
	r, isResult := res.(mysql.Result)
	if !isResult {
		return outs, m.rolledBack(ctx, ex, fmt.Errorf("%d one-trip purchases: results of type %T", len(group), res))
	}
	rows, ids := r.AllRowsAffected(), r.AllLastInsertIds()
	all := true
	at := 1 // past START TRANSACTION
	for i, p := range group {
		outs[i].complete = p.trip.tookEffect(rows, at) && len(ids) == len(rows)
		if outs[i].complete {
			outs[i].left, outs[i].id = ids[at], ids[at+p.trip.n-1]
		}
		all = all && outs[i].complete
		at += p.trip.n
	}
	if !all || at != len(rows) {
		if at != len(rows) {
			clear(outs) // not the statements sent: nothing is known
		}
		return outs, rollback(ctx, ex)
	}
	if _, err := ex.ExecContext(ctx, stmtCommit, nil); err != nil {
		if IsDeadlock(err) {
			// The server's word that it rolled back (a write conflict found
			// at COMMIT): nothing was written, and the purchases are sold
			// in three trips.
			clear(outs)
			m.cfg.Log.DebugContext(ctx, "a one-trip group's COMMIT was refused: its purchases are sold in three trips", "err", err)
			return outs, nil
		}
		for i := range outs {
			outs[i] = tripOutcome{commitErr: err}
		}
		return outs, driver.ErrBadConn // the connection goes
	}
	for i := range outs {
		outs[i].committed, outs[i].complete = true, false
	}
	return outs, nil
}

// rolledBack rolls back a group that failed with cause. A ROLLBACK that
// fails too returns both, the connection to go (driver.ErrBadConn);
// otherwise cause is logged, and its purchases are sold in three trips.
func (m *mysqlSales) rolledBack(ctx context.Context, ex driver.ExecerContext, cause error) error {
	if err := rollback(ctx, ex); err != nil {
		return errors.Join(cause, err)
	}
	m.cfg.Log.DebugContext(ctx, "a one-trip group rolled back: its purchases are sold in three trips", "err", cause)
	return nil
}

// tripStatements is a one-trip purchase's statements, joined by "; ",
// with their arguments: its product's conditional decrement, the units'
// upsert when there is a limit, its order.
type tripStatements struct {
	product int64
	query   string
	args    []any
	// n is how many statements it holds.
	n     int
	units bool
}

// tookEffect says the purchase's statements, whose results start at
// rows[at], did what a purchase needs: the decrement took the stock, the units stayed
// within the limit, the order was written.
func (t tripStatements) tookEffect(rows []int64, at int) bool {
	if at+t.n > len(rows) {
		return false
	}
	return rows[at] == 1 && (!t.units || rows[at+1] >= 1) && rows[at+t.n-1] == 1
}

// oneTripStatements is buy's statements for p (the units' upsert only
// under a limit), with the order it writes, whose ID and remaining stock
// the results will tell.
func (m *mysqlSales) oneTripStatements(p Purchase, claim bool) (model.Order, tripStatements) {
	o := NewOrder(p, p.Strategy, 0)
	m.cfg.openOrder(&o, m.db.NowFunc())
	decrement := stmtDecrement
	if claim {
		decrement = stmtDecrementClaiming
	}
	args := []any{p.Quantity, time.Now(), p.ProductID, p.Quantity}
	trip := tripStatements{product: p.ProductID, query: decrement, n: 2}
	if limit := m.cfg.Limit; limit > 0 {
		trip.query += "; " + stmtRaiseUnits
		args = append(args, p.ProductID, p.UserID, p.Quantity, limit)
		trip.n, trip.units = 3, true
	}
	trip.query += "; " + m.orders.OneTrip
	trip.args = mysqlrow.Args(args, &o, true)
	return o, trip
}
