package controller

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/seckill/seckill/service"
	"github.com/seckill/seckill/service/failure"
)

// purchaseBodies are bodies of every kind the decoders must agree on: the
// common ones, which take the fast path, and their near misses, most of
// which must not.
var purchaseBodies = []struct {
	body string
	fast bool
}{
	{`{"user_id":"u-42","quantity":1}`, true},
	{`{"user_id":"u-42","quantity":1,"request_id":"r-1"}`, true},
	{`{"request_id":"r-1","quantity":100,"user_id":"u-42"}`, true},
	{" \t\r\n{ \"user_id\" : \"u-42\" ,\n\"quantity\" :\t7 } \n", true},
	{`{"user_id":"😀 Carol","quantity":1}`, true},
	{`{"user_id":"u-42","quantity":1,"request_id":""}`, true},
	{`{"user_id":"","quantity":123456789012345678}`, true},
	{`{"user_id":"u\u002d42","quantity":1}`, false},
	{`{"user_id":"u\"42","quantity":1}`, false},
	{"{\"user_id\":\"u-\xff\",\"quantity\":1}", false},
	{"{\"user_id\":\"u-\xc3\",\"quantity\":1}", false},
	{"{\"user_id\":\"u\t1\",\"quantity\":1}", false},
	{"{\"user_id\":\"u\x7f1\",\"quantity\":1}", true},
	{`{"user_id":"u-42","quantity":1234567890123456789}`, false},
	{`{"user_id":"u-42","quantity":99999999999999999999}`, false},
	{`{"user_id":"u-42","quantity":0}`, false},
	{`{"user_id":"u-42","quantity":01}`, false},
	{`{"user_id":"u-42","quantity":-1}`, false},
	{`{"user_id":"u-42","quantity":-0}`, false},
	{`{"user_id":"u-42","quantity":1.0}`, false},
	{`{"user_id":"u-42","quantity":1e0}`, false},
	{`{"user_id":"u-42","quantity":1E0}`, false},
	{`{"user_id":"u-42","quantity":1x}`, false},
	{`{"user_id":"u-42","quantity":"1"}`, false},
	{`{"user_id":"u-42","quantity":null}`, false},
	{`{"user_id":null,"quantity":1}`, false},
	{`{"user_id":5,"quantity":1}`, false},
	{`{"user_id":"u-42","quantity":1,"request_id":5}`, false},
	{`{"user_id":"u-42","quantity":1,"quantity":100}`, false},
	{`{"user_id":"u-1","user_id":"u-2","quantity":1}`, false},
	{`{"user_id":"u-42","quantity":1,"request_id":"","request_id":""}`, false},
	{`{"user_id":"u-42","quantity":1,"request_id":"r-1","request_id":"r-1"}`, false},
	{`{"User_ID":"u-42","quantity":1}`, false},
	{`{"user_id":"u-42","Quantity":1}`, false},
	{`{"user_id":"u-42","quantity":1,"coupon":"FREE"}`, false},
	{`{"user_id":"u-42","quantity":1,}`, false},
	{`{,"user_id":"u-42","quantity":1}`, false},
	{`{"user_id":"u-42" "quantity":1}`, false},
	{`{"user_id":"u-42":"quantity":1}`, false},
	{`{"user_id""u-42","quantity":1}`, false},
	{`{"user_id":"u-42","quantity":1`, false},
	{`{"user_id":"u-42","quantity":`, false},
	{`{"user_id":"u-42`, false},
	{`{"user_id`, false},
	{`{`, false},
	{`{}`, true},
	{`{} `, true},
	{`{}{}`, false},
	{`{"user_id":"u-42","quantity":1}}`, false},
	{`{"user_id":"u-42","quantity":1}]`, false},
	{`{"user_id":"u-42","quantity":1} x`, false},
	{`{"user_id":"u-42","quantity":1}{"user_id":"u-42","quantity":1}`, false},
	{"\v{\"user_id\":\"u-42\",\"quantity\":1}", false},
	{"{\"user_id\":\"u-42\",\"quantity\":1}\f", false},
	{"\u00a0{\"user_id\":\"u-42\",\"quantity\":1}", false},
	{`[{"user_id":"u-42","quantity":1}]`, false},
	{`"u-42"`, false},
	{`null`, false},
	{``, false},
	{` `, false},
}

// TestDecodePurchaseFastAgrees: on every body of purchaseBodies, the fast
// decoder decodes what decodeJSON decodes, or passes when the case says
// so; and decodePurchase answers what it answered before the fast path,
// message for message.
func TestDecodePurchaseFastAgrees(t *testing.T) {
	for _, tc := range purchaseBodies {
		if _, ok := decodePurchaseFast([]byte(tc.body)); ok != tc.fast {
			t.Errorf("decodePurchaseFast(%q) ok = %t; want %t", tc.body, ok, tc.fast)
		}
		wantFastAgrees(t, []byte(tc.body))
		wantDecodePurchaseAsSlow(t, []byte(tc.body))
	}
}

// FuzzDecodePurchaseFast: for any body, the fast decoder either passes or
// decodes what decodeJSON decodes.
func FuzzDecodePurchaseFast(f *testing.F) {
	for _, tc := range purchaseBodies {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		wantFastAgrees(t, body)
		wantDecodePurchaseAsSlow(t, body)
	})
}

// wantFastAgrees fails if decodePurchaseFast decodes body to anything but
// what decodePurchaseSlow decodes it to, or decodes a body it refuses.
func wantFastAgrees(t *testing.T, body []byte) {
	t.Helper()
	got, ok := decodePurchaseFast(body)
	if !ok {
		return
	}
	want, err := decodePurchaseSlow(body)
	if err != nil || got != want {
		t.Errorf("decodePurchaseFast(%q) = %+v; decodeJSON decodes it to %+v, %v", body, got, want, err)
	}
}

// wantDecodePurchaseAsSlow fails unless decodePurchase answers body as it
// did before the fast path: the purchase, or the error's code and message.
func wantDecodePurchaseAsSlow(t *testing.T, body []byte) {
	t.Helper()
	got, gotErr := decodePurchase(7, body, "", purchaseRules{})
	want, wantErr := decodePurchaseBefore(body)
	if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || failure.CodeOf(gotErr) != failure.CodeOf(wantErr) {
		t.Errorf("decodePurchase(%q) = %+v, %v; before the fast path %+v, %v", body, got, gotErr, want, wantErr)
	}
}

// decodePurchaseBefore is decodePurchase without a query, as it was before
// the fast path: decodeJSON into purchaseRequest.
func decodePurchaseBefore(body []byte) (service.Purchase, error) {
	var req purchaseRequest
	if err := decodeJSON(body, &req); err != nil {
		return service.Purchase{}, err
	}
	switch {
	case req.UserID == nil:
		return service.Purchase{}, invalidf("user_id is required")
	case req.Quantity == nil:
		return service.Purchase{}, invalidf("quantity is required")
	}
	return service.Purchase{ProductID: 7, UserID: *req.UserID, Quantity: *req.Quantity, RequestID: req.RequestID}, nil
}

// TestReadBodyIntoIsMaxBytesReader: readBodyInto answers what io.ReadAll
// of http.MaxBytesReader answered, for bodies around the limit, read in
// pieces, and cut by errors.
func TestReadBodyIntoIsMaxBytesReader(t *testing.T) {
	broken := errors.New("connection reset")
	for _, size := range []int{0, 1, 512, maxBody - 1, maxBody, maxBody + 1, 2 * maxBody} {
		data := bytes.Repeat([]byte("x"), size)
		for name, r := range map[string]func() io.Reader{
			"whole":         func() io.Reader { return bytes.NewReader(data) },
			"byte by byte":  func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
			"EOF with data": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
			"cut":           func() io.Reader { return io.MultiReader(bytes.NewReader(data), iotest.ErrReader(broken)) },
			"cut with data": func() io.Reader {
				return iotest.DataErrReader(io.MultiReader(bytes.NewReader(data), iotest.ErrReader(broken)))
			},
		} {
			got, gotErr := readBodyInto(r(), make([]byte, 0, maxBody+1))
			want, wantErr := readBodyBefore(r())
			if !bytes.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || failure.CodeOf(gotErr) != failure.CodeOf(wantErr) {
				t.Errorf("%d bytes, %s: readBodyInto = %d bytes, %v; before %d bytes, %v", size, name, len(got), gotErr, len(want), wantErr)
			}
		}
	}
}

// readBodyBefore is readBody as it was: io.ReadAll of http.MaxBytesReader.
func readBodyBefore(r io.Reader) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(r), maxBody))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, apiError(codePayloadTooLarge, fmt.Sprintf("the body may be at most %d bytes", maxBody))
	}
	if err != nil {
		return nil, invalidf("read body: %v", err)
	}
	return body, nil
}

// TestBodyBuffersAreReused: a buffer given back is lent again, empty, with
// room for maxBody+1 bytes.
func TestBodyBuffersAreReused(t *testing.T) {
	bb := newBodyBuffers()
	b := bb.get()
	if len(*b) != 0 || cap(*b) != maxBody+1 {
		t.Fatalf("new buffer: len %d, cap %d; want 0, %d", len(*b), cap(*b), maxBody+1)
	}
	*b = append(*b, strings.Repeat("x", 10)...)
	bb.put(b)
	if again := bb.get(); len(*again) != 0 || cap(*again) != maxBody+1 {
		t.Errorf("buffer lent again: len %d, cap %d; want 0, %d", len(*again), cap(*again), maxBody+1)
	}
}

// BenchmarkDecodePurchase measures decodePurchase on the common body, by
// the fast decoder and by decodeJSON (slow), which it replaces there.
func BenchmarkDecodePurchase(b *testing.B) {
	body := []byte(`{"user_id":"u-42","quantity":1,"request_id":"r-7f3a"}`)
	for _, bc := range []struct {
		name   string
		decode func([]byte) (purchaseBody, error)
	}{
		{"fast", func(body []byte) (purchaseBody, error) {
			if p, ok := decodePurchaseFast(body); ok {
				return p, nil
			}
			return purchaseBody{}, errors.New("not on the fast path")
		}},
		{"slow", decodePurchaseSlow},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.decode(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
