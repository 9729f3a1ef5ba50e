// Package galera starts a real three-node MariaDB Galera Cluster of
// mariadbd processes on loopback ports of their own, and kills and restarts
// its nodes. The tests (through testenv) and the workshop's galera scenario
// use it; it needs Debian's mariadb-server, galera-4 and rsync.
package galera

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/childproc"
)

// provider is the wsrep provider Debian's galera-4 installs.
const provider = "/usr/lib/galera/libgalera_smm.so"

// size is the number of nodes of a Cluster.
const size = 3

// errExited says a node's mariadbd ended while it was awaited.
var errExited = errors.New("galera: mariadbd exited")

// Cluster is a three-node MariaDB Galera Cluster: three mariadbd processes
// on loopback ports of their own, each with its own data directory, that
// replicate every write to one another (state transfer by rsync). Node 0
// bootstrapped it.
type Cluster struct {
	Nodes []*Node
}

// Node is one mariadbd of a Cluster, which may be killed and restarted.
type Node struct {
	// DSN is the node's DSN, without a database: root, no password, TCP.
	DSN   string
	c     *Cluster
	index int
	port  string
	dir   string
	bin   string
	args  []string // its server options, but --wsrep-new-cluster
	cmd   *exec.Cmd
	done  chan struct{}
}

// Available says what is missing to start a Cluster (mariadbd,
// mariadb-install-db, rsync, the galera-4 provider), nil when all is there.
func Available() error {
	_, _, err := tools()
	return err
}

// tools finds mariadbd and mariadb-install-db and checks that rsync and the
// provider are there.
func tools() (bin, install string, err error) {
	bin, errBin := exec.LookPath("mariadbd")
	if errBin != nil {
		bin, errBin = exec.LookPath("/usr/sbin/mariadbd")
	}
	install, errInstall := exec.LookPath("mariadb-install-db")
	_, errRsync := exec.LookPath("rsync")
	_, errProvider := os.Stat(provider)
	if err := errors.Join(errBin, errInstall, errRsync, errProvider); err != nil {
		return "", "", fmt.Errorf("galera: no Galera Cluster here (apt-get install mariadb-server galera-4 rsync): %w", err)
	}
	return bin, install, nil
}

// Start makes three data directories under dir (mariadb-install-db), starts
// node 0 with --wsrep-new-cluster and the others one at a time, each
// joining by a full copy (rsync), and returns once every node is ready in a
// cluster of three. Every mariadbd gets SIGKILL when this process dies; on
// an error, what was started is killed. Run as root, a joiner's rsync
// daemon writes the copy it receives as nobody, so Start makes dir 0711:
// nobody must be able to reach every node's directory, and so dir's parents
// too (os.MkdirTemp's default directory is).
func Start(ctx context.Context, dir string) (*Cluster, error) {
	bin, install, err := tools()
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("galera: %w", err)
	}
	ports, err := lowPorts(4 * size)
	if err != nil {
		return nil, err
	}
	gcomm := make([]string, size)
	for i := range gcomm {
		gcomm[i] = "127.0.0.1:" + ports[4*i+1]
	}
	name := "seckill_galera_" + strings.ToLower(rand.Text()[:12])
	c := &Cluster{}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for i := range size {
		n := &Node{c: c, index: i, port: ports[4*i], dir: filepath.Join(dir, "node"+strconv.Itoa(i)), bin: bin}
		n.DSN = n.config().FormatDSN()
		n.args = n.serverArgs(name, gcomm, ports[4*i+1], ports[4*i+2], ports[4*i+3])
		if err := n.install(ctx, install); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	for i, n := range c.Nodes {
		if err := n.start(i == 0); err != nil {
			return nil, err
		}
		if err := n.wait(ctx, i+1); err != nil {
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := n.wait(ctx, size); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

// Close kills every node.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

// config is the node's DSN as a configuration.
func (n *Node) config() *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", net.JoinHostPort("127.0.0.1", n.port)
	return cfg
}

// serverArgs are the node's server options, but --wsrep-new-cluster: its
// own port, socket and data directory, small caches, and its three Galera
// ports (group communication, incremental and full state transfer).
func (n *Node) serverArgs(cluster string, gcomm []string, gcommPort, istPort, sstPort string) []string {
	return []string{"--no-defaults", "--datadir=" + n.data(), "--port=" + n.port, "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(n.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(n.dir, "mysqld.pid"),
		"--tmpdir=" + n.tmpdir(), "--log-error=" + n.errorLog(), "--user=" + osUser(), "--skip-log-bin",
		"--skip-name-resolve", "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--max-connections=300",
		"--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--wsrep-on=ON", "--wsrep-provider=" + provider,
		"--wsrep-cluster-address=gcomm://" + strings.Join(gcomm, ","), "--wsrep-cluster-name=" + cluster,
		"--wsrep-node-name=node" + strconv.Itoa(n.index), "--wsrep-node-address=127.0.0.1:" + gcommPort,
		"--wsrep-sst-method=rsync", "--wsrep-sst-receive-address=127.0.0.1:" + sstPort,
		"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:" + gcommPort + ";ist.recv_addr=127.0.0.1:" + istPort +
			";base_port=" + gcommPort + ";gcache.size=32M"}
}

func (n *Node) data() string     { return filepath.Join(n.dir, "data") }
func (n *Node) tmpdir() string   { return filepath.Join(n.dir, "tmp") }
func (n *Node) errorLog() string { return filepath.Join(n.dir, "error.log") }

// osUser is the user mariadbd runs as: this process's.
func osUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "root"
}

// openToAll is this process's environment plus UMASK variables that have
// mariadbd create files 0666 and directories 0777, so that a joiner's rsync
// daemon (nobody, when mariadbd runs as root) can write into any of them.
// Anyone on the machine can then write the nodes' data: fit for a test's
// or the workshop's cluster, never for one holding anything worth keeping.
func openToAll() []string { return append(os.Environ(), "UMASK=0666", "UMASK_DIR=0777") }

// install makes the node's directories and its data directory.
func (n *Node) install(ctx context.Context, install string) error {
	if err := os.MkdirAll(n.tmpdir(), 0o700); err != nil {
		return fmt.Errorf("galera: %w", err)
	}
	cmd := exec.CommandContext(ctx, install, "--no-defaults", "--datadir="+n.data(), "--user="+osUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
		"--tmpdir="+n.tmpdir(), "--innodb-log-file-size=16M")
	cmd.Env = openToAll()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("galera: mariadb-install-db for %s: %w\n%s", n, err, out)
	}
	// The way to the data directory, which mariadb-install-db leaves 0700,
	// must be open to nobody too.
	for dir, mode := range map[string]os.FileMode{n.dir: 0o711, n.data(): 0o777} {
		if err := os.Chmod(dir, mode); err != nil {
			return fmt.Errorf("galera: %w", err)
		}
	}
	return nil
}

// start starts the node's mariadbd, bootstrapping a new cluster when
// bootstrap is set.
func (n *Node) start(bootstrap bool) error {
	cmd := exec.Command(n.bin, n.args...)
	if bootstrap {
		cmd.Args = append(cmd.Args, "--wsrep-new-cluster")
	}
	cmd.Env = openToAll()
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("galera: start %s: %w", n, err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait() // a node is killed on purpose: its exit status is not news
		close(done)
	}(cmd, n.done)
	return nil
}

// wait waits until the node is ready (wsrep_ready) in a cluster of size
// nodes (a joiner receives a full copy first).
func (n *Node) wait(ctx context.Context, size int) error {
	return n.waitFor(ctx, fmt.Sprintf("ready in a cluster of %d", size), func(ready string, got int) bool {
		return ready == "ON" && got == size
	})
}

// waitFor waits until the node's wsrep_ready and wsrep_cluster_size satisfy
// ok; its error, when the node exits first or two minutes pass, ends with
// the tail of the node's error log.
func (n *Node) waitFor(ctx context.Context, what string, ok func(ready string, size int) bool) error {
	err := n.withDB(func(db *sql.DB) error {
		return until(ctx, 2*time.Minute, func() error {
			select {
			case <-n.done:
				return errExited
			default:
			}
			ready, size, err := WsrepStatus(ctx, db)
			if err == nil && !ok(ready, size) {
				err = fmt.Errorf("wsrep_ready %s, wsrep_cluster_size %d", ready, size)
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("galera: %s was not %s: %w; its error log ends:\n%s", n, what, err, n.logTail())
	}
	return nil
}

// until calls try until it returns nil, ctx ends or timeout passes, and
// returns try's last error then; errExited ends the wait at once.
func until(ctx context.Context, timeout time.Duration, try func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := try()
		if err == nil || errors.Is(err, errExited) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %w", timeout, errors.Join(err, ctx.Err()))
		case <-time.After(wait):
		}
	}
}

// WsrepStatus reads a node's wsrep_ready and wsrep_cluster_size through db,
// waiting a second at most.
func WsrepStatus(ctx context.Context, db *sql.DB) (ready string, size int, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var name string
	if err = db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_ready'").Scan(&name, &ready); err == nil {
		err = db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size)
	}
	if err != nil {
		return "", 0, fmt.Errorf("galera: read wsrep status: %w", err)
	}
	return ready, size, nil
}

// logTail is the end of the node's error log, for error messages.
func (n *Node) logTail() string {
	b, err := os.ReadFile(n.errorLog())
	if err != nil {
		return fmt.Sprintf("(no error log: %v)", err)
	}
	return string(b[max(0, len(b)-4000):])
}

// Kill kills the node's mariadbd at once (SIGKILL), as a crash would, and
// waits for it to be gone; the others go on as a cluster of two. Killing it
// twice is harmless.
func (n *Node) Kill() {
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
// running node (three when the others run). It first waits until the
// others have dropped the killed node from their view (a few seconds,
// evs.suspect_timeout): a node that comes back while they still count its
// old self is left out of the cluster for as long again.
func (n *Node) Restart(ctx context.Context) error {
	if n.cmd != nil {
		return fmt.Errorf("galera: restart %s: it runs", n)
	}
	others := n.c.running()
	for _, o := range others {
		if err := o.waitFor(ctx, fmt.Sprintf("rid of %s", n), func(_ string, size int) bool { return size <= len(others) }); err != nil {
			return err
		}
	}
	if err := n.start(false); err != nil {
		return err
	}
	return n.wait(ctx, len(others)+1)
}

// running are the nodes whose mariadbd runs.
func (c *Cluster) running() []*Node {
	return slices.DeleteFunc(slices.Clone(c.Nodes), func(n *Node) bool { return n.cmd == nil })
}

// String names the node for error messages.
func (n *Node) String() string {
	return fmt.Sprintf("Galera node %d (mariadbd on port %s)", n.index, n.port)
}

// DatabaseDSN returns a DSN (with parseTime=true) for the database name on
// the node.
func (n *Node) DatabaseDSN(name string) string {
	cfg := n.config()
	cfg.DBName, cfg.ParseTime = name, true
	return cfg.FormatDSN()
}

// CreateDatabase creates the database name through node 0 and waits until
// every running node has it (30 s at most).
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	if err := c.Nodes[0].Exec(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		return err
	}
	for _, n := range c.running() {
		if err := until(ctx, 30*time.Second, func() error { return n.Exec(ctx, "USE `"+name+"`") }); err != nil {
			return fmt.Errorf("galera: database %s did not reach %s: %w", name, n, err)
		}
	}
	return nil
}

// Exec runs query on the node, on a connection of its own, waiting 10 s
// at most.
func (n *Node) Exec(ctx context.Context, query string) error {
	return n.query(ctx, func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, query)
		return err
	}, query)
}

// Status reads the node's status variable name (SHOW GLOBAL STATUS), e.g.
// wsrep_local_cert_failures, on a connection of its own.
func (n *Node) Status(ctx context.Context, name string) (string, error) {
	// SHOW STATUS takes no placeholder: the name is written into the
	// statement, so it may hold nothing but a name's characters.
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return "", fmt.Errorf("galera: status %q: not a status variable's name", name)
	}
	var got, value string
	err := n.query(ctx, func(ctx context.Context, db *sql.DB) error {
		return db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&got, &value)
	}, "status "+name)
	return value, err
}

// query runs do on a connection of the node's own, 10 s at most; what
// names it in the error.
func (n *Node) query(ctx context.Context, do func(context.Context, *sql.DB) error, what string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := n.withDB(func(db *sql.DB) error { return do(ctx, db) })
	if err != nil {
		return fmt.Errorf("galera: %s: %s: %w", n, what, err)
	}
	return nil
}

// withDB runs do on a pool of the node's own, closed afterwards.
func (n *Node) withDB(do func(*sql.DB) error) (err error) {
	db, err := sql.Open("mysql", n.DSN)
	if err != nil {
		return fmt.Errorf("galera: %s: %w", n, err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("galera: %s: close: %w", n, cerr))
		}
	}()
	return do(db)
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
		return nil, fmt.Errorf("galera: ip_local_port_range starts at %d: no room below it for Galera's ports", low)
	}
	var ports []string
	for range 100 * count {
		p := strconv.Itoa(10000 + mathrand.IntN(low-10000))
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", p)); err == nil && l.Close() == nil && !slices.Contains(ports, p) {
			if ports = append(ports, p); len(ports) == count {
				return ports, nil
			}
		}
	}
	return nil, errors.New("galera: not enough free ports below the outgoing range for a Galera")
}
