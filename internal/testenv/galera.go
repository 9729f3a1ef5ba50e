package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/childproc"
)

// galeraProvider is the wsrep provider Debian's galera-4 installs.
const galeraProvider = "/usr/lib/galera/libgalera_smm.so"

// galeraSize is the number of nodes of a Galera.
const galeraSize = 3

// Galera is a three-node MariaDB Galera Cluster a test started itself: three
// mariadbd processes on loopback ports of their own, each with its own data
// directory, that replicate every write to one another (state transfer by
// rsync). Node 0 bootstrapped it.
type Galera struct {
	Nodes []*GaleraNode
}

// GaleraNode is one mariadbd of a Galera, which a test may kill and restart.
type GaleraNode struct {
	// DSN is the node's DSN, without a database: root, no password, TCP.
	DSN   string
	g     *Galera
	index int
	port  string
	dir   string
	bin   string
	args  []string // its server options, but --wsrep-new-cluster
	cmd   *exec.Cmd
	done  chan struct{}
}

// StartGalera makes three data directories (mariadb-install-db), starts
// node 0 with --wsrep-new-cluster and the others one at a time, each
// joining by a full copy (rsync), and returns once every node is ready in a
// cluster of three; it kills them all when t ends. When mariadbd,
// mariadb-install-db, rsync or the galera-4 provider is missing, it skips t,
// or fails it when SECKILL_TEST_GALERA_REQUIRED=1 (scripts/testenv.sh
// installs them all).
func StartGalera(t testing.TB) *Galera {
	t.Helper()
	bin, install := galeraTools(t)
	root := galeraDir(t)
	ports, err := lowPorts(4 * galeraSize)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	gcomm := make([]string, galeraSize)
	for i := range gcomm {
		gcomm[i] = "127.0.0.1:" + ports[4*i+1]
	}
	cluster := RandomName("seckill_galera_")
	g := &Galera{}
	t.Cleanup(func() {
		for _, n := range g.Nodes {
			n.Kill()
		}
	})
	for i := range galeraSize {
		n := &GaleraNode{g: g, index: i, port: ports[4*i], dir: filepath.Join(root, "node"+strconv.Itoa(i)), bin: bin}
		n.DSN = n.config().FormatDSN()
		n.args = n.serverArgs(cluster, gcomm, ports[4*i+1], ports[4*i+2], ports[4*i+3])
		n.install(t, install)
		g.Nodes = append(g.Nodes, n)
	}
	for i, n := range g.Nodes {
		n.start(t, i == 0)
		n.wait(t, i+1)
	}
	for _, n := range g.Nodes {
		n.wait(t, galeraSize)
	}
	return g
}

// galeraTools finds mariadbd and mariadb-install-db and checks that rsync
// and the provider are there; it skips t when one is missing, or fails it
// when SECKILL_TEST_GALERA_REQUIRED=1.
func galeraTools(t testing.TB) (bin, install string) {
	t.Helper()
	bin, errBin := exec.LookPath("mariadbd")
	if errBin != nil {
		bin, errBin = exec.LookPath("/usr/sbin/mariadbd")
	}
	install, errInstall := exec.LookPath("mariadb-install-db")
	_, errRsync := exec.LookPath("rsync")
	_, errProvider := os.Stat(galeraProvider)
	if err := errors.Join(errBin, errInstall, errRsync, errProvider); err != nil {
		msg := fmt.Sprintf("testenv: no Galera Cluster here (scripts/testenv.sh installs mariadb-server, galera-4 and rsync): %v", err)
		if os.Getenv("SECKILL_TEST_GALERA_REQUIRED") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin, install
}

// galeraDir makes the directory of a Galera's nodes, removed when t ends.
// Run as root, a joiner's rsync daemon writes the copy it receives as
// nobody, so nobody must be able to reach every node's directory: this one
// is 0711 (t.TempDir's are 0700), right under os.TempDir().
func galeraDir(t testing.TB) string {
	t.Helper()
	root, err := os.MkdirTemp("", "seckill-galera-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(root); err != nil {
			t.Errorf("testenv: remove the Galera's directory: %v", err)
		}
	})
	if err := os.Chmod(root, 0o711); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return root
}

// config is the node's DSN as a configuration.
func (n *GaleraNode) config() *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", net.JoinHostPort("127.0.0.1", n.port)
	return cfg
}

// serverArgs are the node's server options, but --wsrep-new-cluster: its
// own port, socket and data directory, small caches, and its three Galera
// ports (group communication, incremental and full state transfer).
func (n *GaleraNode) serverArgs(cluster string, gcomm []string, gcommPort, istPort, sstPort string) []string {
	return []string{"--no-defaults", "--datadir=" + n.data(), "--port=" + n.port, "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(n.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(n.dir, "mysqld.pid"),
		"--tmpdir=" + n.tmpdir(), "--log-error=" + n.errorLog(), "--user=" + osUser(), "--skip-log-bin",
		"--skip-name-resolve", "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--max-connections=300",
		"--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--wsrep-on=ON", "--wsrep-provider=" + galeraProvider,
		"--wsrep-cluster-address=gcomm://" + strings.Join(gcomm, ","), "--wsrep-cluster-name=" + cluster,
		"--wsrep-node-name=node" + strconv.Itoa(n.index), "--wsrep-node-address=127.0.0.1:" + gcommPort,
		"--wsrep-sst-method=rsync", "--wsrep-sst-receive-address=127.0.0.1:" + sstPort,
		"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:" + gcommPort + ";ist.recv_addr=127.0.0.1:" + istPort +
			";base_port=" + gcommPort + ";gcache.size=32M"}
}

func (n *GaleraNode) data() string     { return filepath.Join(n.dir, "data") }
func (n *GaleraNode) tmpdir() string   { return filepath.Join(n.dir, "tmp") }
func (n *GaleraNode) errorLog() string { return filepath.Join(n.dir, "error.log") }

// openToAll is this process's environment plus the variables that have
// mariadbd create its files 0666 and its directories 0777 (it sets its umask
// from UMASK), so that a joiner's rsync daemon, which runs as nobody when
// mariadbd runs as root, can write into any of them at a later full copy.
func openToAll() []string { return append(os.Environ(), "UMASK=0666", "UMASK_DIR=0777") }

// install makes the node's directories and its data directory.
func (n *GaleraNode) install(t testing.TB, install string) {
	t.Helper()
	if err := os.MkdirAll(n.tmpdir(), 0o700); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	cmd := exec.Command(install, "--no-defaults", "--datadir="+n.data(), "--user="+osUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
		"--tmpdir="+n.tmpdir(), "--innodb-log-file-size=16M")
	cmd.Env = openToAll()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: mariadb-install-db for %s: %v\n%s", n, err, out)
	}
	// The way to the data directory, which mariadb-install-db leaves 0700,
	// must be open to nobody too.
	for dir, mode := range map[string]os.FileMode{n.dir: 0o711, n.data(): 0o777} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
}

// start starts the node's mariadbd, bootstrapping a new cluster when
// bootstrap is set.
func (n *GaleraNode) start(t testing.TB, bootstrap bool) {
	t.Helper()
	n.cmd = exec.Command(n.bin, n.args...)
	if bootstrap {
		n.cmd.Args = append(n.cmd.Args, "--wsrep-new-cluster")
	}
	n.cmd.Env = openToAll()
	childproc.DieWithParent(n.cmd)
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("testenv: start %s: %v", n, err)
	}
	n.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait() // a test kills it on purpose: its exit status is not news
		close(done)
	}(n.cmd, n.done)
}

// wait waits until the node is ready (wsrep_ready) in a cluster of size
// nodes (a joiner receives a full copy first).
func (n *GaleraNode) wait(t testing.TB, size int) {
	t.Helper()
	n.waitFor(t, fmt.Sprintf("ready in a cluster of %d", size), func(ready string, got int) bool {
		return ready == "ON" && got == size
	})
}

// waitFor waits until the node's wsrep_ready and wsrep_cluster_size satisfy
// ok, and fails t with the tail of its error log when it exits first or two
// minutes pass.
func (n *GaleraNode) waitFor(t testing.TB, what string, ok func(ready string, size int) bool) {
	t.Helper()
	db, err := sql.Open("mysql", n.DSN)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer db.Close()
	var seen string
	if !Until(2*time.Minute, func() bool {
		select {
		case <-n.done:
			t.Fatalf("testenv: %s exited; its error log ends:\n%s", n, n.logTail())
		default:
		}
		ready, size, err := galeraStatus(db)
		seen = fmt.Sprintf("wsrep_ready %s, wsrep_cluster_size %d, error %v", ready, size, err)
		return err == nil && ok(ready, size)
	}) {
		t.Fatalf("testenv: %s was not %s within 2 minutes (%s); its error log ends:\n%s", n, what, seen, n.logTail())
	}
}

// galeraStatus reads a node's wsrep_ready and wsrep_cluster_size.
func galeraStatus(db *sql.DB) (ready string, size int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var name string
	if err = db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_ready'").Scan(&name, &ready); err == nil {
		err = db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size)
	}
	if err != nil {
		return "", 0, fmt.Errorf("read wsrep status: %w", err)
	}
	return ready, size, nil
}

// logTail is the end of the node's error log, for failure messages.
func (n *GaleraNode) logTail() string {
	b, err := os.ReadFile(n.errorLog())
	if err != nil {
		return fmt.Sprintf("(no error log: %v)", err)
	}
	return string(b[max(0, len(b)-4000):])
}

// Kill kills the node's mariadbd at once (SIGKILL), as a crash would, and
// waits for it to be gone; the others go on as a cluster of two. Killing it
// twice is harmless.
func (n *GaleraNode) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL) // it may be gone already: done says so
	<-n.done
	n.cmd = nil
}

// Restart starts a killed node again: it rejoins the cluster, by a full
// copy (rsync; killed, it has no saved position, and nothing runs
// mysqld_safe's --wsrep-recover) and an incremental one (IST) of what came
// meanwhile, and Restart returns once it is ready in a cluster of every
// running node (three when the others run). It first waits until the others have dropped the
// killed node from their view (a few seconds, evs.suspect_timeout): a node
// that comes back while they still count its old self is left out of the
// cluster for as long again.
func (n *GaleraNode) Restart(t testing.TB) {
	t.Helper()
	if n.cmd != nil {
		t.Fatalf("testenv: restart %s: it runs", n)
	}
	others := n.g.running()
	for _, o := range others {
		o.waitFor(t, fmt.Sprintf("rid of %s", n), func(_ string, size int) bool { return size <= len(others) })
	}
	n.start(t, false)
	n.wait(t, len(others)+1)
}

// running are the nodes whose mariadbd runs.
func (g *Galera) running() []*GaleraNode {
	return slices.DeleteFunc(slices.Clone(g.Nodes), func(n *GaleraNode) bool { return n.cmd == nil })
}

// String names the node for failure messages.
func (n *GaleraNode) String() string {
	return fmt.Sprintf("Galera node %d (mariadbd on port %s)", n.index, n.port)
}

// DatabaseDSN returns a DSN (with parseTime=true) for the database name on
// the node.
func (n *GaleraNode) DatabaseDSN(name string) string { return withDatabase(n.config(), name) }

// Database creates a database with a random name through node 0, waits
// until every running node has it, drops it when t ends (if a node still
// answers) and returns its name.
func (g *Galera) Database(t testing.TB) string {
	t.Helper()
	name := RandomName("seckill_test_")
	if err := g.Nodes[0].exec("CREATE DATABASE `" + name + "`"); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		for _, n := range g.running() {
			if n.exec("DROP DATABASE IF EXISTS `"+name+"`") == nil {
				return // the cluster replicates the drop; a cluster gone has nothing to drop
			}
		}
	})
	for _, n := range g.running() {
		var err error
		if !Until(30*time.Second, func() bool {
			err = n.exec("USE `" + name + "`")
			return err == nil
		}) {
			t.Fatalf("testenv: database %s did not reach %s in 30 s: %v", name, n, err)
		}
	}
	return name
}

// exec runs query on the node, on a connection of its own.
func (n *GaleraNode) exec(query string) error {
	db, err := sql.Open("mysql", n.DSN)
	if err != nil {
		return fmt.Errorf("%s: %w", n, err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, query); err != nil {
		return fmt.Errorf("%s: %s: %w", n, query, err)
	}
	return nil
}

// lowPorts returns count distinct ports of the loopback address that
// nothing listens on, below the kernel's range of ports for outgoing
// connections (ip_local_port_range), where no ":0" listener and no outgoing
// connection is given one meanwhile (as internal/rediscluster chooses).
func lowPorts(count int) ([]string, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			low, _ = strconv.Atoi(f[0]) // not a number: 0, refused below
		}
	}
	if low <= 11000 {
		return nil, fmt.Errorf("testenv: ip_local_port_range starts at %d: no room below it for Galera's ports", low)
	}
	var ports []string
	for range 100 * count {
		p := strconv.Itoa(10000 + rand.IntN(low-10000))
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", p)); err == nil && l.Close() == nil && !slices.Contains(ports, p) {
			if ports = append(ports, p); len(ports) == count {
				return ports, nil
			}
		}
	}
	return nil, errors.New("testenv: not enough free ports below the outgoing range for a Galera")
}
