package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/childproc"
)

// MariaDB is a mariadbd process a test started itself, on its own port and
// data directory, so that it can kill and restart it without touching the
// machine's server.
type MariaDB struct {
	// DSN is the server's DSN, without a database: root, no password, TCP.
	DSN  string
	port string
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartMariaDB makes a data directory (mariadb-install-db) and starts
// mariadbd on it, on a free port of 127.0.0.1, with the server options
// args besides its own; it stops it when t ends. scripts/testenv.sh
// installs mariadb-server when it is missing.
func StartMariaDB(t testing.TB, args ...string) *MariaDB {
	t.Helper()
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		t.Fatalf("testenv: mariadb-install-db not found (scripts/testenv.sh installs mariadb-server): %v", err)
	}
	m := &MariaDB{dir: t.TempDir(), args: args}
	// A tmpdir of its own: a mariadbd that starts removes every "#sql"
	// file in its tmpdir, so servers sharing /tmp (two tests bootstrapping
	// at once, or the machine's server) delete each other's temporary tables.
	if err := os.Mkdir(m.tmpdir(), 0o700); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	out, err := exec.Command(install, "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"), "--user="+osUser(),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
		"--tmpdir="+m.tmpdir()).CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: mariadb-install-db: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	m.port = port
	m.DSN = (&mysql.Config{User: "root", Net: "tcp", Addr: net.JoinHostPort("127.0.0.1", port), AllowNativePasswords: true}).FormatDSN()
	m.Start(t)
	t.Cleanup(m.Kill)
	return m
}

// tmpdir is the server's own directory for temporary files.
func (m *MariaDB) tmpdir() string { return filepath.Join(m.dir, "tmp") }

// osUser is who mariadbd runs as: this process's user (root needs saying).
func osUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "root"
}

// Start starts mariadbd on the server's data directory and port and waits
// until it answers.
func (m *MariaDB) Start(t testing.TB) {
	t.Helper()
	bin, err := exec.LookPath("mariadbd")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/mariadbd"); err != nil {
			t.Fatalf("testenv: mariadbd not found (scripts/testenv.sh installs mariadb-server): %v", err)
		}
	}
	m.cmd = exec.Command(bin, "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"), "--port="+m.port,
		"--bind-address=127.0.0.1", "--socket="+filepath.Join(m.dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(m.dir, "mysqld.pid"), "--tmpdir="+m.tmpdir(), "--log-error="+filepath.Join(m.dir, "error.log"),
		"--user="+osUser(), "--skip-log-bin", "--innodb-buffer-pool-size=32M", "--max-connections=300")
	m.cmd.Args = append(m.cmd.Args, m.args...)
	childproc.DieWithParent(m.cmd)
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("testenv: start mariadbd: %v", err)
	}
	m.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait() // a test kills it on purpose: its exit status is not news
		close(done)
	}(m.cmd, m.done)
	db, err := sql.Open("mysql", m.DSN)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer db.Close()
	answered := Until(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return true
		}
		select {
		case <-m.done:
			log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
			t.Fatalf("testenv: mariadbd exited at start: %s", log)
		default:
		}
		return false
	})
	if !answered {
		t.Fatalf("testenv: mariadbd on port %s did not answer within 60s: %v", m.port, err)
	}
}

// Kill kills mariadbd at once (SIGKILL), as a crash would, and waits for it
// to be gone. Killing it twice is harmless; a frozen server is killed too.
func (m *MariaDB) Kill() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL) // it may be gone already: done says so
	<-m.done
	m.cmd = nil
}

// Freeze stops mariadbd (SIGSTOP), as a frozen VM would: its connections
// stay open and nothing answers. Thaw lets it go on.
func (m *MariaDB) Freeze(t testing.TB) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("testenv: freeze %s: %v", m, err)
	}
}

// Thaw lets a frozen mariadbd go on (SIGCONT).
func (m *MariaDB) Thaw(t testing.TB) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("testenv: thaw %s: %v", m, err)
	}
}

// String names the server for failure messages.
func (m *MariaDB) String() string { return fmt.Sprintf("mariadbd on port %s", m.port) }
