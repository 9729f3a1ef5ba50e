// Package demo is the workshop: every failure the five articles warn about,
// played on demand against real instances of the service, each scenario a
// short story that ends in a table with one verdict per row.
//
// A scenario runs in a world of its own: the database (the embedded SQLite,
// or SECKILL_MYSQL_DSN), Redis nodes (three embedded ones, or
// SECKILL_REDIS_ADDRS; a scenario that stops or restarts nodes always gets
// embedded nodes of its own, so that the demo never touches a real server)
// and instances of the service started in process over them. The demo
// talks to the instances only through package client, as any outside
// client would, and injects its faults for real: an embedded Redis node
// closed and started again empty (store.MiniRedis), the clock that setnx's
// lock reads moved ahead (app.Options.Clock), an instance's lease
// shortened, an instance killed while it holds a lock (its own connections
// to the stores closed under it: app.Stores.Share).
//
// Run prints each scenario's story and table for a terminal, every line
// within 100 columns, and says whether every safe strategy held and every
// unsafe one showed its flaw. NewWorkshop serves the same scenarios as a
// page for a projector: a button per scenario, the stock of each product
// drawn live, the answers counted as they come, the verdicts after.
package demo
