package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/seckill/seckill/loadtest/report"
)

// outcome is the class of an answer: the driver counts every answer under
// one, and names it in the report as outcomeNames says.
type outcome int

const (
	outCreated  outcome = iota
	outAccepted         // 202: a promise, under reserve
	outOK
	outSoldOut
	outLimit
	outLockTimeout
	outLockLost
	out4xx
	out5xx
	outTransport
	outOther
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	report.OutcomeCreated, report.OutcomeAccepted, report.OutcomeOK, report.OutcomeSoldOut, report.OutcomeLimitExceeded,
	report.OutcomeLockTimeout, report.OutcomeLockLost, report.OutcomeOther4xx, report.Outcome5xx,
	report.OutcomeTransport, report.OutcomeOther,
}

// success says o is a purchase's success: a 201, or a 202 under reserve
// (its order comes later).
func (o outcome) success() bool { return o == outCreated || o == outAccepted }

// answer is what one request came back with.
type answer struct {
	out      outcome
	code     string // status and error code, for other_4xx, 5xx and other
	sample   string // transport error
	override bool   // 403 strategy_override_disabled
	strategy string // of the captured 201 or 202
	// status and errCode are the answer's HTTP status (0: none came) and
	// error code, for the history.
	status  int
	errCode string
}

// codeOutcomeUnknown is the contract's answer to a purchase that may or
// may not have been made, as an answer's code holds it (classify).
const codeOutcomeUnknown = "503 outcome_unknown"

// Of an error answer's body, the part searched for the code.
const errorBodyPeek = 512

// classify says what an answer of status with body was. body belongs to
// the worker's response: it is only read here, and what is kept of it (the
// code, the strategy) is copied into strings. The first 201 or 202 that
// sets captured has its strategy read.
func (p *Plan) classify(status int, body []byte, captured *atomic.Bool) answer {
	a := answer{status: status}
	switch s := a.status; {
	case (s == http.StatusCreated || s == http.StatusAccepted) && p.Purchase:
		a.out = outCreated
		if s == http.StatusAccepted {
			a.out = outAccepted
		}
		if !captured.Load() && captured.CompareAndSwap(false, true) {
			var o struct{ Strategy string }
			if json.NewDecoder(bytes.NewReader(body[:min(len(body), 1<<16)])).Decode(&o) == nil {
				a.strategy = o.Strategy
			}
		}
	case s/100 == 2 && !p.Purchase:
		a.out = outOK
	case s == http.StatusConflict, s == http.StatusServiceUnavailable, s/100 == 4, s/100 == 5:
		code := errorCode(body[:min(len(body), errorBodyPeek)])
		if p.History != nil {
			a.errCode = string(code)
		}
		a.out, a.override = errorOutcome(s, code)
		if a.out == out4xx || a.out == out5xx {
			a.code = strconv.Itoa(s)
			if len(code) > 0 {
				a.code += " " + string(code)
			}
		}
	default:
		a.out = outOther
		a.code = strconv.Itoa(s)
	}
	return a
}

// errorOutcome is the outcome of an error answer (4xx or 5xx) of status s
// whose body names code; override: it is 403 strategy_override_disabled.
func errorOutcome(s int, code []byte) (out outcome, override bool) {
	switch {
	case s == http.StatusConflict && bytes.Equal(code, codeSoldOut):
		return outSoldOut, false
	case s == http.StatusConflict && bytes.Equal(code, codeLimitExceeded):
		return outLimit, false
	case s == http.StatusServiceUnavailable && bytes.Equal(code, codeLockTimeout):
		return outLockTimeout, false
	case s == http.StatusServiceUnavailable && bytes.Equal(code, codeLockLost):
		return outLockLost, false
	case s/100 == 4:
		return out4xx, s == http.StatusForbidden && bytes.Equal(code, codeOverrideDisabled)
	default:
		return out5xx, false
	}
}

var (
	codeSoldOut          = []byte("sold_out")
	codeLimitExceeded    = []byte("limit_exceeded")
	codeLockTimeout      = []byte("lock_timeout")
	codeLockLost         = []byte("lock_lost")
	codeOverrideDisabled = []byte("strategy_override_disabled")
	codeKey              = []byte(`"code"`)
)

// errorCode finds the code of the contract's error body
// {"error": {"code": "...", ...}} without decoding the whole body.
func errorCode(body []byte) []byte {
	i := bytes.Index(body, codeKey)
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(body[i+len(codeKey):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return nil
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return nil
	}
	rest = rest[1:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil
	}
	return rest[:end]
}

// transportMessage shortens a client error to what went wrong: a network
// error as it is, any other one after its request, as net/http words it.
func transportMessage(err error, post bool, target string) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	msg := err.Error()
	switch {
	case errors.Is(err, fasthttp.ErrTimeout):
		msg = "timeout awaiting the answer"
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF):
		msg = "the server closed the connection before answering"
	}
	method := "Get"
	if post {
		method = "Post"
	}
	return method + " " + strconv.Quote(target) + ": " + msg
}
