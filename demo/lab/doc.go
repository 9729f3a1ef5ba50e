// Package lab is the world a scenario of the workshop runs in, and the
// table it ends in.
//
// Each run gets a world of its own: the database (the embedded SQLite,
// or SECKILL_MYSQL_DSN), Redis nodes (three embedded ones, or
// SECKILL_REDIS_ADDRS; a scenario that stops or restarts nodes always gets
// embedded nodes of its own, so that the demo never touches a real server)
// and instances of the service started in process over them. Buyers talk
// to the instances only through package client, as any outside client
// would, and each product on sale is a Series whose answers are counted
// as they come. Faults are injected for real: an embedded Redis node
// closed and started again empty (store.MiniRedis), the clock that setnx's
// lock reads moved ahead (Clock, app.Options.Clock), an instance's lease
// shortened (Setup), an instance killed while it holds a lock (its own
// connections to the stores closed under it: StartKillable).
//
// A scenario reports a Result: a table with one Row per case, each with a
// verdict and whether it went as the lesson says. An Observer sees the run
// as it happens: its notes, the stock of every series ticked live, the
// result.
package lab
