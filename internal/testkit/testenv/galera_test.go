package testenv

import (
	"context"
	"database/sql"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/galera"
)

// TestGaleraCluster starts a Galera, checks that a write on one node
// reaches another with the IDs the cluster spaces, that two nodes go on
// when the third is killed, and that the third, restarted, has what they
// wrote meanwhile.
func TestGaleraCluster(t *testing.T) {
	if os.Getenv("SECKILL_TEST_GALERA") != "1" {
		t.Skip("starts, kills and restarts a three-node Galera Cluster (about 25 s): runs with SECKILL_TEST_GALERA=1")
	}
	began := time.Now()
	g := StartGalera(t)
	t.Logf("three nodes ready in %v", time.Since(began).Round(time.Millisecond))
	name := g.Database(t)
	dbs := make([]*sql.DB, len(g.Nodes))
	for i, n := range g.Nodes {
		dbs[i] = OpenDB(t, n.DatabaseDSN(name))
	}
	ctx := context.Background()

	mustExec(t, dbs[1], "CREATE TABLE items (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(8) NOT NULL)")
	conn, err := dbs[1].Conn(ctx)
	if err != nil {
		t.Fatalf("connect to node 1: %v", err)
	}
	defer conn.Close()
	var step int64
	if err := conn.QueryRowContext(ctx, "SELECT @@auto_increment_increment").Scan(&step); err != nil || step != 3 {
		t.Fatalf("node 1's @@auto_increment_increment = %d, %v; want 3", step, err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO items (v) VALUES ('a'), ('b'), ('c')"); err != nil {
		t.Fatalf("insert on node 1: %v", err)
	}
	ids := column[int64](t, dbs[1], "SELECT id FROM items ORDER BY id")
	if len(ids) != 3 || ids[1]-ids[0] != step || ids[2]-ids[1] != step {
		t.Fatalf("IDs of one INSERT on node 1 = %v; want 3 spaced by %d", ids, step)
	}

	if got := syncedColumn[int64](t, dbs[2], "SELECT id FROM items ORDER BY id"); !slices.Equal(got, ids) {
		t.Fatalf("IDs read on node 2 = %v; want %v", got, ids)
	}

	g.Nodes[2].Kill()
	g.Nodes[2].Kill() // harmless twice
	for _, i := range []int{0, 1} {
		var ready string
		var size int
		if !Until(time.Minute, func() bool {
			ready, size, err = galera.WsrepStatus(t.Context(), dbs[i])
			return err == nil && ready == "ON" && size == 2
		}) {
			t.Fatalf("node %d after node 2's kill: wsrep_ready %s, wsrep_cluster_size %d, %v; want ON, 2", i, ready, size, err)
		}
	}
	mustExec(t, dbs[0], "INSERT INTO items (v) VALUES ('d')")
	mustExec(t, dbs[1], "INSERT INTO items (v) VALUES ('e')")

	g.Nodes[2].Restart(t)
	restarted := OpenDB(t, g.Nodes[2].DatabaseDSN(name))
	want := []string{"a", "b", "c", "d", "e"}
	if got := syncedColumn[string](t, restarted, "SELECT v FROM items ORDER BY v"); !slices.Equal(got, want) {
		t.Fatalf("rows read on node 2 after its restart = %v; want %v", got, want)
	}
	for i, db := range dbs[:2] {
		if ready, size, err := galera.WsrepStatus(t.Context(), db); err != nil || ready != "ON" || size != 3 {
			t.Fatalf("node %d after node 2's restart: wsrep_ready %s, wsrep_cluster_size %d, %v; want ON, 3", i, ready, size, err)
		}
	}
}

// mustExec runs query on db and fails t when it fails.
func mustExec(t *testing.T, db *sql.DB, query string) {
	t.Helper()
	if _, err := db.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// column runs query, whose rows have one column, on db.
func column[T any](t *testing.T, db *sql.DB, query string) []T {
	t.Helper()
	return columnOn[T](t, db, query, false)
}

// syncedColumn runs query as column does, after SET SESSION
// wsrep_sync_wait=1 on the same connection: the node applies every write
// the cluster committed before it reads.
func syncedColumn[T any](t *testing.T, db *sql.DB, query string) []T {
	t.Helper()
	return columnOn[T](t, db, query, true)
}

func columnOn[T any](t *testing.T, db *sql.DB, query string, synced bool) []T {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer conn.Close()
	if synced {
		if _, err := conn.ExecContext(ctx, "SET SESSION wsrep_sync_wait=1"); err != nil {
			t.Fatalf("SET SESSION wsrep_sync_wait=1: %v", err)
		}
	}
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}
