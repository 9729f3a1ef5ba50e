// Package driver is the load-test driver of the seckill service: it fires
// purchases (or plain GETs) at one or more running instances, measures what
// came back and checks the stock invariant afterwards through the audit
// endpoint.
//
// Two loops are offered. The closed loop (the default) runs
// Config.Concurrency workers, each sending its next request when the
// previous one answered, for Config.Requests requests in all or for
// Config.Duration. The open loop (Config.Rates) schedules each rate's
// requests per second for Config.Duration whatever the server does, and
// counts every latency from the intended send time: a server that stalls
// cannot hide behind coordinated omission. A request that cannot leave
// within one interval of its time, because Config.Concurrency requests are
// in flight, is dropped: never sent, counted apart, named in the verdict,
// so that the schedule keeps its length. Either loop may start with a
// warmup (Config.Warmup) whose answers are left out of the figures.
//
// Each worker of the load holds a connection of its own to each instance,
// and a request per instance and a response, reused from one request to the
// next; it writes the request and reads the answer with
// github.com/valyala/fasthttp, and one watcher keeps every request to its
// timeout, so that the driver spends about as much CPU per request as wrk
// and does not become the bottleneck (make bench-driver measures it). The driver's own calls
// (health, strategies, products, stock resets, audits) go through
// package client, over net/http.
//
// The products on sale are Config.ProductID, the product named
// Config.ProductName (found in the product list, created when missing), or
// a new one; with Config.Products, a catalogue of products named
// ProductName-1 … ProductName-N, created once and reused by name, each
// request's product drawn from a hash of its index by a Zipf law of
// exponent Config.Zipf (so that the counters and the history agree on it
// without sharing a random source). A catalogue's audit is the sum of its
// products' audits; the report's settings list its products
// (report.Settings.Catalogue), and each result gives its hottest products
// and names those whose audit broke the invariant
// (report.Result.Catalogue), which every output shows. Resets, creations
// and audits over a catalogue go 16 at a time.
//
// Every answer is counted under one outcome (report.Outcome*), its latency
// in an HDR histogram of that outcome, and in the second it came in: each
// report.Result has the figures of the whole run, of each outcome, of each
// rate step and of each second (Result.Series). After each run the driver
// asks every instance for /healthz, reads the product's audit and
// cross-checks it with its own count of 201 answers. Run returns the
// report.Report it filled; package report judges it (Report.Failures say
// why the run should be called a failure) and writes it as a table, JSON,
// CSV or a page with charts.
//
// Under reserve a purchase answers 202: its units are taken and its order
// will be written moments later, a promise. The 202s count with the 201s
// as the run's successes (the rate, the latency, the time to sell out,
// the stock left); each is handed to a tracker that asks
// GET /api/v1/purchases/{request_id} for it (the request ID the purchase
// sent), 16 at a time in rounds 150 ms apart, from its arrival until it
// became an order (kept), the database refused it (failed) or no instance
// knows it (lost, 404 purchase_not_found). While the load runs it follows
// at most 64 promises at once, from their 202 on, so that the write lag (from the 202 to the first poll that found
// the order: an upper bound, the order carrying no time of its own) is
// measured at the resolution of a round, not from the end of the run.
// After the load the driver waits up to Config.Drain for the promises
// still pending, then reads the audit, which must have gained one order
// per 201 and per promise kept. Result.Promises says what became of them;
// a promise failed, lost or still pending at the end of the drain fails
// the run, whatever the strategy. With -history, a 202 is a line with
// status 202 and what it left (no order ID), which the check counts as
// having taken its units.
//
// The requests themselves are sent, and their answers counted, by package
// load (a Plan and its Tally); package latency holds the histograms that
// both it and the promises' tracker fill.
package driver
