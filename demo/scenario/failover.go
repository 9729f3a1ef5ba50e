package scenario

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/client"
	"github.com/seckill/seckill/demo/lab"
	"github.com/seckill/seckill/internal/rediscluster"
	"github.com/seckill/seckill/service/reserve"
)

// The failover scenario: reserve on a real Redis Cluster whose master dies
// while its replica lags, played without and with acknowledgements.
const (
	// failoverStock is the product's stock; failoverStage purchases are
	// made at each stage.
	failoverStock = 20
	failoverStage = 5
	// failoverAcks is the acknowledged run's SECKILL_RESERVE_ACKS.
	failoverAcks = "1/250ms"
)

// failoverAckWait is failoverAcks's timeout.
const failoverAckWait = 250 * time.Millisecond

func failoverScenario() lab.Scenario {
	return lab.Scenario{
		Name:  "failover",
		Title: "RESERVE ON A REDIS CLUSTER: A MASTER DIES WHILE ITS REPLICA LAGS",
		Shows: "the promises a Redis Cluster's failover breaks, and WAIT keeping them",
		Story: fmt.Sprintf("reserve's Redis is a Redis Cluster of six redis-server processes: three masters, "+
			"each with a replica. %d buyers reserve and a writer writes their orders. Then the product's "+
			"master's replica falls behind (frozen, its link cut): %d more reserve, written too, and %d more "+
			"while no writer runs. The master is killed and its replica takes over (CLUSTER FAILOVER "+
			"TAKEOVER) with nothing of what it missed, and a writer starts. Played twice: replication as "+
			"Redis does it (asynchronous), then with SECKILL_RESERVE_ACKS=%s, every reservation waiting "+
			"for its replica.", failoverStage, failoverStage, failoverStage, failoverAcks),
		Faults: true,
		Run:    runFailover,
	}
}

func runFailover(w *lab.World) (*lab.Result, error) {
	res := &lab.Result{Columns: []string{"RUN", "202s", "KEPT", "LOST", "503 UNKNOWN", "SOLD", "LEFT", "VERDICT"}}
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			res.Add(lab.Row{Key: "left out", Cells: []string{"left out", "-", "-", "-", "-", "-", "-"},
				Verdict: "needs redis-server and redis-cli (apt-get install redis-server)"}, true)
			return res, nil
		}
	}
	var ordered, unknown int // of the acks run's outcome_unknown answers
	for _, acks := range []string{"", failoverAcks} {
		row, ok, err := failover(w, acks)
		if err != nil {
			return nil, err
		}
		res.Add(row.Row, ok)
		ordered, unknown = row.unknownOrdered, row.unknown
	}
	res.Notes = []string{"Replication is asynchronous: the master answers before its replica has the " +
		"reservation, and a replica promoted after its master died lacks what it never received. " +
		"Those 202s are promises nobody keeps; nothing is oversold (the database decides every order), " +
		"and the writers' reconcile (every 10 s) moves the new master's counter down to the database's word " +
		"(TestReserveFailover shows it).",
		"With SECKILL_RESERVE_ACKS the script is followed by WAIT 1 on the same connection: a reservation " +
			"its replica did not acknowledge in time is answered 503 outcome_unknown, which is true (it is on " +
			"the master alone), and a replay of its request_id says what became of it. Fewer promises, none " +
			"broken here; WAIT makes a loss less likely, not impossible (docs/distributed.md).",
		fmt.Sprintf("SOLD counts the orders: with acks, %d of the %d answers 503 outcome_unknown became "+
			"orders (a writer had read their reservations before the failover), and the others' "+
			"reservations died with the master; their buyers had been promised nothing.", ordered, unknown)}
	return res, nil
}

// failoverRow is a run's row, and what became of its outcome_unknown
// answers: how many there were, and how many became orders.
type failoverRow struct {
	lab.Row
	unknown, unknownOrdered int
}

// failover plays the scenario once on a cluster of its own, with
// SECKILL_RESERVE_ACKS acks (empty: none): the row, and whether it went as
// the lesson says (without acks, the promises of the last stage are
// broken; with them, none is).
func failover(w *lab.World, acks string) (failoverRow, bool, error) {
	r, err := startFailover(w, acks)
	if err != nil {
		return failoverRow{}, false, err
	}
	if err := r.play(); err != nil {
		return failoverRow{}, false, err
	}
	kept, lost, err := w.PromisesOf(r.seller, r.promised)
	if err != nil {
		return failoverRow{}, false, err
	}
	r.series.SetBroken(lost)
	audit, err := w.Finish(r.series)
	if err != nil {
		return failoverRow{}, false, err
	}
	row := lab.Row{Key: r.label, Series: r.series.ID, Flaw: lost > 0,
		Cells: []string{r.label, fmt.Sprint(len(r.promised)), fmt.Sprint(kept), fmt.Sprint(lost), fmt.Sprint(len(r.unknown)),
			fmt.Sprint(audit.UnitsSold), fmt.Sprint(audit.Stock)}}
	row.Judge(audit, fmt.Sprintf("%d promises broken; none oversold", lost), "no promise broken")
	ordered, _, err := w.PromisesOf(r.seller, r.unknown)
	if err != nil {
		return failoverRow{}, false, err
	}
	out := failoverRow{Row: row, unknown: len(r.unknown), unknownOrdered: ordered}
	if acks == "" {
		return out, lost == failoverStage && len(r.unknown) == 0 && audit.Held(), nil
	}
	return out, lost == 0 && len(r.unknown) == 2*failoverStage && audit.Held(), nil
}

// failoverRun is one play of the scenario: its cluster, its instances and
// product, and the request IDs its buyers were answered with so far.
type failoverRun struct {
	w     *lab.World
	label string
	cl    *rediscluster.Cluster
	// setup is the writers'; the seller runs no writer.
	setup          lab.Setup
	seller, writer *lab.Instance
	series         *lab.Series
	// promised were answered 202, unknown 503 outcome_unknown.
	promised, unknown []string
}

// startFailover starts a run's cluster, with SECKILL_RESERVE_ACKS acks
// (empty: none), its seller and a writer, and puts its product on sale.
func startFailover(w *lab.World, acks string) (*failoverRun, error) {
	r := &failoverRun{w: w, label: "asynchronous"}
	if acks != "" {
		r.label = "acks " + acks
	}
	dir, err := os.MkdirTemp("", "seckill-demo-cluster")
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	w.Note("%s: starting six redis-server processes in cluster mode", r.label)
	if r.cl, err = rediscluster.Start(w.Context(), dir, 3, 1); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	w.OnClose(func() error { r.cl.Close(); return os.RemoveAll(dir) })
	r.setup = lab.Setup{Reserve: "cluster:" + strings.Join(r.cl.Addrs(), ",")}
	if acks != "" {
		r.setup.Acks, r.setup.AckWait = 1, failoverAckWait
	}
	sellerSetup := r.setup
	sellerSetup.NoWriter = true
	if r.seller, err = w.StartOwn(sellerSetup); err != nil {
		return nil, err
	}
	if r.writer, err = w.StartOwn(r.setup); err != nil {
		return nil, err
	}
	if r.series, err = w.NewSeries("failover "+r.label, r.label, r.seller, failoverStock); err != nil {
		return nil, err
	}
	return r, nil
}

// play plays the run's stages: buyers while all is well, then while the
// product's replica lags, then while no writer runs; then the master is
// killed, its replica takes over and a writer starts again.
func (r *failoverRun) play() error {
	w := r.w
	r.buy(failoverStage)
	if _, _, err := w.PromisesOf(r.seller, r.promised); err != nil {
		return err
	}
	master, replica, err := productMaster(w, r.cl, r.series.Product)
	if err != nil {
		return err
	}
	w.Note("%s: the replica %s falls behind its master %s", r.label, replica.Addr, master.Addr)
	if err := r.cl.Lag(w.Context(), master, replica); err != nil {
		return err
	}
	r.buy(failoverStage)
	if _, _, err := w.PromisesOf(r.seller, append(append([]string(nil), r.promised...), r.unknown...)); err != nil {
		return err
	}
	w.Note("%s: the writer stops; %d more buyers", r.label, failoverStage)
	if err := r.writer.Stop(); err != nil {
		return err
	}
	r.buy(failoverStage)
	w.Note("%s: the master is killed, and its replica takes over", r.label)
	master.Kill()
	if err := errors.Join(replica.Thaw(), r.cl.Takeover(w.Context(), replica)); err != nil {
		return err
	}
	_, err = w.StartOwn(r.setup)
	return err
}

// buy has n buyers reserve on the seller, each with a request ID of its
// own, and keeps the IDs of those promised and of those answered
// outcome_unknown.
func (r *failoverRun) buy(n int) {
	o := client.Override{Strategy: "reserve"}
	for range n {
		rid := fmt.Sprintf("failover-%d-%s", r.series.Product, r.w.User())
		switch a := r.w.BuyAs(r.w.Context(), r.series, r.seller, o, rid); {
		case a.Status == 202:
			r.promised = append(r.promised, rid)
		case a.Code == "outcome_unknown":
			r.unknown = append(r.unknown, rid)
		}
	}
}

// productMaster returns the master of the cluster that holds product's
// keys under reserve, and its replica.
func productMaster(w *lab.World, cl *rediscluster.Cluster, product int64) (master, replica *rediscluster.Node, err error) {
	c := redis.NewClient(&redis.Options{Addr: cl.Nodes[0].Addr})
	defer c.Close()
	slot, err := c.ClusterKeySlot(w.Context(), reserve.New(c, w.KeyPrefix()).KeysOf(product).Counter).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("scenario: CLUSTER KEYSLOT: %w", err)
	}
	master, replicas, err := cl.MasterOf(w.Context(), int(slot))
	if err != nil {
		return nil, nil, err
	}
	if len(replicas) == 0 {
		return nil, nil, fmt.Errorf("scenario: the master %s of slot %d has no replica", master.Addr, slot)
	}
	return master, replicas[0], nil
}
