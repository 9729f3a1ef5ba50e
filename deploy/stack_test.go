package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/buyer"
	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

const stackScript = "../scripts/stack.sh"

// stackRun is one stack of scripts/stack.sh, its state in a directory of
// the test's own, on ports the test chose.
type stackRun struct {
	dir, httpPort, promPort string
	env                     []string
}

// newStack prepares a stack for t (extra is added to its environment) and
// makes sure that, whatever happens, it is down when t ends.
func newStack(t *testing.T, extra ...string) *stackRun {
	t.Helper()
	s := &stackRun{dir: t.TempDir(), httpPort: stackPort(t), promPort: stackPort(t)}
	for s.promPort == s.httpPort {
		s.promPort = stackPort(t)
	}
	for _, kv := range os.Environ() {
		// The stack's instances get only what the test says.
		if !strings.HasPrefix(kv, "SECKILL_") && !strings.HasPrefix(kv, "STACK_") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env, "STACK_DIR="+s.dir, "STACK_HTTP_PORT="+s.httpPort,
		"STACK_PROMETHEUS_PORT="+s.promPort)
	s.env = append(s.env, extra...)
	t.Cleanup(func() {
		if out, err := s.run("down"); err != nil {
			t.Errorf("stack.sh down = %v\n%s", err, out)
		}
	})
	return s
}

// stackPort returns a free port below the kernel's range for outgoing
// connections, where none of those can take it before the stack binds it.
func stackPort(t *testing.T) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	if low <= 11000 {
		t.Fatalf("ip_local_port_range starts at %d: no room below it for the stack's ports", low)
	}
	for range 100 {
		port := strconv.Itoa(10000 + rand.IntN(low-10000))
		if l, err := net.Listen("tcp", "127.0.0.1:"+port); err == nil {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			return port
		}
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// run runs stack.sh with a command and returns its output.
func (s *stackRun) run(command string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, stackScript, command)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("stack.sh %s: %w", command, err)
	}
	return string(out), nil
}

// status runs stack.sh status and returns the address of every part it
// says runs.
func (s *stackRun) status(t *testing.T) (map[string]string, string) {
	t.Helper()
	out, err := s.run("status")
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%v\n%s", err, out)
	}
	parts := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\S+)\s+runs\s+pid \d+, (\S+)$`).FindAllStringSubmatch(out, -1) {
		parts[m[1]] = m[2]
	}
	return parts, out
}

// processesIn returns the processes (zombies aside) whose command line
// names dir or whose working directory is in it.
func processesIn(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		stat, err := os.ReadFile(p + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
			continue
		}
		cmdline, _ := os.ReadFile(p + "/cmdline") // gone meanwhile: empty
		cwd, _ := os.Readlink(p + "/cwd")
		if bytes.Contains(cmdline, []byte(dir)) || cwd == dir || strings.HasPrefix(cwd, dir+"/") {
			out = append(out, fmt.Sprintf("%s %s", filepath.Base(p), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// listener is a process with a listening TCP socket.
type listener struct{ pid, cmdline, cwd string }

func (l listener) String() string { return l.pid + " " + l.cmdline }

func (l listener) inDir(dir string) bool {
	return strings.Contains(l.cmdline, dir) || l.cwd == dir || strings.HasPrefix(l.cwd, dir+"/")
}

// listenersOn returns the processes listening on 127.0.0.1:port or any
// address's port, as /proc tells them.
func listenersOn(t *testing.T, port string) []listener {
	t.Helper()
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue // no IPv6
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st ... uid timeout inode
			f := strings.Fields(line)
			if len(f) > 9 && f[3] == "0A" && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", n)) {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	var out []listener
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*") // a process gone meanwhile is skipped
	seen := map[string]bool{}
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err != nil || !inodes[target] {
			continue
		}
		p := filepath.Dir(filepath.Dir(fd))
		if seen[p] {
			continue
		}
		seen[p] = true
		cmdline, _ := os.ReadFile(p + "/cmdline")
		cwd, _ := os.Readlink(p + "/cwd")
		out = append(out, listener{filepath.Base(p), string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})), cwd})
	}
	return out
}

// wantDown fails t unless nothing of the stack runs and neither of its ports
// answers for a process of the stack. Other tests pick free ports in the
// same range, so a port freed by down may be someone else's a moment later:
// an answer counts only when its listener runs in the stack's directory or
// cannot be named.
func (s *stackRun) wantDown(t *testing.T) {
	t.Helper()
	if left := processesIn(t, s.dir); len(left) > 0 {
		t.Errorf("processes of the stack still run:\n%s", strings.Join(left, "\n"))
	}
	for _, port := range []string{s.httpPort, s.promPort} {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err != nil {
			continue
		}
		c.Close()
		owners := listenersOn(t, port)
		ours := slices.ContainsFunc(owners, func(o listener) bool { return o.inDir(s.dir) })
		if ours || len(owners) == 0 {
			t.Errorf("port %s still answers after down; listeners: %v", port, owners)
		} else {
			t.Logf("port %s answers after down for another process: %v", port, owners)
		}
	}
	if parts, out := s.status(t); len(parts) > 0 {
		t.Errorf("stack.sh status after down:\n%s", out)
	}
}

// promQuery is Prometheus' answer to an instant query.
type promQuery struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// query asks Prometheus for expr now.
func (s *stackRun) query(t *testing.T, expr string) promQuery {
	t.Helper()
	var q promQuery
	s.promGet(t, "/api/v1/query?query="+url.QueryEscape(expr), &q)
	return q
}

func (s *stackRun) promGet(t *testing.T, path string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+s.promPort+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("prometheus: GET %s: %v", path, err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("prometheus: GET %s (%d): %v", path, res.StatusCode, err)
	}
}

// sum adds up the values of a query's result, by the value of label.
func (q promQuery) sum(label string) map[string]float64 {
	out := map[string]float64{}
	for _, r := range q.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err == nil {
			out[r.Metric[label]] += v
		}
	}
	return out
}

// TestStack builds the service once, with -race, and runs scripts/stack.sh
// with it: first a stack that cannot start, then one that does.
func TestStack(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "seckill")
	build := exec.CommandContext(t.Context(), "go", "build", "-race", "-o", bin, "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -race: %v\n%s", err, out)
	}
	t.Run("names the part that fails", func(t *testing.T) {
		stackNamesThePartThatFails(t, "STACK_SECKILL_BIN="+bin)
	})
	t.Run("up, a sale, down", func(t *testing.T) {
		stackUpSaleDown(t, "STACK_SECKILL_BIN="+bin)
	})
	t.Run("reserve on a Redis Cluster, buyers' tokens", func(t *testing.T) {
		stackReserveCluster(t, "STACK_SECKILL_BIN="+bin, "STACK_RESERVE_CLUSTER=1", "STACK_BUYER_AUTH=jwt", "SECKILL_LOCK=reserve")
	})
}

// stackReserveCluster runs the stack with STACK_RESERVE_CLUSTER=1 and
// STACK_BUYER_AUTH=jwt, the instances under reserve: six cluster nodes run
// beside the rest; a purchase without a token is 401; a reserve sale
// through nginx, each buyer with a token signed by the key the stack made,
// is exact and its keys are on the cluster, not on the first Redis node;
// down stops the cluster's nodes too.
func stackReserveCluster(t *testing.T, env ...string) {
	s := newStack(t, env...)
	out, err := s.run("up")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	keyFile := filepath.Join(s.dir, "buyer", "key.pem")
	if !strings.Contains(out, "-buyer-key "+keyFile+" -token") {
		t.Errorf("stack.sh up under STACK_BUYER_AUTH=jwt does not say how to make a buyer's token with %s:\n%s", keyFile, out)
	}
	key, err := buyer.ReadPrivateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := buyer.NewSigner(key, "")
	if err != nil {
		t.Fatal(err)
	}
	parts, statusOut := s.status(t)
	for _, part := range []string{"rcl1", "rcl2", "rcl3", "rcl4", "rcl5", "rcl6", "seckill1", "seckill2", "nginx"} {
		if parts[part] == "" {
			t.Fatalf("stack.sh status does not say %s runs:\n%s", part, statusOut)
		}
	}
	token, err := os.ReadFile(filepath.Join(s.dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	c := &client.Client{BaseURL: "http://127.0.0.1:" + s.httpPort, AdminToken: strings.TrimSpace(string(token)), HTTP: client.NewHTTPClient(0)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const stock, buyers = 20, 50
	prod, err := c.CreateProduct(ctx, "stack-cluster", stock)
	if err != nil {
		t.Fatal(err)
	}
	anonymous := &client.Client{BaseURL: c.BaseURL, HTTP: c.HTTP}
	var e *client.Error
	if _, err := anonymous.Purchase(ctx, prod.ID, client.Purchase{UserID: "u-0", Quantity: 1}, client.Override{}); !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		t.Fatalf("a purchase without a token under STACK_BUYER_AUTH=jwt: %v; want 401 unauthenticated", err)
	}
	var reserved, soldOut atomic.Int64
	var g errgroup.Group
	for i := range buyers {
		g.Go(func() error {
			user := fmt.Sprintf("u-%d", i)
			token, err := signer.BuyerToken(user, "seckill", "", time.Now(), time.Minute)
			if err != nil {
				return err
			}
			as := &client.Client{BaseURL: c.BaseURL, AdminToken: token, HTTP: c.HTTP} // the buyer's token as the bearer
			r, err := as.Purchase(ctx, prod.ID, client.Purchase{UserID: user, Quantity: 1}, client.Override{})
			var e *client.Error
			switch {
			case err == nil && r.Status == http.StatusAccepted:
				reserved.Add(1)
			case errors.As(err, &e) && e.Code == "sold_out":
				soldOut.Add(1)
			default:
				return fmt.Errorf("buyer u-%d: %+v, %w", i, r, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if reserved.Load() != stock || soldOut.Load() != buyers-stock {
		t.Errorf("%d buyers of %d units under reserve: %d reserved, %d sold out; want %d and %d",
			buyers, stock, reserved.Load(), soldOut.Load(), stock, buyers-stock)
	}
	var a client.Audit
	deadline := time.Now().Add(30 * time.Second)
	for a.UnitsSold < stock && time.Now().Before(deadline) {
		if a, err = c.Audit(ctx, prod.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !a.Consistent || a.UnitsSold != stock || a.Stock != 0 {
		t.Errorf("the audit after the reserve sale = %+v; want %d sold, 0 left, consistent", a, stock)
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{parts["rcl1"]}})
	defer cl.Close()
	var onCluster atomic.Int64
	err = cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := m.Keys(ctx, "*reserve:{*}:p:*").Result()
		onCluster.Add(int64(len(keys))) // one master holds the product's keys
		return err
	})
	if err != nil || onCluster.Load() == 0 {
		t.Errorf("reserve's keys on the cluster: %d, %v; want the product's", onCluster.Load(), err)
	}
	node := redis.NewClient(&redis.Options{Addr: parts["redis1"]})
	defer node.Close()
	if keys, err := node.Keys(ctx, "*reserve:*").Result(); err != nil || len(keys) > 0 {
		t.Errorf("reserve's keys on redis1: %q, %v; want none", keys, err)
	}
	if out, err := s.run("down"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.wantDown(t)
}

// stackUpSaleDown runs scripts/stack.sh up as a newcomer would and holds
// the stack to compose's topology: a sale through nginx is exact and lands
// on both instances, Prometheus scrapes both, every query of the Grafana
// dashboard is valid PromQL that returns data after the sale; down leaves
// nothing running.
func stackUpSaleDown(t *testing.T, env ...string) {
	s := newStack(t, env...)
	out, err := s.run("up")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	token, err := os.ReadFile(filepath.Join(s.dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(token))
	if strings.Contains(out, "( ") || strings.Contains(out, " )") {
		t.Errorf("stack.sh up printed an empty slot in parentheses:\n%s", out)
	}
	if tok == "" || !strings.Contains(out, "admin token:      "+tok) {
		t.Errorf("stack.sh up made up the admin token %q but did not print it:\n%s", tok, out)
	}
	// up returned once every part answers, Prometheus's scrapes included:
	// both instances are up there now, with no wait.
	if up := s.query(t, `up{job="seckill"}`).sum("instance"); len(up) != 2 || slices.Contains(slices.Collect(maps.Values(up)), 0) {
		t.Errorf("right after up, Prometheus has up{job=\"seckill\"} = %v; want both instances at 1", up)
	}
	parts, statusOut := s.status(t)
	want := []string{"mariadb", "nginx", "prometheus", "redis1", "redis2", "redis3", "seckill1", "seckill2"}
	if got := sortedKeys(parts); !slices.Equal(got, want) {
		t.Fatalf("stack.sh status after up says %q run; want %q:\n%s", got, want, statusOut)
	}
	if parts["nginx"] != "127.0.0.1:"+s.httpPort || parts["prometheus"] != "127.0.0.1:"+s.promPort {
		t.Errorf("nginx on %s, prometheus on %s; want STACK_HTTP_PORT %s and STACK_PROMETHEUS_PORT %s",
			parts["nginx"], parts["prometheus"], s.httpPort, s.promPort)
	}
	// up again changes nothing.
	if out, err := s.run("up"); err != nil {
		t.Fatalf("second up: %v\n%s", err, out)
	}
	if again, _ := s.status(t); !maps.Equal(again, parts) {
		t.Errorf("after a second up the parts run at %v; want %v, as before", again, parts)
	}

	s.sale(t, tok)
	instances := []string{parts["seckill1"], parts["seckill2"]}
	slices.Sort(instances)
	s.wantScraped(t, instances)
	s.wantDashboardAnswered(t)

	if out, err := s.run("down"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s.wantDown(t)
	for _, part := range []string{"seckill1", "seckill2"} {
		b, err := os.ReadFile(filepath.Join(s.dir, "log", part+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("DATA RACE")) {
			t.Errorf("%s's log reports a data race:\n%s", part, b)
		}
	}
}

// sale sells 40 units to 200 buyers at once through nginx and wants it
// exact: 40 sold, 160 sold out, the audit consistent.
func (s *stackRun) sale(t *testing.T, token string) {
	t.Helper()
	const stock, buyers = 40, 200
	c := &client.Client{BaseURL: "http://127.0.0.1:" + s.httpPort, AdminToken: token, HTTP: client.NewHTTPClient(0)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod, err := c.CreateProduct(ctx, "stack-phone", stock)
	if err != nil {
		t.Fatal(err)
	}
	var sold, soldOut atomic.Int64
	var g errgroup.Group
	for i := range buyers {
		g.Go(func() error {
			_, err := c.Buy(ctx, prod.ID, client.Purchase{UserID: fmt.Sprintf("u-%d", i), Quantity: 1}, client.Override{})
			var e *client.Error
			switch {
			case err == nil:
				sold.Add(1)
			case errors.As(err, &e) && e.Code == "sold_out":
				soldOut.Add(1)
			default:
				return fmt.Errorf("buyer u-%d: %w", i, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if sold.Load() != stock || soldOut.Load() != buyers-stock {
		t.Errorf("%d buyers of %d units through nginx: %d sold, %d sold out; want %d and %d",
			buyers, stock, sold.Load(), soldOut.Load(), stock, buyers-stock)
	}
	a, err := c.Audit(ctx, prod.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Held() || a.UnitsSold != stock || a.Stock != 0 || a.Orders != stock {
		t.Errorf("audit after the sale through nginx: %+v; want %d units sold in %d orders, stock 0, consistent", a, stock, stock)
	}
}

// wantScraped waits until Prometheus has both instances up and has seen
// the sale's 200 purchases, on both of them.
func (s *stackRun) wantScraped(t *testing.T, instances []string) {
	t.Helper()
	var last string
	testenv.Eventually(t, 2*time.Minute, "Prometheus to scrape the sale from both instances", func() bool {
		up := s.query(t, `up{job="seckill"}`).sum("instance")
		all := s.query(t, `sum by (instance) (seckill_purchases_total)`).sum("instance")
		ok := s.query(t, `sum(seckill_purchases_total{outcome="ok"})`).sum("")
		last = fmt.Sprintf("up %v, purchases by instance %v, ok %v", up, all, ok)
		return slices.Equal(sortedKeys(up), instances) && up[instances[0]] == 1 && up[instances[1]] == 1 &&
			all[instances[0]] > 0 && all[instances[1]] > 0 && all[instances[0]]+all[instances[1]] == 200 &&
			ok[""] == 40
	})
	t.Logf("Prometheus: %s", last)
}

// wantDashboardAnswered evaluates every query of the Grafana dashboard in
// the stack's Prometheus: valid PromQL, and data after the sale.
func (s *stackRun) wantDashboardAnswered(t *testing.T) {
	t.Helper()
	for _, q := range loadDashboard(t) {
		expr := fillGrafanaVars(q.expr)
		testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("panel %q: %s to return data", q.panel, expr), func() bool {
			r := s.query(t, expr)
			if r.Status != "success" {
				t.Fatalf("panel %q: Prometheus refuses %s: %s: %s", q.panel, expr, r.ErrorType, r.Error)
			}
			return len(r.Data.Result) > 0
		})
	}
}

// stackNamesThePartThatFails: when an instance does not start, up
// fails, names the instance and shows why (its log names the variable), and
// leaves nothing running.
func stackNamesThePartThatFails(t *testing.T, env ...string) {
	s := newStack(t, append(env, "SECKILL_LOCK=no-such-lock")...)
	out, err := s.run("up")
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("stack.sh up with SECKILL_LOCK=no-such-lock = %v; want it to fail\n%s", err, out)
	}
	for _, want := range []string{"seckill1 did not start", "SECKILL_LOCK"} {
		if !strings.Contains(out, want) {
			t.Errorf("stack.sh up with SECKILL_LOCK=no-such-lock says\n%s\nwant it to say %q", out, want)
		}
	}
	s.wantDown(t)
}
