// Package faulttest holds the tests that break things for real: they build
// the seckill binary, run instances of it as processes against a real
// MariaDB and redis-server nodes, and kill, pause, restart or stop them
// mid-sale (an instance holding a lock, the database, a Redis node), then
// check from the database that the stock invariant held and what buyers
// got. It has no code of its own outside its tests.
package faulttest
