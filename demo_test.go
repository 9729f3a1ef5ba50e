package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill/seckill/demo"
)

func noEnv(string) string { return "" }

// checkWidth fails t for every line of text wider than the demo's 100
// columns.
func checkWidth(t *testing.T, what, text string) {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		if w := demo.VisibleWidth(line); w > demo.Width {
			t.Errorf("%s line %d is %d columns wide: %q", what, i+1, w, line)
		}
	}
}

// TestDemoHelp: `seckill demo -h` prints its usage, the flags and the
// scenarios, and succeeds.
func TestDemoHelp(t *testing.T) {
	for _, flag := range []string{"-h", "-help", "--help"} {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"demo", flag}, noEnv, &out); err != nil {
			t.Errorf("run(demo %s) = %v; want nil (exit 0)", flag, err)
		}
		text := out.String()
		for _, want := range append([]string{"usage: seckill demo", "-scenario", "-list", "-web", "-log"}, scenarioNames()...) {
			if !strings.Contains(text, want) {
				t.Errorf("demo %s does not mention %q:\n%s", flag, want, text)
			}
		}
		checkWidth(t, "demo "+flag, text)
	}
}

// TestDemoList: `seckill demo -list` prints one line per scenario, its
// name first, and starts nothing.
func TestDemoList(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"demo", "-list"}, noEnv, &out); err != nil {
		t.Fatalf("run(demo -list) = %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	names := scenarioNames()
	if len(lines) != len(names) {
		t.Fatalf("demo -list printed %d lines; want %d:\n%s", len(lines), len(names), out.String())
	}
	for i, name := range names {
		if f := strings.Fields(lines[i]); len(f) < 3 || f[0] != name {
			t.Errorf("demo -list line %d = %q; want %s, then what it shows", i+1, lines[i], name)
		}
	}
	checkWidth(t, "demo -list", out.String())
}

// TestDemoRejectsBadInput: bad flags, an unknown scenario and a setting
// the demo cannot run with fail before anything starts.
func TestDemoRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-bogus"}, nil, "bogus"},
		{[]string{"extra"}, nil, "extra"},
		{[]string{"-scenario", "sale,nope"}, nil, "nope"},
		{nil, map[string]string{"SECKILL_STRATEGY_OVERRIDE": "false"}, "SECKILL_STRATEGY_OVERRIDE"},
		{nil, map[string]string{"SECKILL_LOCK_TTL": "soon"}, "SECKILL_LOCK_TTL"},
	} {
		var out bytes.Buffer
		args := append([]string{"demo", "-log", filepath.Join(t.TempDir(), "demo.log")}, tc.args...)
		err := run(t.Context(), args, func(k string) string { return tc.env[k] }, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) with %v = %v; want an error naming %s", args, tc.env, err, tc.want)
		}
		if strings.Contains(out.String(), "seckill demo:") {
			t.Errorf("run(%q) started the scenarios before refusing:\n%s", args, out.String())
		}
	}
}

// TestDemoScenario plays one scenario as `seckill demo -scenario` does:
// its table is printed within 100 columns, the instances' logs go to a
// file of the run's own, named on the screen, and not to the screen, and
// it exits 0.
func TestDemoScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("plays a scenario")
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"demo", "-scenario", "setnx-clock"}, noEnv, &out); err != nil {
		t.Fatalf("run(demo -scenario setnx-clock) = %v\n%s", err, out.String())
	}
	text := out.String()
	named := regexp.MustCompile(`The instances' logs: (\S+)\n`).FindAllStringSubmatch(text, -1)
	if len(named) != 2 || named[0][1] != named[1][1] {
		t.Fatalf("demo output names its log %q; want one file, named at the start and at the end:\n%s", named, text)
	}
	logPath := named[0][1]
	t.Cleanup(func() {
		if err := os.Remove(logPath); err != nil {
			t.Errorf("remove the demo's log: %v", err)
		}
	})
	if dir, name := filepath.Split(logPath); filepath.Clean(dir) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(name, "seckill-demo-") || name == "seckill-demo.log" {
		t.Errorf("the demo's log is %s; want a file of the run's own in %s", logPath, os.TempDir())
	}
	for _, want := range []string{"SETNX AND A CLOCK", "OVERSOLD: B took A's live lock", "All as the articles say", logPath} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output has no %q:\n%s", want, text)
		}
	}
	for _, bad := range []string{"level=", "time=", "go-redis", "THE SALE"} {
		if strings.Contains(text, bad) {
			t.Errorf("demo output has %q:\n%s", bad, text)
		}
	}
	checkWidth(t, "demo -scenario setnx-clock", text)
	logs, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(logs), "lease expired before unlock") {
		t.Errorf("the log file has %d bytes (%v); want the instances' warning that A's lease was gone", len(logs), err)
	}
}

func scenarioNames() []string {
	var names []string
	for _, sc := range demo.Scenarios() {
		names = append(names, sc.Name)
	}
	return names
}
