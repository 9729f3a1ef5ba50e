// Package demo is the workshop: every failure the five articles warn about,
// played on demand against real instances of the service, each scenario a
// short story that ends in a table with one verdict per row.
//
// The stories are in package scenario, one file per lesson; the world they
// play in (the stores, the instances of the service, the buyers) is
// package lab. This package shows them: Command is `seckill demo`, Run
// prints each scenario's story and table for a terminal, every line
// within 100 columns, and says whether every safe strategy held and every
// unsafe one showed its flaw. NewWorkshop serves the same scenarios as a
// page for a projector: a button per scenario, the stock of each product
// drawn live, the answers counted as they come, the verdicts after.
package demo
