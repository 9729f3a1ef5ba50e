// Package driver is the load-test driver of the seckill service: it fires
// purchases (or plain GETs) at one or more running instances, measures what
// came back and checks the stock invariant afterwards through the audit
// endpoint.
//
// Two loops are offered. The closed loop (the default) runs
// Config.Concurrency workers that send Config.Requests purchases in all,
// each worker sending its next request when the previous one answered. The
// open loop (Config.Rate > 0) schedules Config.Rate requests per second for
// Config.Duration whatever the server does, and counts every latency from
// the intended send time: a server that stalls cannot hide behind
// coordinated omission, because the requests it delayed are charged for the
// wait.
//
// The load goes through github.com/valyala/fasthttp: a HostClient per
// instance holding a connection per worker, and per worker a request per
// instance and a response, reused from one request to the next, so that the
// driver spends about as much CPU per request as wrk and does not become the
// bottleneck (scripts/bench-driver.sh measures it). The driver's own calls
// (health, admin, audit) go through net/http.
//
// Latency goes into an HDR histogram. Every answer is counted under one
// outcome (see Outcomes), and after each run the driver reads the product's
// audit and cross-checks it with its own count of 201 answers. Run returns a
// Report; Report.Failures says why the run should be called a failure.
package driver
