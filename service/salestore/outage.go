package salestore

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// Outage says err is not known to be the reservation's own fault: the
// database (or Redis) not answering, refusing writes for a while
// (read-only, shutting down, busy), a deadlock that kept coming back, a
// connection lost; the reservations are written again later, however long
// it lasts, and never given up on. Only the database's refusal of the row
// itself (a value too long, or that does not fit its column; on the
// embedded SQLite, a constraint, a trigger's abort, a value too big or of
// the wrong type) is not.
func Outage(err error) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case 1048, 1264, 1292, 1366, 1406: // null, out of range, bad value, bad string, too long
			return false
		}
	}
	// SQLite's errors carry its result code, the primary one in the low
	// byte (the driver's type is not named here: the service does not
	// depend on the embedded store's driver).
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff {
		case sqliteTooBig, sqliteConstraint, sqliteMismatch:
			return false
		}
	}
	return true
}

// SQLite's primary result codes for a row it refuses.
const (
	sqliteTooBig     = 18 // SQLITE_TOOBIG
	sqliteConstraint = 19 // SQLITE_CONSTRAINT
	sqliteMismatch   = 20 // SQLITE_MISMATCH
)
