package deploy_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// heartbeatLine is the sign of life make demo gives while go build runs.
var heartbeatLine = regexp.MustCompile(`^demo: still compiling \(\d+ s\)$`)

// demoRun is what a run of make demo did.
type demoRun struct {
	lines []string // stdout and stderr in one stream, in the order written
	bin   string   // DEMO_BIN
	err   error
	// linger is how long the output stayed open after its last write.
	linger time.Duration
}

// stampedOutput keeps what is written and when it last was.
type stampedOutput struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	last time.Time
}

func (o *stampedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = time.Now()
	return o.buf.Write(p)
}

// makeDemo runs make demo DEMO_ARGS=-list DEMO_HEARTBEAT=heartbeat in the
// repository with the program built into a temporary directory and env
// added. A go that waits goDelay seconds before it runs the real one comes
// first on PATH unless goDelay is "": a build that takes at least that long
// on any machine, warm cache or not. An enclosing make's settings (make test
// runs go test) stay out.
func makeDemo(t *testing.T, heartbeat, goDelay string, env ...string) demoRun {
	t.Helper()
	makePath, lookErr := exec.LookPath("make")
	if lookErr != nil {
		t.Skipf("make demo needs make: %v", lookErr)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "seckill")
	cmd := exec.CommandContext(t.Context(), makePath, "--no-print-directory", "demo", "DEMO_ARGS=-list", "DEMO_HEARTBEAT="+heartbeat)
	cmd.Dir = ".."
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "MAKEFLAGS" && name != "MFLAGS" && name != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Built with -race, as make test builds every package's tests: the
	// build reuses their compiled packages instead of compiling the whole
	// program again beside them (a case's own GOFLAGS, later, wins).
	cmd.Env = append(cmd.Env, "DEMO_BIN="+bin, "GOFLAGS=-race -buildvcs=false")
	if goDelay != "" {
		realGo, lookErr := exec.LookPath("go")
		if lookErr != nil {
			t.Fatal(lookErr)
		}
		shim := "#!/bin/sh\nsleep " + goDelay + "\nexec \"$DEMO_TEST_GO\" \"$@\"\n"
		if err := os.WriteFile(filepath.Join(dir, "go"), []byte(shim), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "DEMO_TEST_GO="+realGo, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	cmd.Env = append(cmd.Env, env...)
	var out stampedOutput
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run() // returns once the output is closed: by every process that holds it
	linger := time.Since(out.last)
	b := out.buf.String()
	if strings.Contains(b, "\r") {
		t.Errorf("make demo wrote a carriage return; want plain lines:\n%q", b)
	}
	return demoRun{strings.Split(strings.TrimSuffix(b, "\n"), "\n"), bin, err, linger}
}

// heartbeats returns the indexes of the heartbeat lines.
func heartbeats(lines []string) []int {
	var at []int
	for i, line := range lines {
		if heartbeatLine.MatchString(line) {
			at = append(at, i)
		}
	}
	return at
}

// TestDemoShowsSignsOfLife: make demo, the README's first command, says
// first that it compiles (a first build takes minutes and go build prints
// nothing meanwhile), then every DEMO_HEARTBEAT seconds that it still does,
// in plain lines, stops saying it when the build is done, and runs the demo
// with DEMO_ARGS, exiting with its status.
func TestDemoShowsSignsOfLife(t *testing.T) {
	t.Parallel()
	run := makeDemo(t, "1", "2.5")
	lines, all := run.lines, strings.Join(run.lines, "\n")
	if run.err != nil {
		t.Fatalf("make demo DEMO_ARGS=-list = %v; want exit 0\n%s", run.err, all)
	}
	if !strings.HasPrefix(lines[0], "demo: compiling ") || !strings.Contains(lines[0], "a few minutes") {
		t.Errorf("make demo's first line is %q; want what it does: compiling, and that a first build takes a few minutes\n%s", lines[0], all)
	}
	beats := heartbeats(lines)
	if len(beats) == 0 {
		t.Errorf("make demo over a build of 2.5 s or more at a heartbeat a second never said it still compiles; want a line like \"demo: still compiling (1 s)\"\n%s", all)
	}
	sale := slices.IndexFunc(lines, func(line string) bool { return strings.HasPrefix(line, "sale ") })
	switch {
	case sale < 0:
		t.Errorf("make demo DEMO_ARGS=-list did not list the scenarios (no sale); want the demo's -list after the build\n%s", all)
	case len(beats) > 0 && beats[len(beats)-1] > sale:
		t.Errorf("make demo said it still compiles after the demo started; want the heartbeat stopped with the build\n%s", all)
	}
	if _, err := os.Stat(run.bin); err != nil {
		t.Errorf("make demo with DEMO_BIN=%s: %v; want the program built there", run.bin, err)
	}
}

// TestDemoStopsItsHeartbeatWhenTheBuildFails: when go build fails, make
// demo fails with go's error, and no heartbeat comes after it.
func TestDemoStopsItsHeartbeatWhenTheBuildFails(t *testing.T) {
	t.Parallel()
	run := makeDemo(t, "1", "2.5", "GOFLAGS=-nosuchflag")
	lines, all := run.lines, strings.Join(run.lines, "\n")
	if ee := (*exec.ExitError)(nil); !errors.As(run.err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("make demo with a go build that fails = %v; want a non-zero exit\n%s", run.err, all)
	}
	goErr := slices.IndexFunc(lines, func(line string) bool { return strings.Contains(line, "unknown flag -nosuchflag") })
	beats := heartbeats(lines)
	switch {
	case goErr < 0:
		t.Errorf("make demo with a go build that fails does not show go's error (unknown flag -nosuchflag)\n%s", all)
	case len(beats) == 0 || beats[0] > goErr:
		t.Errorf("make demo over a build of 2.5 s at a heartbeat a second said nothing before go's error; want a heartbeat\n%s", all)
	case beats[len(beats)-1] > goErr:
		t.Errorf("make demo said it still compiles after go build failed; want the heartbeat stopped with the build\n%s", all)
	}
	if slices.ContainsFunc(lines, func(line string) bool { return strings.HasPrefix(line, "sale ") }) {
		t.Errorf("make demo ran the demo after its build failed\n%s", all)
	}
	if _, err := os.Stat(run.bin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("make demo with a failed build left %s (%v); want nothing", run.bin, err)
	}
}

// TestDemoEndsWithItsBuild: what the heartbeat leaves running when it is
// stopped (its sleep) holds no pipe open, and it is stopped before the demo
// starts, so that make demo | tee ends when make demo does, not up to a
// heartbeat later, whether the build failed or the demo ran.
func TestDemoEndsWithItsBuild(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  []string
	}{
		{"build fails", []string{"GOFLAGS=-nosuchflag"}},
		{"demo runs", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			run := makeDemo(t, "60", "", c.env...)
			if (run.err == nil) != (c.env == nil) {
				t.Fatalf("make demo = %v\n%s", run.err, strings.Join(run.lines, "\n"))
			}
			if run.linger > 30*time.Second {
				t.Errorf("make demo's output stayed open %v after its last line, at a heartbeat every 60 s; want it closed when make demo ends\n%s",
					run.linger.Round(time.Second), strings.Join(run.lines, "\n"))
			}
		})
	}
}
