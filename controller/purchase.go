package controller

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// A purchase's request: its handler, the body read into a pooled buffer
// and decoded (on a fast path for the common body, by encoding/json
// otherwise), and the override's parameters.

// purchaseRequest is api.Purchase as the server decodes it: pointers tell
// a missing field (or null) from a zero, so that a body without user_id or
// quantity is refused as such ("user_id is required"). api.Purchase cannot
// tell them apart, and pointers there would have every client (the load
// driver, the demo, the tests) write &v for a value; so the server keeps
// this copy, field for field api.Purchase's (TestRequestsAreTheAPIShapes).
type purchaseRequest struct {
	UserID    *string `json:"user_id"`
	Quantity  *int64  `json:"quantity"`
	RequestID string  `json:"request_id"`
}

// purchaseOptions are what a purchase's handler needs of the router's
// settings.
type purchaseOptions struct {
	// override is SECKILL_STRATEGY_OVERRIDE; admin says a request carries
	// the admin token, which the override's parameters need.
	override bool
	admin    func(*gin.Context) bool
	// strategy is SECKILL_LOCK, for the log.
	strategy string
}

func handlePurchase(svc *service.Seckill, log *slog.Logger, opts purchaseOptions) gin.HandlerFunc {
	bufs := newBodyBuffers()
	return func(c *gin.Context) {
		p, err := purchaseFrom(c, opts, bufs)
		if err == nil {
			p.UserID, err = buyerOf(c, p.UserID)
		}
		if err != nil {
			writeError(c, log, err)
			return
		}
		// Every line logged about this purchase names it.
		setPurchaseLog(c, purchaseLog{product: p.ProductID, user: p.UserID,
			strategy: cmp.Or(p.Strategy, opts.strategy), requestID: p.RequestID})
		r, err := svc.Purchase(c.Request.Context(), p)
		if err != nil {
			writeError(c, log, err)
			return
		}
		if r.Reservation != nil {
			// Accepted, written moments later: the Location says where to
			// ask what became of it.
			c.Header("Location", "/api/v1/purchases/"+url.PathEscape(r.Reservation.RequestID))
			c.JSON(http.StatusAccepted, toReservation(*r.Reservation))
			return
		}
		status := http.StatusCreated
		if r.Replayed {
			status = http.StatusOK
		}
		c.JSON(status, toOrder(r.Order))
	}
}

// invalidf is a 400 invalid_argument with a formatted message.
func invalidf(format string, args ...any) error {
	return apiError(failure.CodeInvalid, fmt.Sprintf(format, args...))
}

// overrideParams are the query parameters that only the strategy override
// allows.
func overrideParams() []string {
	return []string{"strategy", "hold_ms", "pause_ms", "fencing", "batch"}
}

// purchaseFrom reads a purchase from the path, the body (into a buffer of
// bufs) and, under the strategy override and with the admin token, the
// query.
func purchaseFrom(c *gin.Context, opts purchaseOptions, bufs *bodyBuffers) (service.Purchase, error) {
	id, err := productID(c)
	if err != nil {
		return service.Purchase{}, err
	}
	buf := bufs.get()
	defer bufs.put(buf)
	body, err := readBodyInto(c.Request.Body, *buf)
	if err != nil {
		return service.Purchase{}, err
	}
	q := c.Request.URL.RawQuery
	return decodePurchase(id, body, q, purchaseRules{override: opts.override, admin: opts.override && q != "" && opts.admin(c),
		userOptional: tokenBuyer(c)})
}

// decodePurchase reads a purchase of product id from its JSON body and its
// raw query. Nothing is rewritten on the way: a body that is not one
// object whose members have the documented types (members it does not
// know are ignored; a member given twice is refused), or a query that does
// not parse, is refused. The override's parameters need rules.override (or answer 403) and
// rules.admin, the admin token (or answer 401).
func decodePurchase(id int64, body []byte, rawQuery string, rules purchaseRules) (service.Purchase, error) {
	req, ok := decodePurchaseFast(body)
	if !ok {
		var err error
		if req, err = decodePurchaseSlow(body); err != nil {
			return service.Purchase{}, err
		}
	}
	switch {
	case !req.hasUser && !rules.userOptional:
		return service.Purchase{}, invalidf("user_id is required")
	case !req.hasQuantity:
		return service.Purchase{}, invalidf("quantity is required")
	}
	p := service.Purchase{ProductID: id, UserID: req.user, Quantity: req.quantity, RequestID: req.requestID}
	// A parameter dropped for a bad escape would silently buy under the
	// defaults: the whole query must parse.
	if rawQuery == "" {
		return p, nil // the common case: nothing to parse
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return service.Purchase{}, invalidf("the query does not parse: %v", err)
	}
	for _, name := range overrideParams() {
		if !q.Has(name) {
			continue
		}
		if !rules.override {
			return service.Purchase{}, apiError(codeOverrideDisabled, fmt.Sprintf("query parameter %s needs SECKILL_STRATEGY_OVERRIDE=true", name))
		}
		if !rules.admin {
			return service.Purchase{}, apiError(codeUnauthorized,
				fmt.Sprintf("query parameter %s needs Authorization: Bearer <SECKILL_ADMIN_TOKEN>", name))
		}
		if len(q[name]) > 1 {
			return service.Purchase{}, invalidf("query parameter %s is given %d times", name, len(q[name]))
		}
		if err := setOverride(&p, name, q.Get(name)); err != nil {
			return service.Purchase{}, err
		}
	}
	return p, nil
}

// purchaseRules are what a purchase's request may carry: the override's
// parameters (override, admin), and no user_id when a token names the
// buyer (userOptional).
type purchaseRules struct {
	override, admin, userOptional bool
}

// setOverride sets the override parameter name of p to v, or says why v
// is not one.
func setOverride(p *service.Purchase, name, v string) error {
	switch name {
	case "strategy":
		if v == "" {
			return invalidf("strategy is empty")
		}
		p.Strategy = v
	case "hold_ms", "pause_ms":
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > api.MaxHold.Milliseconds() {
			return invalidf("%s must be an integer from 0 to %d", name, api.MaxHold.Milliseconds())
		}
		if name == "hold_ms" {
			p.Work = time.Duration(ms) * time.Millisecond
		} else {
			p.Pause = time.Duration(ms) * time.Millisecond
		}
	case "fencing":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return invalidf("fencing must be true or false")
		}
		p.Fencing = &b
	case "batch":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxBatch {
			return invalidf("batch must be an integer from 1 to %d", api.MaxBatch)
		}
		p.Batch = n
	}
	return nil
}

// bodyBuffers lends buffers of maxBody+1 bytes to read request bodies
// into: a purchase's body is read, decoded into strings of their own and
// dropped, so the buffer of one purchase can serve the next.
type bodyBuffers struct{ pool sync.Pool }

func newBodyBuffers() *bodyBuffers {
	return &bodyBuffers{pool: sync.Pool{New: func() any {
		b := make([]byte, 0, maxBody+1)
		return &b
	}}}
}

func (bb *bodyBuffers) get() *[]byte { return bb.pool.Get().(*[]byte) }

func (bb *bodyBuffers) put(b *[]byte) {
	*b = (*b)[:0]
	bb.pool.Put(b)
}

// readBodyInto reads body into buf, which has room for maxBody+1 bytes,
// and answers as readBody does: 413 payload_too_large past maxBody bytes,
// 400 for any other error of the read. As http.MaxBytesReader, it reads
// at most maxBody+1 bytes, so a body too large is not read to its end.
func readBodyInto(body io.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > maxBody {
			return nil, apiError(codePayloadTooLarge, fmt.Sprintf("the body may be at most %d bytes", maxBody))
		}
		if err == io.EOF { // as io.ReadAll: the reader's own, not wrapped
			return buf, nil
		}
		if err != nil {
			return nil, invalidf("read body: %v", err)
		}
	}
}

// purchaseBody is a purchase's body as decoded: what purchaseRequest
// holds, without the pointers (and their allocations); has* say whether
// the field was given (and not null).
type purchaseBody struct {
	user, requestID      string
	quantity             int64
	hasUser, hasQuantity bool
}

// decodePurchaseSlow decodes body with decodeJSON: every body the fast
// decoder does not take.
func decodePurchaseSlow(body []byte) (purchaseBody, error) {
	var req purchaseRequest
	if err := decodeJSON(body, &req); err != nil {
		return purchaseBody{}, err
	}
	b := purchaseBody{requestID: req.RequestID, hasUser: req.UserID != nil, hasQuantity: req.Quantity != nil}
	if b.hasUser {
		b.user = *req.UserID
	}
	if b.hasQuantity {
		b.quantity = *req.Quantity
	}
	return b, nil
}

// decodePurchaseFast decodes the common purchase body, an object of
// user_id, quantity and request_id as the driver and most clients send it,
// without reflection: ok is false for anything else, which
// decodePurchaseSlow then decodes (or refuses with its own message). It
// accepts only what decodeJSON accepts and decodes it to the same values
// (FuzzDecodePurchaseFast): JSON whitespace, each of the three members at
// most once and in any order, strings of valid UTF-8 without escapes or
// control characters, and a quantity of 1 to 18 digits without a leading
// zero, sign, fraction or exponent. Everything else (null, unknown
// members, escapes, other numbers, other whitespace) takes the slow path.
func decodePurchaseFast(body []byte) (b purchaseBody, ok bool) {
	s := jsonScanner{b: body}
	if !s.skip('{') {
		return purchaseBody{}, false
	}
	// seen has a bit for each member read: a second one is refused by
	// decodeJSON, so it takes the slow path.
	const user, quantity, requestID = 1, 2, 4
	var seen uint8
	for first := true; !s.skip('}'); first = false {
		if !first && !s.skip(',') {
			return purchaseBody{}, false
		}
		name, ok := s.str()
		if !ok || !s.skip(':') {
			return purchaseBody{}, false
		}
		var member uint8
		switch string(name) {
		case "user_id":
			member = user
			b.user, ok = s.strValue()
		case "quantity":
			member = quantity
			b.quantity, ok = s.digits()
		case "request_id":
			member = requestID
			b.requestID, ok = s.strValue()
		default:
			return purchaseBody{}, false
		}
		if !ok || seen&member != 0 {
			return purchaseBody{}, false
		}
		seen |= member
	}
	if s.space(); s.i != len(s.b) {
		return purchaseBody{}, false
	}
	b.hasUser, b.hasQuantity = seen&user != 0, seen&quantity != 0
	return b, true
}

// jsonScanner reads the tokens decodePurchaseFast knows from b, from i on.
type jsonScanner struct {
	b []byte
	i int
}

// space skips JSON whitespace.
func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// skip skips whitespace and then c, if c is next.
func (s *jsonScanner) skip(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes or control characters, in valid
// UTF-8, and returns its bytes, still in b.
func (s *jsonScanner) str() ([]byte, bool) {
	if !s.skip('"') {
		return nil, false
	}
	start, ascii := s.i, true
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, ascii || utf8.Valid(v)
		case c < ' ' || c == '\\':
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// strValue reads a string as str does, copied out of b.
func (s *jsonScanner) strValue() (string, bool) {
	v, ok := s.str()
	return string(v), ok
}

// digits reads a positive integer of at most 18 digits (so that it cannot
// overflow), without a leading zero, followed by something that is not
// part of a number.
func (s *jsonScanner) digits() (int64, bool) {
	s.space()
	var n int64
	start := s.i
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		n = n*10 + int64(s.b[s.i]-'0')
	}
	switch digits := s.i - start; {
	case digits == 0, digits > 18, s.b[start] == '0':
		return 0, false
	case s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E'):
		return 0, false
	}
	return n, true
}
