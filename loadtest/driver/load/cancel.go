package load

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/loadtest/report"
)

// Cancels (-cancel): a worker whose purchase got an order cancels it at
// once, as its buyer, for a fraction of the orders chosen from the
// request's index (the same requests every run); the history records each
// cancel, and the run reports what they were answered.

// cancels counts a run's cancels by answer.
type cancels struct {
	sent, returned, refused, failed atomic.Int64
}

// report is what the run's cancels were answered; nil for a run without.
func (c *cancels) report() *report.Cancels {
	if c == nil || c.sent.Load() == 0 {
		return nil
	}
	return &report.Cancels{Sent: int(c.sent.Load()), Returned: int(c.returned.Load()),
		Refused: int(c.refused.Load()), Failed: int(c.failed.Load())}
}

// cancelled says request i's order is one the run cancels: a fraction
// frac of the requests, spread evenly by a hash of the index.
func cancelled(i int, frac float64) bool {
	if frac <= 0 {
		return false
	}
	return float64(uint32(i)*2654435761%1_000_000) < frac*1_000_000
}

// cancel cancels order id of product at instance k as the buyer of request
// i (the plan's user), records it, and counts what it was answered.
func (w *worker) cancel(k int, product, id int64, i int) {
	p := w.plan
	if w.cancelReq == nil {
		w.cancelReq = fasthttp.AcquireRequest()
		w.cancelReq.Header.SetMethod(fasthttp.MethodPost)
		w.cancelReq.Header.SetContentTypeBytes(jsonContentType)
	}
	req, resp := w.cancelReq, w.resp
	req.SetRequestURI(p.Bases[k] + "/api/v1/orders/" + strconv.FormatInt(id, 10) + "/cancel")
	body := append(w.body[:0], `{"user_id":"`...)
	body = append(body, p.UserPrefix...)
	body = strconv.AppendInt(body, int64(p.Buyer(i)), 10)
	body = append(body, `"}`...)
	w.body = body
	req.SetBody(body)
	start := time.Now()
	err := w.authorize(req, i)
	if err == nil {
		err = w.send(k, req)
	}
	end := time.Now()
	status, code := 0, ""
	if err == nil {
		status = resp.StatusCode()
		if status != http.StatusOK {
			code = string(errorCode(resp.Body()))
		}
	}
	c := w.cancels
	c.sent.Add(1)
	switch {
	case status == http.StatusOK:
		c.returned.Add(1)
	case status >= 400 && status < 500:
		c.refused.Add(1)
	default:
		c.failed.Add(1)
	}
	if p.History != nil {
		p.History.cancel(product, id, p.Quantity, start, end, status, code)
	}
}
