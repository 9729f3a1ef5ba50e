package history_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/seckill/seckill/history"
)

// FuzzRead: any input is read into lines or refused with a *ParseError
// naming a line, never a panic; what is read writes back into a history
// that reads the same, and checks without a panic.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		`{"product":1,"stock":2,"time_ns":0}`,
		`{"product":1,"stock":2,"time_ns":0}` + "\n" + `{"product":1,"user_id":"a","request_id":"r","quantity":1,"start_ns":1,"end_ns":2,"status":201,"code":"","remaining_stock":1,"order_id":1}`,
		`{"product":1,"user_id":"a","request_id":"r","quantity":1,"start_ns":1,"end_ns":2,"status":0,"code":""}`,
		`{"product":1,"stock":2,"time_ns":0}` + "\n" + `{"product":1,"user_id":"a","request_id":"r","quantity":1,"start_ns":1,"end_ns":2,"status":202,"code":"","remaining_stock":1}`,
		`{"product":1,"user_id":"\u00e9\"","request_id":"r","quantity":2,"start_ns":1,"end_ns":2,"status":409,"code":"sold_out"}`,
		"{not json\n",
		`{"product":-1,"stock":2,"time_ns":0}`,
		"\n\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := history.Read(bytes.NewReader(data))
		if err != nil {
			var pe *history.ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("Read = %v; want a *ParseError naming a line", err)
			}
			return
		}
		var buf bytes.Buffer
		w := history.NewWriter(&buf)
		for _, l := range lines {
			if err := w.Write(l); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		again, err := history.Read(&buf)
		if err != nil || len(again) != len(lines) {
			t.Fatalf("written back, the history reads as %d lines, %v; want %d", len(again), err, len(lines))
		}
		_, _ = history.CheckTimeout(lines, time.Second) // a verdict or an error; never a panic
	})
}
