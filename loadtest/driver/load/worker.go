package load

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// worker sends one request at a time, on a connection of its own to each
// target. Its requests (one per target, their URI, method and headers set
// once) and its response are reused from one request to the next; nothing
// of a response is kept past the next one.
type worker struct {
	plan  *Plan
	lc    *loadClient
	conns []*hostConn // per target; targets on one host share one
	slot  slot        // its request in flight, for the timeouts
	reqs  []*fasthttp.Request
	resp  *fasthttp.Response
	body  []byte // the purchase being built
	// cancelReq is the worker's cancel (-cancel), made at its first;
	// cancels counts the run's.
	cancelReq *fasthttp.Request
	cancels   *cancels
}

func newWorker(p *Plan, lc *loadClient, c *cancels) *worker {
	w := &worker{plan: p, lc: lc, cancels: c, conns: make([]*hostConn, len(p.Targets)),
		reqs: make([]*fasthttp.Request, len(p.Targets)), resp: fasthttp.AcquireResponse()}
	byHost := map[host]*hostConn{}
	for i, u := range p.Targets {
		h := lc.hosts[i]
		if byHost[h] == nil {
			byHost[h] = &hostConn{h: h}
		}
		w.conns[i] = byHost[h]
		req := fasthttp.AcquireRequest()
		req.SetRequestURI(u)
		if p.Purchase {
			req.Header.SetMethod(fasthttp.MethodPost)
			req.Header.SetContentTypeBytes(jsonContentType)
			if p.Authorization != "" {
				req.Header.Set("Authorization", p.Authorization)
			}
		} else {
			req.Header.SetMethod(fasthttp.MethodGet)
		}
		w.reqs[i] = req
	}
	if p.Purchase {
		w.body = make([]byte, 0, len(p.Head)+len(p.Mid)+len(p.Tail)+40)
	}
	return w
}

// release closes the worker's connections and hands its requests and
// response back to fasthttp's pools; the worker must not be used
// afterwards.
func (w *worker) release() {
	for _, c := range w.conns {
		c.close()
	}
	for _, req := range w.reqs {
		fasthttp.ReleaseRequest(req)
	}
	fasthttp.ReleaseResponse(w.resp)
	if w.cancelReq != nil {
		fasthttp.ReleaseRequest(w.cancelReq)
	}
	w.reqs, w.resp, w.cancelReq = nil, nil, nil
}

// do sends request i, a purchase of product, and reads its answer.
func (w *worker) do(ctx context.Context, i, product int, captured *atomic.Bool) answer {
	p := w.plan
	k := i % len(p.Targets)
	req, resp := w.reqs[k], w.resp
	if p.ProductURLs != nil {
		req.SetRequestURI(p.ProductURLs[k][product])
	}
	if p.Purchase {
		body := append(w.body[:0], p.Head...)
		body = strconv.AppendInt(body, int64(p.Buyer(i)), 10)
		body = append(body, p.Mid...)
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, p.Tail...)
		w.body = body
		req.SetBody(body) // copies into the request's own buffer
		if err := w.authorize(req, i); err != nil {
			return answer{out: outTransport, sample: "sign the buyer's token: " + err.Error()}
		}
	}
	if err := w.send(k, req); err != nil {
		if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
			// ctx's deadline cut the request short: wait for ctx to say so,
			// so that the run does not count it (net/http ends such a
			// request from ctx.Done, after ctx.Err is set).
			<-ctx.Done()
		}
		return answer{out: outTransport, sample: transportMessage(err, p.Purchase, p.Targets[k])}
	}
	return p.classify(resp.StatusCode(), resp.Body(), captured)
}

// authorize sets req's bearer token to that of request i's buyer, when
// the plan signs buyers' tokens.
func (w *worker) authorize(req *fasthttp.Request, i int) error {
	if w.plan.BuyerToken == nil {
		return nil
	}
	tok, err := w.plan.BuyerToken(w.plan.Buyer(i))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// send sends req to instance k and reads its answer into w.resp. The run's
// context ending closes the connection (Plan.Run), which ends the request.
func (w *worker) send(k int, req *fasthttp.Request) error {
	return w.conns[k].roundTrip(w.lc, &w.slot, req, w.resp)
}

var jsonContentType = []byte("application/json")
