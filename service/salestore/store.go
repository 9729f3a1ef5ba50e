// Package salestore is the sale store: where a sale meets the database.
// Every way of selling (a hold's batch, the conditional purchase, the
// unguarded one) hands its purchases to one Store, in the one form of its
// database chosen at open (Open): the store takes the product's row, reads
// what the sale rule needs under it, has the rule decide (a DecideFunc:
// package sale, through the service) and writes what it decided, in one
// transaction. Anything that deciding again fixes (a deadlock, a request
// ID another purchase wrote meanwhile, a connection lost before COMMIT) is
// tried again in the same form; a COMMIT whose outcome is unknown is
// settled by the store, which looks the orders up by request ID. Two
// forms:
//
//   - mysqlSales: MySQL, MariaDB and TiDB over a pool whose DSN has what
//     its multi-statements need (mysqlForm). A batch takes three round
//     trips, and a single purchase two (a one-trip purchase).
//   - sqlSales (Portable): any database GORM speaks, statement by
//     statement: the embedded SQLite, or a MySQL pool opened without
//     multi-statements, or a node of a Galera Cluster.
//
// The words a sale is told in (Purchase, Receipt, Answer, Sale) are this
// package's, and the service's through its aliases.
package salestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/service/failure"
	"github.com/seckill/seckill/service/metrics"
)

// Store writes sales in the form of one database.
type Store interface {
	// Sell sells ps, purchases of one product in line order, in one
	// transaction that takes the product's row as r says, and returns
	// them as decide decided them. An error is the whole batch's: nothing
	// was written.
	Sell(ctx context.Context, ps []Purchase, r Read, decide DecideFunc) (Sale, error)
	// SellMany sells parts of different products, reserve's reservations,
	// in one transaction where the form has one (see Part). sales[i] and
	// errs[i] are parts[i]'s: its sale, or its own refusal
	// (*GenerationGone, product_not_found), nothing of it written. An
	// error is the whole transaction's: nothing was written, or, when
	// outcome_unknown, selling the parts again replays what was.
	SellMany(ctx context.Context, parts []Part) (sales []Sale, errs []error, err error)
	// Buy tries one purchase in the store's cheapest form, where it has
	// one: the conditional decrement (moving the fence on when claim), the
	// user's units within the limit and the order. ok says it committed o;
	// !ok with a nil error that it wrote nothing and Sell is to answer the
	// purchase. An error is final: the context's, or a COMMIT settled as
	// unavailable or outcome_unknown.
	Buy(ctx context.Context, p Purchase, claim bool) (o model.Order, ok bool, err error)
	// Claim issues the product's next fencing token: fence = fence + 1,
	// read back. The token comes from the database that holds the stock,
	// so it grows per product whatever happens to the Redis nodes, and it
	// makes every earlier holder's token stale.
	Claim(ctx context.Context, id int64) (int64, error)
	// Close stops the store's background work.
	Close()
	// Form names the store's form: "mysql" or "portable".
	Form() string
}

// Read is how a sale's transaction takes the product's row and which
// stock it sells from. Its zero value reads the stock under the row lock
// and sells from it: the conditional purchase.
type Read struct {
	// Claim moves the fence on in the write: the Claim folded into the
	// sale, one atomic step under the row lock, which fences off every
	// holder that read or claimed before.
	Claim bool
	// Token, when not nil, is the fence a claim made at the grant: a fence
	// that has moved on since is a *FenceMoved, and nothing is written.
	Token *int64
	// Trusted, when not nil, is the stock an unfenced hold read before its
	// work: the sale is decided on it and the decrement written whatever
	// the stock is now (the unsafe strategies' flaw). The orders say what
	// the stock really became.
	Trusted *int64
	// LockUntil, when not zero, is the latest the wait for the row lock
	// may end: pessimistic's, whose lock is the row's. Past it the sale is
	// a *RowLockTimeout.
	LockUntil time.Time
	// UnderLock, when not nil, runs once the row is locked, told how long
	// that took; it returns which purchases' lock waits ran out (nil:
	// none) and does the batch's work, holding the row.
	UnderLock func(waited time.Duration) (expired []bool, err error)
	// Extra is how much longer than DBTimeout the transaction may take:
	// the row lock's wait and the work under it.
	Extra time.Duration
	// ReserveGen, when not nil, says the sale writes reserve's
	// reservations, taken in that generation: the product must sell under
	// reserve in it (otherwise *GenerationGone: a reset discarded them).
	// Any other sale of a product under reserve is a strategy_conflict.
	ReserveGen *int64
}

// GenerationGone is a sale of reservations whose generation is not the
// product's any more: a reset discarded them, with their generation's
// orders. Nothing is written.
type GenerationGone struct {
	product, gen, now int64
}

func (e *GenerationGone) Error() string {
	return fmt.Sprintf("product %d is in generation %d, not %d: its reservations were discarded by a reset", e.product, e.now, e.gen)
}

// owner says whether a sale under r may write a product read under its row
// lock in generation gen, reserve saying whether it sells under reserve.
func (r Read) owner(id, gen int64, reserve bool) error {
	switch {
	case r.ReserveGen != nil && (!reserve || gen != *r.ReserveGen):
		return &GenerationGone{product: id, gen: *r.ReserveGen, now: gen}
	case r.ReserveGen == nil && reserve:
		return failure.StrategyConflict(id)
	}
	return nil
}

// lockContext is ctx bounded by r.LockUntil, the wait for the row lock,
// when it has one.
func (r Read) lockContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.LockUntil.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, r.LockUntil)
}

// DecideFunc answers a batch against what its transaction read under the
// row lock: the stock it sells from, which purchases' lock waits ran out
// (nil: none), the orders already made with their request IDs and the
// units each user holds.
type DecideFunc func(stock int64, expired []bool, used map[string]model.Order, units map[string]int64) Sale

// RowLockTimeout is a sale whose wait for the row lock ran past
// Read.LockUntil: nothing was written.
type RowLockTimeout struct {
	Waited time.Duration
	err    error
}

func (e *RowLockTimeout) Error() string {
	return fmt.Sprintf("the row lock's wait ran out after %v: %v", e.Waited, e.err)
}
func (e *RowLockTimeout) Unwrap() error { return e.err }

// Config is what a sale store needs of the service's settings.
type Config struct {
	Limit     int64
	DBTimeout time.Duration
	// PaymentTimeout is how long an order waits for its payment (openOrder);
	// 0: orders are written paid.
	PaymentTimeout time.Duration
	// LockingReads says the database's plain reads in a transaction see
	// its start (TiDB): the units a batch decides on are read with a
	// locking read there (see unitsSQL).
	LockingReads bool
	// ReadBackIDs says the server may leave gaps between the IDs of one
	// multi-row INSERT (TiDB): a sale reads its orders' IDs back.
	ReadBackIDs bool
	// TripGroup, when not nil, runs when a sender has gathered a group of
	// one-trip purchases, before it sends them; BatchTrips when a sale was
	// answered by the MySQL form's three trips (committed, or nothing to
	// write). Points where a test forces an interleaving.
	TripGroup  func(size int)
	BatchTrips func(product int64)
	Log        *slog.Logger
	// Retried counts a transaction tried again, by reason (nil: not
	// counted).
	Retried func(reason string)
}

// retry counts a transaction tried again for reason.
func (c Config) retry(reason string) {
	if c.Retried != nil {
		c.Retried(reason)
	}
}

// openOrder gives order o, written at now, the state it starts its life in:
// unpaid until now + the payment timeout, or paid when orders do not wait
// for their payment. Times are kept to the millisecond, as the database
// keeps them, so that the order a purchase answers is the one a replay
// reads back. (An order of reserve is opened when its writer writes it,
// and waits from then.)
func (c Config) openOrder(o *model.Order, now time.Time) {
	now = now.UTC().Truncate(time.Millisecond)
	o.CreatedAt, o.Status, o.ExpiresAt = now, model.StatusPaid, nil
	if c.PaymentTimeout > 0 {
		expires := now.Add(c.PaymentTimeout)
		o.Status, o.ExpiresAt = model.StatusUnpaid, &expires
	}
}

// Open is db's sale store: the MySQL form when db is MySQL (or
// MariaDB, or TiDB) over a DSN that has what it needs (mysqlForm), the
// portable form otherwise.
func Open(db *gorm.DB, cfg Config) Store {
	base := sqlBase{db: db, cfg: cfg}
	d, isMySQL := db.Dialector.(*gormmysql.Dialector)
	if !isMySQL {
		return Portable(db, cfg)
	}
	why := mysqlForm(d.DSNConfig)
	pool, err := db.DB()
	if err != nil {
		why = err.Error()
	}
	if why == "" {
		var galera bool
		why, galera = multiStatementsUnsafe(pool, cfg.DBTimeout)
		if galera {
			cfg.Log.Info("a Galera Cluster: reads wait for the cluster (wsrep_sync_wait), a row lock is only its node's "+
				"(certification refuses the later of two nodes' writes, and the sale tries again), one statement per round trip",
				"docs", "docs/distributed.md")
		}
	}
	if why != "" {
		cfg.Log.Warn("the sale store takes its portable form: a sale takes nine round trips, not three", "reason", why)
		return Portable(db, cfg)
	}
	return newMySQLSales(base, pool)
}

// mysqlForm says what the MySQL form lacks in a pool opened with cfg ("":
// nothing). Its transactions go as multi-statements with their parameters
// interpolated on the client, it reads times as times, and it reads a
// conditional upsert that changed nothing as over the limit, which needs
// affected rows to count rows changed, not rows matched. store.OpenMySQL
// sets all four.
func mysqlForm(cfg *mysql.Config) string {
	switch {
	case cfg == nil:
		return "the pool's DSN is not known"
	case !cfg.MultiStatements:
		return "the DSN has no multiStatements=true"
	case !cfg.InterpolateParams:
		return "the DSN has no interpolateParams=true"
	case !cfg.ParseTime:
		return "the DSN has no parseTime=true"
	case cfg.ClientFoundRows:
		return "the DSN has clientFoundRows=true"
	}
	return ""
}

// multiStatementsUnsafe says why the server cannot be sent a transaction
// as multi-statements ("": it can). On a node of a Galera Cluster, a
// transaction that certification aborts between two statements of one
// multi-statement (another node committed a write to the same row) is
// rolled back and the statements after it run outside it, each committing
// on its own, with no error to tell: an order written without its
// decrement. Measured on three nodes, two writing: 10 and 18 units
// oversold in about 8,800 sales each run; none with one statement per
// round trip, where the next statement is refused with a deadlock error.
// A server whose wsrep_on cannot be read is taken for such a node.
func multiStatementsUnsafe(pool *sql.DB, timeout time.Duration) (why string, galera bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var variable, value string
	err := pool.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'wsrep_on'").Scan(&variable, &value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false // MySQL, TiDB: no Galera
	case err != nil:
		return fmt.Sprintf("whether the server is a Galera node could not be read: %v", err), false
	case strings.EqualFold(value, "ON"):
		return "the server is a node of a Galera Cluster (wsrep_on), where a multi-statement transaction that certification aborts goes on outside it", true
	}
	return "", false
}

// sqlBase is what both forms share: the pool, the settings, and settling a
// COMMIT whose outcome is unknown (settle).
type sqlBase struct {
	db  *gorm.DB
	cfg Config
}

// MaxAttempts bounds the transactions of one sale that a request ID
// written meanwhile or a lost connection sends back. A deadlock's victim
// tries again for as long as the sale has time: batches of neighbouring hot
// products can deadlock several times in a row, and on a Galera Cluster
// every node's writes to a hot product's row abort the others' at
// certification, again and again.
const MaxAttempts = 5

// retrying runs once, a transaction bounded by DBTimeout plus extra, until
// it answers ps: a deadlock's victim (after a short pause, longer each
// time), a sale that met a request ID written meanwhile and a connection
// lost before COMMIT decide again, the last two up to MaxAttempts in all;
// a COMMIT whose outcome is unknown is settled.
func (b *sqlBase) retrying(ctx context.Context, ps []Purchase, extra time.Duration, once func(context.Context) (Sale, error)) (Sale, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.DBTimeout+extra)
	defer cancel()
	deadlocks, others := 0, 0
	for {
		d, err := once(ctx)
		switch {
		case uncommitted(err):
			return b.settleBatch(ctx, ps, d, err)
		case err == nil:
			return d, nil
		case !retryable(err) || ctx.Err() != nil:
			// DBTimeout bounds a sale, not each of its attempts.
			return Sale{}, err
		case IsDeadlock(err):
			deadlocks++
			if werr := deadlockPause(ctx, deadlocks); werr != nil {
				return Sale{}, errors.Join(err, werr)
			}
			b.cfg.retry(metrics.RetryDeadlock)
			continue
		}
		if others++; others >= MaxAttempts {
			return Sale{}, err
		}
		switch {
		case errors.Is(err, errConnLost):
			b.cfg.retry(metrics.RetryConnLost)
		default:
			b.cfg.retry(metrics.RetryRequestID)
		}
	}
}

// RetryDeadlocks runs fn, a transaction that may run again from its
// start, until it ends in anything but a deadlock or ctx ends, pausing
// between attempts (deadlockPause) and counting them (cfg.retry). On a
// Galera Cluster, a write to a row another node has just written is
// refused with a deadlock error, at any statement or at COMMIT.
func RetryDeadlocks(ctx context.Context, cfg Config, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if !IsDeadlock(err) || ctx.Err() != nil {
			return err
		}
		if werr := deadlockPause(ctx, attempt); werr != nil {
			return errors.Join(err, werr)
		}
		cfg.retry(metrics.RetryDeadlock)
	}
}

// deadlockPause waits before a deadlock's victim tries again: a random
// time up to a millisecond the first time, doubling to at most 32, so that
// the transactions that keep meeting drift apart. It returns early, with
// ctx's error, when ctx ends.
func deadlockPause(ctx context.Context, attempt int) error {
	ceiling := time.Millisecond << min(attempt-1, 5)
	t := time.NewTimer(rand.N(ceiling) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("pause before trying again: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// errConnLost marks an error of the connection before any COMMIT (the
// MySQL form's: see mysqlSales.sellOnce): the server rolls back what it
// began, and the sale may go on another.
var errConnLost = errors.New("the connection failed before COMMIT")

// retryable says a sale's transaction failed for a reason that deciding
// again fixes: the database chose it as a deadlock's victim, another
// purchase wrote one of its request IDs meanwhile, or its connection went
// before COMMIT.
func retryable(err error) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == erDeadlock || my.Number == erDupEntry
	}
	return errors.Is(err, gorm.ErrDuplicatedKey) || errors.Is(err, errConnLost)
}

// IsDeadlock says the database chose the transaction as a deadlock's
// victim: trying it again is the cure.
func IsDeadlock(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && my.Number == erDeadlock
}

// MySQL's error numbers that a sale tries again.
const (
	erDupEntry = 1062 // ER_DUP_ENTRY
	erDeadlock = 1213 // ER_LOCK_DEADLOCK
)
