package apptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/config"
	"github.com/seckill/seckill/internal/childproc"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// RunFunc is the program's run function (main.run). Only the main
// package's tests can name it; they hand it to Run.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error

// Program is one run of the whole program, as Run or Exec started it, with
// env over the defaults Start has, but for Redis: nodes of its own
// (Nodes), since the program makes its keys under the default prefix.
type Program struct {
	Service
	// Nodes are the Redis nodes the harness started for the program; none
	// when env named SECKILL_REDIS_ADDRS. Its other instances share them.
	Nodes []*testenv.Redis
	// Out is what the program has printed so far: run's stdout, or the
	// process's stdout and stderr.
	Out *testenv.Buffer

	env    map[string]string // the whole environment it was given
	run    RunFunc           // nil: the binary
	cancel context.CancelFunc
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how it ended, once exited is closed
}

// errRunning is Wait's error when the program is still running.
var errRunning = errors.New("apptest: the program is still running")

// Run runs run in a goroutine, as main does, with env over the defaults as
// its whole environment (and no arguments), and waits until it answers
// /healthz. When t ends, a run still going is stopped as Stop does and how
// it ended is reported.
func Run(t testing.TB, run RunFunc, env map[string]string) *Program {
	t.Helper()
	return startProgram(t, run, env)
}

// Exec starts the program's binary (built once per test binary: the
// package's TestMain calls Main) with env over the defaults on top of the
// test's environment, less its SECKILL_ variables, and waits until it
// answers /healthz. When t ends, a process still running is killed.
func Exec(t testing.TB, env map[string]string) *Program {
	t.Helper()
	return startProgram(t, nil, env)
}

// startProgram starts the program by run, or as the binary when run is
// nil, with env over the defaults.
func startProgram(t testing.TB, run RunFunc, env map[string]string) *Program {
	t.Helper()
	p := &Program{run: run}
	p.env = withDefaults(t, env, func() string { return anyPort }, func() string { return p.startNodes(t) })
	p.Service = Service{URL: "http://" + p.env["SECKILL_ADDR"], AdminToken: p.env["SECKILL_ADMIN_TOKEN"], keyPrefix: config.DefaultKeyPrefix}
	if addrs := p.env["SECKILL_REDIS_ADDRS"]; addrs != "" {
		p.redisAddrs = strings.Split(addrs, ",")
	}
	p.start(t)
	return p
}

// startNodes starts Redis nodes of the program's own and returns their
// addresses, as SECKILL_REDIS_ADDRS takes them.
func (p *Program) startNodes(t testing.TB) string {
	t.Helper()
	var addrs []string
	p.Nodes, addrs = testenv.StartRedisNodes(t, 3)
	return strings.Join(addrs, ",")
}

// Another starts another instance of the program's sale, the same way, on
// another address: the same database, Redis nodes and admin token.
func (p *Program) Another(t testing.TB) *Program {
	t.Helper()
	return p.AnotherWith(t, nil)
}

// AnotherWith is Another with env on top of the program's environment.
func (p *Program) AnotherWith(t testing.TB, env map[string]string) *Program {
	t.Helper()
	vars := maps.Clone(p.env)
	vars["SECKILL_ADDR"] = anyPort
	if p.AdminToken != "" {
		vars["SECKILL_ADMIN_TOKEN"] = p.AdminToken // the one it made up, once the test read it
	}
	maps.Copy(vars, env)
	q := &Program{Nodes: p.Nodes, env: vars, run: p.run, Service: p.Service}
	q.URL, q.AdminToken = "http://"+vars["SECKILL_ADDR"], vars["SECKILL_ADMIN_TOKEN"]
	q.start(t)
	return q
}

func (p *Program) start(t testing.TB) {
	t.Helper()
	p.Out = &testenv.Buffer{}
	p.exited = make(chan struct{})
	if p.run != nil {
		var ctx context.Context
		ctx, p.cancel = context.WithCancel(context.Background())
		go func() {
			p.err = p.run(ctx, nil, func(k string) string { return p.env[k] }, p.Out)
			close(p.exited)
		}()
		t.Cleanup(func() {
			if err := p.Stop(t); err != nil {
				t.Errorf("apptest: run() at cleanup = %v", err)
			}
		})
	} else {
		p.cmd = exec.Command(binary(t))
		p.cmd.Env = environ(p.env)
		p.cmd.Stdout, p.cmd.Stderr = p.Out, p.Out
		childproc.DieWithParent(p.cmd)
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("apptest: start %s: %v", p.cmd.Path, err)
		}
		go func() {
			p.err = p.cmd.Wait()
			close(p.exited)
		}()
		t.Cleanup(p.Kill)
	}
	if strings.HasSuffix(p.env["SECKILL_ADDR"], ":0") {
		p.URL = p.listening(t)
	}
	p.waitHealthy(t)
}

// anyPort is the program's default SECKILL_ADDR: a port the kernel gives
// it as it listens, which nothing can take between a choice and the
// program's listen (a port chosen beforehand could be given meanwhile to
// another process of the tests, a Redis node of their own say).
const anyPort = "127.0.0.1:0"

// listeningLine finds the URL in the program's "seckill listening" line,
// in text or JSON.
var listeningLine = regexp.MustCompile(`seckill listening.*?"?url"?[=:]"?(http://[0-9.:]+)`)

// listening waits until the program says where it listens, and returns
// that URL; it fails t when the program ends first or takes a minute.
func (p *Program) listening(t testing.TB) string {
	t.Helper()
	var url string
	ok := testenv.Until(time.Minute, func() bool {
		if m := listeningLine.FindStringSubmatch(p.Out.String()); m != nil {
			url = m[1]
			return true
		}
		select {
		case <-p.exited:
			t.Fatalf("apptest: the program ended (%v) before it listened; output:\n%s", p.err, p.Out)
		default:
		}
		return false
	})
	if !ok {
		t.Fatalf("apptest: the program did not say where it listens within a minute; output:\n%s", p.Out)
	}
	return url
}

// environ is the test's environment less its SECKILL_ variables, with vars
// on top.
func environ(vars map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// waitHealthy waits until the program answers /healthz with 200, and
// fails t with its output when it exits first or takes a minute.
func (p *Program) waitHealthy(t testing.TB) {
	t.Helper()
	var last error
	healthy := testenv.Until(time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := p.Send(ctx, http.MethodGet, "/healthz", "", nil)
		if last = err; err == nil {
			if r.Status == http.StatusOK {
				return true
			}
			last = fmt.Errorf("status %d", r.Status)
		}
		select {
		case <-p.exited:
			t.Fatalf("apptest: the program ended (%v) before /healthz answered; output:\n%s", p.err, p.Out)
		default:
		}
		return false
	})
	if !healthy {
		t.Fatalf("apptest: GET /healthz never answered 200 (last: %v); output:\n%s", last, p.Out)
	}
}

// Terminate asks the program to stop, as an orchestrator does: SIGTERM
// to the process, the end of run's context. It returns at once; the drain
// begins.
func (p *Program) Terminate() {
	if p.run != nil {
		p.cancel()
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have exited already: Wait says how
}

// Wait waits up to limit for the program to end and returns how it ended:
// nil for run's nil and a process's exit 0. A program still running after
// limit is an error.
func (p *Program) Wait(limit time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	case <-time.After(limit):
		return fmt.Errorf("%w after %v", errRunning, limit)
	}
}

// Stop terminates the program and waits for it, a minute at most (which
// fails t), and returns how it ended: nil after a graceful shutdown.
// Stopping it again returns the same.
func (p *Program) Stop(t testing.TB) error {
	t.Helper()
	p.Terminate()
	err := p.Wait(time.Minute)
	if errors.Is(err, errRunning) {
		t.Fatalf("%v: it did not stop within a minute of its context ending or SIGTERM; output:\n%s", err, p.Out)
	}
	return err
}

// Kill kills the process at once (SIGKILL), as a crash would, and waits
// until it is gone; killing it again is harmless. A program Run started in
// the test's process cannot be killed.
func (p *Program) Kill() {
	if p.run != nil {
		panic("apptest: Kill of a program run in the test's process")
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // gone already is fine: exited says so
	<-p.exited
}

// Signal sends the process sig (SIGSTOP and SIGCONT pause it and let it go
// on, as a frozen VM).
func (p *Program) Signal(sig os.Signal) error {
	if p.run != nil {
		return errors.New("apptest: signal to a program run in the test's process")
	}
	return p.cmd.Process.Signal(sig)
}

// built is the program's binary, which Main's directory holds.
var built struct {
	dir  string
	once sync.Once
	path string
	err  error
}

// Main runs the package's tests and then removes the program's binary,
// which Exec builds on its first call. A package whose tests call Exec
// calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(apptest.Main(m)) }
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "seckill-apptest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "apptest:", err)
		return 1
	}
	built.dir = dir
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "apptest:", err)
	}
	return code
}

// binary returns the program's binary, built on the first call.
func binary(t testing.TB) string {
	t.Helper()
	if built.dir == "" {
		t.Fatal("apptest: Exec builds the program into Main's directory: the package's TestMain must call os.Exit(apptest.Main(m))")
	}
	built.once.Do(func() {
		path := filepath.Join(built.dir, "seckill")
		out, err := exec.Command("go", "build", "-o", path, "github.com/seckill/seckill").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("build the program: %w\n%s", err, out)
			return
		}
		built.path = path
	})
	if built.err != nil {
		t.Fatalf("apptest: %v", built.err)
	}
	return built.path
}
