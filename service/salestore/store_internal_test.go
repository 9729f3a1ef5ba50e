package salestore

import (
	"cmp"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/seckill/seckill/model"
	"github.com/seckill/seckill/store"
)

// TestRetrying: a sale's transaction is tried again for what deciding
// again fixes (a deadlock, for as long as the sale has time; a duplicate
// request ID or a connection lost before COMMIT, up to MaxAttempts in
// all), and not for anything else: an attempt that ran out of its own time
// (DBTimeout bounds the sale, not each attempt), a refusal, an error of a
// statement that would fail again.
func TestRetrying(t *testing.T) {
	deadlock := &mysql.MySQLError{Number: erDeadlock}
	for _, tc := range []struct {
		name string
		// fail is the error of attempt n (from 1); nil answers.
		fail func(ctx context.Context, n int) error
		want int // attempts made; 0: until the sale's time ran out
		// dbTimeout bounds the sale; 0: 20ms.
		dbTimeout time.Duration
	}{
		{"a deadlock's victim past maxAttempts, then answered", func(_ context.Context, n int) error {
			if n <= MaxAttempts+2 {
				return deadlock
			}
			return nil
		}, MaxAttempts + 3, 10 * time.Second},
		{"answered at once", func(context.Context, int) error { return nil }, 1, 0},
		{"a deadlock's victim once", func(_ context.Context, n int) error {
			if n == 1 {
				return deadlock
			}
			return nil
		}, 2, 0},
		{"deadlocked every time", func(context.Context, int) error { return deadlock }, 0, 0},
		{"a connection lost before COMMIT", func(_ context.Context, n int) error {
			if n == 1 {
				return fmt.Errorf("%w: %w", errConnLost, io.ErrUnexpectedEOF)
			}
			return nil
		}, 2, 0},
		{"an attempt out of time, its connection closed", func(ctx context.Context, _ int) error {
			<-ctx.Done()
			return fmt.Errorf("%w: %w", errConnLost, errors.Join(ctx.Err(), driver.ErrBadConn))
		}, 1, 0},
		{"a statement that would fail again", func(context.Context, int) error {
			return errors.New("write 3 orders of product 1: not the results a sale makes")
		}, 1, 0},
		{"a refusal", func(context.Context, int) error { return &FenceMoved{Generation: 2} }, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := sqlBase{cfg: Config{DBTimeout: cmp.Or(tc.dbTimeout, 20*time.Millisecond), Log: slog.New(slog.DiscardHandler)}}
			n := 0
			_, err := b.retrying(context.Background(), []Purchase{{ProductID: 1}}, 0, func(ctx context.Context) (Sale, error) {
				n++
				return Sale{}, tc.fail(ctx, n)
			})
			switch {
			case tc.want == 0 && (n < 2 || !IsDeadlock(err)):
				t.Errorf("%d attempts (last error %v); want a deadlock's, tried again until the sale's time ran out", n, err)
			case tc.want != 0 && n != tc.want:
				t.Errorf("%d attempts (last error %v); want %d", n, err, tc.want)
			}
		})
	}
}

// TestConnLost: the errors of a connection, not of a statement, are the
// ones a sale goes on another connection for.
func TestConnLost(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{driver.ErrBadConn, true},
		{fmt.Errorf("read a sale of product 1: %w", mysql.ErrInvalidConn), true},
		{io.ErrUnexpectedEOF, true},
		{&mysql.MySQLError{Number: erDeadlock}, false},
		{errors.New("a result of 2 columns; want 3"), false},
		{context.DeadlineExceeded, false},
	} {
		if got := connLost(tc.err); got != tc.want {
			t.Errorf("connLost(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

// TestOutage: a reservation the database will not write is given up on
// (dead letters) only when the database refused the row itself; a server
// that refuses writes for a while, shuts down, deadlocks or loses the
// connection, or any error that is not the database's, is an outage.
func TestOutage(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1290}, true}, // read-only
		{&mysql.MySQLError{Number: 1053}, true}, // shutting down
		{&mysql.MySQLError{Number: erDeadlock}, true},
		{errConnLost, true},
		{errors.New("anything else"), true},
		{&mysql.MySQLError{Number: 1406}, false}, // too long
		{&mysql.MySQLError{Number: 1366}, false}, // bad string
		{fmt.Errorf("write: %w", &mysql.MySQLError{Number: 1264}), false},
	} {
		if got := Outage(c.err); got != c.want {
			t.Errorf("Outage(%v) = %t; want %t", c.err, got, c.want)
		}
	}
}

// TestOutageOnSQLite: on the embedded SQLite, the portable store's, a row
// the database refuses (here a trigger's abort, as a CHECK or NOT NULL
// would) is the reservation's fault, not an outage, so that the writer
// gives it up (dead letters) instead of trying it for ever; a store that
// is gone still is an outage.
func TestOutageOnSQLite(t *testing.T) {
	ctx := context.Background()
	db, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "seckill.db"))
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	if err := model.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	err = db.Exec("CREATE TRIGGER refuse BEFORE INSERT ON orders WHEN NEW.user_id = 'u-bad' " +
		"BEGIN SELECT RAISE(ABORT, 'refused'); END").Error
	if err != nil {
		t.Fatalf("create trigger: %v", err)
	}
	refusedErr := db.Create(&model.Order{ProductID: 1, UserID: "u-bad", Quantity: 1, Strategy: "reserve", Status: model.StatusPaid}).Error
	if refusedErr == nil || Outage(refusedErr) {
		t.Errorf("Outage(%v) = true, or no error; want a refusal of the row, not an outage", refusedErr)
	}
	if err := store.CloseSQL(db); err != nil {
		t.Fatalf("close: %v", err)
	}
	goneErr := db.Create(&model.Order{ProductID: 1, UserID: "u-ok", Quantity: 1, Strategy: "reserve", Status: model.StatusPaid}).Error
	if goneErr == nil || !Outage(goneErr) {
		t.Errorf("Outage(%v) = false, or no error; want an outage: the store is closed", goneErr)
	}
}
