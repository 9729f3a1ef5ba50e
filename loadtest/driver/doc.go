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
// The load goes through github.com/valyala/fasthttp: a HostClient per
// instance holding a connection per worker, and per worker a request per
// instance and a response, reused from one request to the next, so that the
// driver spends about as much CPU per request as wrk and does not become the
// bottleneck (scripts/bench-driver.sh measures it). The driver's own calls
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
package driver
