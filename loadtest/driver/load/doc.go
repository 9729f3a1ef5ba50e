// Package load sends the load-test driver's requests and counts their
// answers. A Plan says what to send (purchases of some products, or GETs
// of one path), to which instances, from how many workers and for how
// long: a closed loop of a request count or a length, or an open loop of
// rates, either after a warmup. Plan.Run sends it through fasthttp, a
// connection per worker and instance, and returns a Tally: every answer
// under one outcome, with its latency, by instance, by rate step, by
// product and by second, turned into a report.Result by Tally.Result.
// While it runs, Plan.Progress shows a progress line, Plan.History (a
// Recorder) writes every purchase and cancel to a history, and
// Plan.Promised hears of every 202.
//
// The load knows nothing of strategies, products' names or audits: the
// driver (its parent package) finds the products, makes the plan, and
// checks the tally against the audit.
package load
