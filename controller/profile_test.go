package controller_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill/seckill/controller"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testkit/apptest"
)

// serveOnce sends one request to h and returns its answer.
func serveOnce(h http.Handler, method, path string, header map[string]string) apptest.Response {
	e := newExchange(method, path)
	for k, v := range header {
		e.req.Header.Set(k, v)
	}
	e.serve(h, nil)
	return apptest.Response{Method: method, Path: path, Status: e.status, Header: e.header.Clone(), Body: bytes.Clone(e.out.Bytes())}
}

// TestProfilesNeedTheToken: Go's profiles are served by the router under
// /debug/pprof/, and only to a request that carries the admin token; any
// other gets 401 with the contract's error body.
func TestProfilesNeedTheToken(t *testing.T) {
	t.Parallel()
	r := newRouted(t, app.NewLogger(io.Discard, "text"), nil, controller.Options{})
	admin := map[string]string{"Authorization": "Bearer " + r.token}
	paths := []struct{ method, path, want string }{
		{http.MethodGet, "/debug/pprof/", "goroutine"},
		{http.MethodGet, "/debug/pprof/heap?debug=1", "heap profile"},
		{http.MethodGet, "/debug/pprof/goroutine?debug=1", "goroutine profile"},
		{http.MethodGet, "/debug/pprof/cmdline", "controller.test"},
		{http.MethodPost, "/debug/pprof/symbol", "num_symbols"},
	}
	for _, p := range paths {
		what := p.method + " " + p.path
		for _, header := range []map[string]string{nil, {"Authorization": "Bearer not-" + r.token}, {"Authorization": r.token}} {
			apptest.WantError(t, what+" with Authorization "+header["Authorization"], serveOnce(r, p.method, p.path, header),
				http.StatusUnauthorized, "unauthorized")
		}
		res := serveOnce(r, p.method, p.path, admin)
		if res.Status != http.StatusOK || !strings.Contains(string(res.Body), p.want) {
			t.Errorf("%s with the admin token = %d %.200q; want 200 containing %q", what, res.Status, res.Body, p.want)
		}
	}
	res := serveOnce(r, http.MethodGet, "/debug/pprof/no-such-profile", admin)
	if res.Status != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/no-such-profile with the admin token = %v; want 404", res)
	}
}
