// Package locker holds the locks a purchase can take for a product: one
// interface (Locker, Lease), one file per kind, every lock of the articles
// side by side. Each kind's doc comment says exactly when it is safe and how
// it fails; the conformance tests run the same cases against every kind and
// assert the flaws the old recipes keep.
//
// # The kinds
//
// The four locks of this package, the strategies of service/ that take no
// lock here, and the two guards around them. The article column names the
// step of the five articles this project is built from (000 to 004).
//
//	| kind        | article | guards the stock with              | safe while                          | fails how                                       |
//	|-------------|---------|------------------------------------|-------------------------------------|-------------------------------------------------|
//	| none        | -       | nothing (service/)                 | one buyer at a time                 | two buyers read the same stock: oversold        |
//	| local       | (001)   | an in-process lock per key (Local) | one instance; holders within TTL    | two instances both grant the key: oversold      |
//	| setnx       | 000,001 | SETNX, then GET + GETSET, expiry   | clocks agree; no holder overruns or | a fast clock takes a live lock; an unlock DELs  |
//	|             |         | time in the value (SetNX)          | pauses between its check and DEL    | another's lock; a losing GETSET moves expiry    |
//	| token       | 002     | SET NX PX random token, Lua        | the one node is up and keeps its    | an overrun lets a second holder in (the first's |
//	|             |         | compare-and-delete (Token)         | keys; no holder overruns the TTL    | unlock spares it); node lost: no lock or two    |
//	| redlock     | 003     | SET NX PX on N masters, majority   | a majority is up and keeps its      | an overrun lets a second holder in; a node that |
//	|             |         | quorum, redsync (Redlock)          | keys; no overrun, no clock jumps    | restarts empty can grant a second majority      |
//	| always-     | 004     | Unlock deferred on a context that  | always (it is how a lock is used)   | without it a buyer who hangs up leaves the lock |
//	| release     |         | cannot be cancelled (service/)     |                                     | held until the TTL                              |
//	| fencing     | -       | a per-product token claimed from   | the DB holds the stock and the      | never oversells, whatever else writes; a holder |
//	|             |         | the DB at the grant; the write     | token (with setnx/token/redlock)    | overtaken by a later holder or a reset writes   |
//	|             |         | applies only while it is the latest|                                     | nothing and answers lock_lost                   |
//	| pessimistic | -       | SELECT ... FOR UPDATE in one       | the DB is up                        | never oversells; buyers queue on the row lock   |
//	|             |         | transaction (service/)             |                                     |                                                 |
//	| optimistic  | -       | one UPDATE ... WHERE stock >= q    | the DB is up                        | never oversells; a loser sees 0 rows: sold out  |
//	|             |         | (service/)                         |                                     |                                                 |
//
// "(001)": article 001 notes that one machine needs only an in-process
// lock; local is that lock, to show why it is not enough.
//
// None of the locks alone makes the stock safe once a holder can overrun its
// lease: only the database-side guards (fencing, pessimistic, optimistic)
// do. docs/locks.md holds the same table as Markdown.
//
// # Errors
//
// Every way of not getting a lock wraps ErrNotAcquired, and the context's
// error (context.Canceled, context.DeadlineExceeded) when the context or
// the wait ended it, and ErrUnavailable when too few nodes answered (an
// outage, not contention). An attempt runs on a context of its own and
// cleans up after itself, so that a caller who gives up at any moment
// leaves no lock behind. Unlock wraps ErrNotHeld when the
// lease had already run out or been taken over, so that nothing was
// released; SetNX cannot always tell, which is one of its flaws.
package locker
