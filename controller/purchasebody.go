package controller

import (
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

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
