package controller_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/apptest"
)

// TestReadyzNamesTheDatabase: with the database gone, /readyz answers 503
// naming the database, without the driver's error or any address (the
// route is unauthenticated).
func TestReadyzNamesTheDatabase(t *testing.T) {
	t.Parallel()
	in := apptest.Start(t, nil)
	if r := in.Get(t, "/readyz"); r.Status != http.StatusOK || string(r.Body) != `{"status":"ready"}` {
		t.Fatalf("GET /readyz = %v; want 200 {\"status\":\"ready\"}", r)
	}
	sqlDB, err := in.Stores.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlDB.Close(); err != nil { // as if the server went away
		t.Fatal(err)
	}
	r := in.Get(t, "/readyz")
	var body api.Ready
	if err := json.Unmarshal(r.Body, &body); err != nil || r.Status != http.StatusServiceUnavailable || body.Status != "unavailable" ||
		body.Down != "database" || body.Error == nil || body.Error.Code != "unavailable" || !strings.Contains(body.Error.Message, "database") {
		t.Fatalf("GET /readyz with the database closed = %v; want 503 naming the database as down", r)
	}
	for _, leak := range []string{"sql:", "closed", "127.0.0.1", "tcp", in.Config.MySQLDSN} {
		if strings.Contains(string(r.Body), leak) {
			t.Errorf("GET /readyz body = %s; want no %q in it (driver errors and addresses go to the log)", r.Body, leak)
		}
	}
}
