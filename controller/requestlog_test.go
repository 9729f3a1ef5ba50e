package controller

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestRequestLogAttrs: through requestID, a line logged with the request's
// context carries request_id, and once the purchase is set its product,
// user, strategy and purchase_request_id, in that order, after the line's
// own and before WithLogAttrs'; a second purchase is added after them; the
// answer echoes the ID under X-Request-ID.
func TestRequestLogAttrs(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil)))
	var lines []string
	logLine := func(c *gin.Context) {
		buf.Reset()
		log.InfoContext(WithLogAttrs(c.Request.Context(), slog.String("extra", "x")), "m", "own", 1)
		lines = append(lines, strings.TrimSpace(buf.String()))
	}
	r := gin.New()
	r.Use(requestID())
	r.POST("/buy", func(c *gin.Context) {
		logLine(c)
		setPurchaseLog(c, purchaseLog{product: 7, user: "u-1", strategy: "redlock", requestID: "p-1"})
		logLine(c)
		setPurchaseLog(c, purchaseLog{product: 8, user: "u-2", strategy: "token"})
		logLine(c)
	})
	req := httptest.NewRequest(http.MethodPost, "/buy", nil)
	req.Header.Set(RequestIDHeader, "trace-42")
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)

	if got := w.Header().Values(RequestIDHeader); len(got) != 1 || got[0] != "trace-42" {
		t.Errorf("answer's X-Request-ID = %q; want [trace-42]", got)
	}
	want := []string{
		`"own":1,"request_id":"trace-42","extra":"x"}`,
		`"own":1,"request_id":"trace-42","product":7,"user":"u-1","strategy":"redlock","purchase_request_id":"p-1","extra":"x"}`,
		`"own":1,"request_id":"trace-42","product":7,"user":"u-1","strategy":"redlock","purchase_request_id":"p-1",` +
			`"product":8,"user":"u-2","strategy":"token","extra":"x"}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines; want %d", len(lines), len(want))
	}
	for i, line := range lines {
		if !strings.HasSuffix(line, `"msg":"m",`+want[i]) {
			t.Errorf("line %d = %s; want it to end with %s", i, line, want[i])
		}
	}
}

// TestRequestLogRace: lines logged with a request's context from other
// goroutines while its purchase is set read either no purchase or all of
// it (and, under -race, race with nothing).
func TestRequestLogRace(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil)))
	r := gin.New()
	r.Use(requestID())
	r.GET("/", func(c *gin.Context) {
		ctx := c.Request.Context()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 50 {
					log.InfoContext(ctx, "m")
				}
			})
		}
		setPurchaseLog(c, purchaseLog{product: 7, user: "u-1", strategy: "redlock"})
		wg.Wait()
	})
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))

	for line := range bytes.Lines(buf.Bytes()) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("line %s: %v", line, err)
		}
		_, hasProduct := rec["product"]
		whole := rec["product"] == float64(7) && rec["user"] == "u-1" && rec["strategy"] == "redlock"
		if rec["request_id"] == nil || (hasProduct && !whole) || (!hasProduct && len(rec) != 4) {
			t.Errorf("line %s; want a request_id and either the whole purchase or none of it", line)
		}
	}
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
