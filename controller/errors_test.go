package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/service/failure"
)

// errorTexts are codes and messages for the error body: the contract's
// own, and every kind of byte encoding/json escapes or not.
var errorTexts = []string{
	"", "sold_out", "product 7 has 0 left", "internal error",
	"this needs Authorization: Bearer <SECKILL_ADMIN_TOKEN>",
	`body must be one JSON object of the documented shape: jsontext: duplicate object member name "quantity"`,
	`product id "a\b" must be a positive integer`, "a & b", "tab\there", "nl\n", "nul\x00", "del\x7f",
	"ü", "\xff", "\u2028", "~ !#$%'()*+,-./:;=?@[]^_`{|}",
}

// TestErrorBodyIsEncodingJSONs: writeErrorBody answers what
// c.AbortWithStatusJSON of api.ErrorBody answers, byte for byte, headers,
// status and abort included, whatever the code and message.
func TestErrorBodyIsEncodingJSONs(t *testing.T) {
	gin.SetMode(gin.ReleaseMode) // as NewRouter: no debug warnings
	plain := 0
	for _, code := range errorTexts {
		for _, msg := range errorTexts {
			if _, ok := appendErrorBody(nil, code, msg); ok {
				plain++
			}
			wantErrorBodyAsGins(t, http.StatusConflict, code, msg)
		}
	}
	// Every byte alone, in the message and in the code.
	for b := range 256 {
		s := "a" + string([]byte{byte(b)}) + "z"
		wantErrorBodyAsGins(t, http.StatusConflict, "sold_out", s)
		wantErrorBodyAsGins(t, http.StatusConflict, s, "sold out")
	}
	if plain == 0 {
		t.Errorf("no code and message of errorTexts was put together from the body's parts")
	}
}

// FuzzErrorBody: appendErrorBody, when it answers, answers what
// encoding/json encodes.
func FuzzErrorBody(f *testing.F) {
	for _, s := range errorTexts {
		f.Add("sold_out", s)
	}
	f.Fuzz(func(t *testing.T, code, msg string) {
		got, ok := appendErrorBody(nil, code, msg)
		if !ok {
			return
		}
		want, err := htmlUnescapedJSON(code, msg)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("appendErrorBody(%q, %q) = %s; encoding/json: %s, %v", code, msg, got, want, err)
		}
	})
}

// htmlUnescapedJSON is api.ErrorBody of code and msg as encoding/json
// encodes it when told not to escape <, > and & for HTML.
func htmlUnescapedJSON(code, msg string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(api.ErrorBody{Error: api.Error{Code: code, Message: msg}})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// wantErrorBodyAsGins fails unless writeErrorBody answers what
// AbortWithStatusJSON does (status, headers, aborted), with the body
// encoding/json makes without escaping for HTML.
func wantErrorBodyAsGins(t *testing.T, status int, code, msg string) {
	t.Helper()
	answer := func(write func(*gin.Context)) (*httptest.ResponseRecorder, bool) {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Header(RequestIDHeader, "r-1")
		write(c)
		return w, c.IsAborted()
	}
	got, gotAborted := answer(func(c *gin.Context) { writeErrorBody(c, status, code, msg) })
	want, wantAborted := answer(func(c *gin.Context) {
		c.AbortWithStatusJSON(status, api.ErrorBody{Error: api.Error{Code: code, Message: msg}})
	})
	body, err := htmlUnescapedJSON(code, msg)
	if err != nil {
		t.Fatalf("encode %q, %q: %v", code, msg, err)
	}
	if got.Code != want.Code || got.Body.String() != string(body) || !maps.EqualFunc(got.Header(), want.Header(), equalStrings) ||
		gotAborted != wantAborted {
		t.Errorf("writeErrorBody(%q, %q) = %d %v %s, aborted %t; want AbortWithStatusJSON's %d %v, aborted %t, and the body %s", code, msg,
			got.Code, got.Header(), got.Body, gotAborted, want.Code, want.Header(), wantAborted, body)
	}
	if strings.Contains(got.Body.String(), `\u003c`) {
		t.Errorf("writeErrorBody(%q, %q) = %s: < escaped for HTML", code, msg, got.Body)
	}
}

func equalStrings(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// TestCodeAndMessage: codeAndMessage answers failure.CodeOf and
// failure.MessageOf, for errors that carry a code, wrapped or not, and
// errors that do not.
func TestCodeAndMessage(t *testing.T) {
	for _, err := range []error{
		failure.ErrSoldOut,
		apiError(codeRateLimited, "too many"),
		fmt.Errorf("purchase 7: %w", &failure.Error{Code: failure.CodeUnavailable, Message: "down", Err: errors.New("dial")}),
		errors.Join(errors.New("first"), failure.ErrLockLost),
		errors.New("a bug"),
		fmt.Errorf("read: %w", errors.New("reset")),
	} {
		code, msg := codeAndMessage(err)
		if code != failure.CodeOf(err) || msg != failure.MessageOf(err) {
			t.Errorf("codeAndMessage(%v) = %q, %q; want %q, %q", err, code, msg, failure.CodeOf(err), failure.MessageOf(err))
		}
	}
}
