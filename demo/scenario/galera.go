package scenario

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
	"github.com/seckill/seckill/internal/galera"
)

// The galera scenario: the same pessimistic sale on one node of a Galera
// Cluster and across two.
const (
	// galeraStock units are sold to galeraBuyers buyers, galeraConcurrency
	// at a time, over two instances.
	galeraStock       = 20
	galeraBuyers      = 60
	galeraConcurrency = 30
	// galeraDatabase is the database the instances share, on a cluster
	// of the scenario's own.
	galeraDatabase = "seckill_demo"
)

func galeraScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "galera",
		Title: "PESSIMISTIC ON A GALERA CLUSTER: A ROW LOCK THAT IS ONLY ITS NODE'S",
		Shows: "pessimistic on a three-node Galera Cluster: one node, then two, and certification",
		Story: fmt.Sprintf("The database is a MariaDB Galera Cluster of three mariadbd processes that "+
			"replicate every write to one another. Two instances sell a product of %d units to %d "+
			"buyers (%d at a time) under pessimistic (SELECT ... FOR UPDATE), one sale per transaction "+
			"(batch=1): first both writing through node 0, then one through node 0 and one through "+
			"node 2 (NODES: the instances' nodes). CERT. FAILURES counts the transactions the "+
			"cluster threw away for a conflict with another node's.",
			galeraStock, galeraBuyers, galeraConcurrency),
		Faults: true,
		Run:    runGalera,
	}
}

func runGalera(w *lab.World) (*lab.Result, error) {
	res := &lab.Result{Columns: []string{"RUN", "NODES", "SOLD", "OVERSOLD", "CERT. FAILURES", "TIME", "VERDICT"}}
	if err := galera.Available(); err != nil {
		res.Add(lab.Row{Key: "left out", Cells: []string{"left out", "-", "-", "-", "-", "-"},
			Verdict: "needs apt-get install mariadb-server galera-4 rsync"}, true)
		return res, nil
	}
	cl, err := startGalera(w)
	if err != nil {
		return nil, err
	}
	dsn := func(node int) string { return cl.Nodes[node].DatabaseDSN(galeraDatabase) }
	a, err := w.StartOwn(lab.Setup{MySQLDSN: dsn(0)})
	if err != nil {
		return nil, err
	}
	for _, run := range []struct {
		key, on string
		node    int // the second instance's node
	}{{"one node", "0 and 0", 0}, {"two nodes", "0 and 2", 2}} {
		b, err := w.StartOwn(lab.Setup{MySQLDSN: dsn(run.node)})
		if err != nil {
			return nil, err
		}
		row, err := galeraRun(w, cl, run.key, run.on, []*lab.Instance{a, b})
		if err != nil {
			return nil, err
		}
		res.Add(row, !row.Flaw)
	}
	res.Notes = []string{"On one MariaDB, SELECT ... FOR UPDATE is a lock every buyer of the product " +
		"waits on. On a Galera Cluster the row lock is only its node's: two instances on two nodes each " +
		"hold it at once, both decide and write, and the cluster finds the conflict only at COMMIT " +
		"(certification). The later write set is thrown away (a deadlock error, nothing written) and " +
		"the service tries the sale again: the stock stays exact, but the lock no longer orders the buyers.",
		"The Redis locks (token, redlock) still order two nodes' holders of one product, since their lock " +
			"is not the database's; optimistic needs no order, only its conditional write (docs/locks.md, " +
			"\"On a Galera Cluster\"; docs/distributed.md has the measurements).",
	}
	return res, nil
}

// startGalera starts a Galera Cluster of the scenario's own in a temporary
// directory, killed and removed when the world closes, and creates the
// instances' database on it.
func startGalera(w *lab.World) (*galera.Cluster, error) {
	dir, err := os.MkdirTemp("", "seckill-demo-galera-")
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	w.Note("starting a Galera Cluster of three mariadbd processes")
	cl, err := galera.Start(w.Context(), dir)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	w.OnClose(func() error { cl.Close(); return os.RemoveAll(dir) })
	if err := cl.CreateDatabase(w.Context(), galeraDatabase); err != nil {
		return nil, err
	}
	return cl, nil
}

// galeraRun sells a product of galeraStock units under pessimistic on ins
// and reads how many transactions the cluster threw away meanwhile: the
// row, which is a flaw only when the sale did not sell exactly the stock.
func galeraRun(w *lab.World, cl *galera.Cluster, key, on string, ins []*lab.Instance) (lab.Row, error) {
	s, err := w.NewSeries("galera "+key, key, ins[0], galeraStock)
	if err != nil {
		return lab.Row{}, err
	}
	before, err := thrownAway(w, cl)
	if err != nil {
		return lab.Row{}, err
	}
	began := time.Now()
	_, audit, err := w.SellOut(s, ins, galeraBuyers, galeraConcurrency, client.Override{Strategy: "pessimistic", Batch: 1})
	if err != nil {
		return lab.Row{}, err
	}
	took := time.Since(began)
	after, err := thrownAway(w, cl)
	if err != nil {
		return lab.Row{}, err
	}
	thrown := after - before
	row := lab.Row{Key: key, Series: s.ID, Flaw: !audit.Held() || audit.UnitsSold != galeraStock,
		Cells: []string{key, on, fmt.Sprint(audit.UnitsSold), fmt.Sprint(audit.OversoldUnits),
			fmt.Sprint(thrown), ms(took)}}
	fine := "held: one row lock ordered every buyer"
	if thrown > 0 {
		fine = fmt.Sprintf("held: %d refused at COMMIT, redone", thrown)
	} else if key != "one node" {
		fine = "held: no conflict at COMMIT this time"
	}
	row.Judge(audit, fmt.Sprintf("sold %d of %d", audit.UnitsSold, galeraStock), fine)
	return row, nil
}

// thrownAway sums over the nodes of cl the status variables that count a
// node's local transactions thrown away for a conflict with another
// node's: refused at certification, or aborted by a replicated write set
// while they waited.
func thrownAway(w *lab.World, cl *galera.Cluster) (int64, error) {
	counters := []string{"wsrep_local_cert_failures", "wsrep_local_bf_aborts"}
	var (
		mu    sync.Mutex
		total int64
		errs  []error
		wg    sync.WaitGroup
	)
	for _, n := range cl.Nodes {
		for _, name := range counters {
			wg.Go(func() {
				v, err := n.Status(w.Context(), name)
				var c int64
				if err == nil {
					if c, err = strconv.ParseInt(v, 10, 64); err != nil {
						err = fmt.Errorf("scenario: %s of %s: %w", name, n, err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				total += c
				errs = append(errs, err)
			})
		}
	}
	wg.Wait()
	return total, errors.Join(errs...)
}
