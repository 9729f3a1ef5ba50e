package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seckill/seckill/internal/testkit/apptest"
	"github.com/seckill/seckill/loadtest/report"
)

// failSecondAudit stands in front of a real instance and answers the
// second audit of a product (the one after the run) with the contract's
// 503, as an instance whose database went away does.
func failSecondAudit(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var audits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/audit") && audits.Add(1) == 2 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"the database does not answer"}}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRunCommandAuditFails: a run whose audit fails still prints its table
// and writes its JSON, with the audit marked failed, and exits non-zero.
func TestRunCommandAuditFails(t *testing.T) {
	in := apptest.Start(t, nil)
	front := failSecondAudit(t, in.URL)
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{
		"-url", front, "-admin-token", in.AdminToken, "-strategy", "optimistic", "-stock", "5",
		"-requests", "40", "-concurrency", "4", "-json", jsonPath,
	}, &stdout, &stderr)
	if !errors.Is(err, errFailed) || !strings.Contains(err.Error(), "audit") {
		t.Errorf("run = %v; want FAILED for the audit", err)
	}
	out := stdout.String()
	for _, want := range []string{"STRATEGY", "optimistic", "failed", "BROKEN: audit failed", "503 unavailable"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatalf("-json wrote nothing: %v", err)
	}
	var rep report.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("-json wrote what does not parse: %v", err)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("JSON has %d results; want 1", len(rep.Results))
	}
	res := rep.Results[0]
	if res.Audited || !strings.Contains(res.AuditError, "503") || res.Successes != 5 || res.Requests != 40 {
		t.Errorf("JSON result: audited %t, audit error %q, %d of %d created; want the figures and the audit marked failed",
			res.Audited, res.AuditError, res.Successes, res.Requests)
	}
}
