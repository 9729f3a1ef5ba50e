package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/seckill/seckill/controller"
)

// TestLogHandlerAddsContextAttrs: a record logged with a context carries
// the attributes put in it, in order, after its own; contexts made from the
// same parent do not see each other's; a logger without them is unchanged.
func TestLogHandlerAddsContextAttrs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(controller.LogHandler(slog.NewJSONHandler(&buf, nil))).With("svc", "seckill")
	parent := context.Background()
	for _, a := range []slog.Attr{slog.String("request_id", "r-1"), slog.Int("product", 7), slog.String("user", "u")} {
		// One at a time, so that the slice grows with room to spare.
		parent = controller.WithLogAttrs(parent, a)
	}
	a := controller.WithLogAttrs(parent, slog.String("strategy", "token"))
	b := controller.WithLogAttrs(parent, slog.String("strategy", "redlock"))

	record := func(ctx context.Context) map[string]any {
		t.Helper()
		buf.Reset()
		log.InfoContext(ctx, "m", "own", 1)
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("record %q: %v", buf.String(), err)
		}
		return rec
	}
	for _, tc := range []struct {
		ctx      context.Context
		strategy any
	}{{a, "token"}, {b, "redlock"}, {parent, nil}} {
		rec := record(tc.ctx)
		if rec["request_id"] != "r-1" || rec["product"] != float64(7) || rec["user"] != "u" || rec["strategy"] != tc.strategy ||
			rec["own"] != float64(1) || rec["svc"] != "seckill" {
			t.Errorf("record = %v; want request_id r-1, product 7, user u, strategy %v, own 1, svc seckill", rec, tc.strategy)
		}
	}
	if rec := record(context.Background()); len(rec) != 5 { // time, level, msg, svc, own
		t.Errorf("record without context attributes = %v; want only its own", rec)
	}
}
