package controller

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/api"
)

// TestRequestsAreTheAPIShapes: each body the server decodes through
// pointers of its own has the fields of its api type, in order, with the
// same JSON names and the same types behind the pointers, so that the
// server reads what a client of package api sends.
func TestRequestsAreTheAPIShapes(t *testing.T) {
	for _, tc := range []struct{ server, api any }{
		{purchaseRequest{}, api.Purchase{}},
		{createProductRequest{}, api.NewProduct{}},
		{setStockRequest{}, api.SetStock{}},
		{orderActionRequest{}, api.OrderAction{}},
	} {
		st, at := reflect.TypeOf(tc.server), reflect.TypeOf(tc.api)
		if st.NumField() != at.NumField() {
			t.Errorf("%v has %d fields; %v has %d", st, st.NumField(), at, at.NumField())
			continue
		}
		for i := range st.NumField() {
			sf, af := st.Field(i), at.Field(i)
			typ := sf.Type
			if typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
			if sf.Name != af.Name || jsonName(sf) != jsonName(af) || typ != af.Type {
				t.Errorf("%v field %d is %s %v %q; %v's is %s %v %q", st, i, sf.Name, sf.Type, jsonName(sf),
					at, af.Name, af.Type, jsonName(af))
			}
		}
	}
}

// jsonName is the name a struct field has in JSON.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// TestProbeAndPanicBodies: /healthz, /readyz while draining and a panic
// answer the api shapes, byte for byte what the server has always sent
// (the keys of /readyz in alphabetical order).
func TestProbeAndPanicBodies(t *testing.T) {
	drain := &Drain{}
	drain.Start()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.DiscardHandler)
	r := NewRouter(nil, log, Options{Registerer: reg, Gatherer: reg, Drain: drain})
	r.GET("/panic", func(*gin.Context) { panic("a bug") })
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/healthz", http.StatusOK, `{"status":"ok"}`},
		{"/readyz", http.StatusServiceUnavailable,
			`{"down":"instance","error":{"code":"unavailable","message":"the instance is shutting down"},"status":"unavailable"}`},
		{"/panic", http.StatusInternalServerError, `{"error":{"code":"internal","message":"internal error"}}`},
	} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if w.Code != tc.status || w.Body.String() != tc.body {
			t.Errorf("GET %s = %d %s; want %d %s", tc.path, w.Code, w.Body, tc.status, tc.body)
		}
	}
}
