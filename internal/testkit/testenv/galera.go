package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/seckill/seckill/internal/galera"
)

// Galera is a three-node MariaDB Galera Cluster a test started itself
// (internal/galera): three mariadbd processes on loopback ports of their
// own that replicate every write to one another. Node 0 bootstrapped it.
type Galera struct {
	Nodes []*GaleraNode
	c     *galera.Cluster
}

// GaleraNode is one mariadbd of a Galera, which a test may kill and restart.
type GaleraNode struct {
	// DSN is the node's DSN, without a database: root, no password, TCP.
	DSN string
	n   *galera.Node
}

// StartGalera starts a Galera (galera.Start) in a directory of its own and
// returns once every node is ready in a cluster of three; it kills them all
// and removes the directory when t ends. When mariadbd, mariadb-install-db,
// rsync or the galera-4 provider is missing, it skips t, or fails it when
// SECKILL_TEST_GALERA_REQUIRED=1 (scripts/testenv.sh installs them all).
func StartGalera(t testing.TB) *Galera {
	t.Helper()
	if err := galera.Available(); err != nil {
		msg := fmt.Sprintf("testenv: %v (scripts/testenv.sh installs them)", err)
		if os.Getenv("SECKILL_TEST_GALERA_REQUIRED") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// The nodes' directory is right under os.TempDir(), not t.TempDir():
	// a joiner's rsync daemon, run as nobody, must reach it, and the
	// parents of t.TempDir's are 0700.
	dir, err := os.MkdirTemp("", "seckill-galera-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("testenv: remove the Galera's directory: %v", err)
		}
	})
	c, err := galera.Start(t.Context(), dir)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(c.Close)
	g := &Galera{c: c}
	for _, n := range c.Nodes {
		g.Nodes = append(g.Nodes, &GaleraNode{DSN: n.DSN, n: n})
	}
	return g
}

// Kill kills the node's mariadbd at once (SIGKILL), as a crash would, and
// waits for it to be gone; the others go on as a cluster of two. Killing it
// twice is harmless.
func (n *GaleraNode) Kill() { n.n.Kill() }

// Restart starts a killed node again (galera.Node.Restart): it returns
// once the node is ready in a cluster of every running node, and fails t
// when it is not.
func (n *GaleraNode) Restart(t testing.TB) {
	t.Helper()
	if err := n.n.Restart(t.Context()); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// String names the node for failure messages.
func (n *GaleraNode) String() string { return n.n.String() }

// DatabaseDSN returns a DSN (with parseTime=true) for the database name on
// the node.
func (n *GaleraNode) DatabaseDSN(name string) string { return n.n.DatabaseDSN(name) }

// Database creates a database with a random name through node 0, waits
// until every running node has it, drops it when t ends (if a node still
// answers) and returns its name.
func (g *Galera) Database(t testing.TB) string {
	t.Helper()
	name := RandomName("seckill_test_")
	if err := g.c.CreateDatabase(t.Context(), name); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		for _, n := range g.c.Nodes {
			// The cluster replicates the drop; a node killed, or a
			// cluster gone, has nothing to drop.
			if n.Exec(context.Background(), "DROP DATABASE IF EXISTS `"+name+"`") == nil {
				return
			}
		}
	})
	return name
}
