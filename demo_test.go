package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDemo runs `seckill demo` as a workshop attendee would, on the
// embedded stores with nothing set, and reads its tables: none oversells,
// every safe strategy holds, and the lease overrun oversells without
// fencing and is fenced off with it.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo runs a sale per strategy")
	}
	report := filepath.Join(t.TempDir(), "demo.html")
	var out bytes.Buffer
	noEnv := func(string) string { return "" }
	if err := run(t.Context(), []string{"demo", "-report", report}, noEnv, &out); err != nil {
		t.Fatalf("run(demo) = %v\n%s", err, out.String())
	}
	text := out.String()
	row := func(strategy, rest string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^` + strategy + `\s+` + rest)
	}
	sale := text[strings.Index(text, "THE SALE"):strings.Index(text, "LEASE OVERRUN")]
	overrun := text[strings.Index(text, "LEASE OVERRUN"):]
	checks := []struct {
		in   string
		want *regexp.Regexp
	}{
		{sale, row("none", `.*\s+no\s+\d+\s+\d+\s+-\d+\s+[1-9]\d*\s+oversold, as expected$`)},
		{sale, row("token", `.*\s+yes\s+49\s+49\s+0\s+0\s+held$`)},
		{sale, row("redlock", `.*\s+yes\s+49\s+49\s+0\s+0\s+held$`)},
		{sale, row("pessimistic", `.*\s+yes\s+49\s+49\s+0\s+0\s+held$`)},
		{sale, row("optimistic", `.*\s+yes\s+49\s+49\s+0\s+0\s+held$`)},
		{overrun, row("setnx", `\s+off\s+201 created\s+201 created\s+-1\s+1\s+OVERSOLD`)},
		{overrun, row("token", `\s+off\s+201 created\s+201 created\s+-1\s+1\s+OVERSOLD`)},
		{overrun, row("redlock", `\s+off\s+201 created\s+201 created\s+-1\s+1\s+OVERSOLD`)},
		{overrun, row("setnx", `\s+on\s+503 lock_lost\s+201 created\s+0\s+0\s+held: A fenced off$`)},
		{overrun, row("token", `\s+on\s+503 lock_lost\s+201 created\s+0\s+0\s+held: A fenced off$`)},
		{overrun, row("redlock", `\s+on\s+503 lock_lost\s+201 created\s+0\s+0\s+held: A fenced off$`)},
	}
	for _, c := range checks {
		if !c.want.MatchString(c.in) {
			t.Errorf("demo output has no line matching %s", c.want)
		}
	}
	if !strings.Contains(text, "running on embedded stores") {
		t.Errorf("demo output does not say it runs on embedded stores")
	}
	if !strings.Contains(text, "Every safe strategy held") {
		t.Errorf("demo output does not conclude that every safe strategy held")
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", text)
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("demo -report wrote nothing: %v", err)
	}
	for _, want := range []string{"<svg", "redlock", "optimistic"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("demo report has no %q", want)
		}
	}
}

// TestDemoRejectsBadFlags checks that the demo's own flags are validated
// before anything starts.
func TestDemoRejectsBadFlags(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, args := range [][]string{
		{"-stock", "0"},
		{"-requests", "0"},
		{"-concurrency", "-1"},
		{"-hold", "11s"},
		{"-bogus"},
		{"extra"},
	} {
		var out bytes.Buffer
		if err := run(t.Context(), append([]string{"demo"}, args...), noEnv, &out); err == nil {
			t.Errorf("run(demo %v) = nil; want an error", args)
		}
		if strings.Contains(out.String(), "running on embedded stores") {
			t.Errorf("run(demo %v) opened the stores before rejecting its flags", args)
		}
	}
}
