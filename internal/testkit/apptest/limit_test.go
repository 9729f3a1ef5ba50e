package apptest_test

import (
	"testing"

	"github.com/seckill/seckill/internal/testkit/apptest"
)

// TestPerUserLimitAcrossInstances: on MariaDB, two instances, 10 users
// each sending 8 purchases at once under every safe strategy, redlock one
// purchase per hold and their mix: every user ends with exactly one unit
// (TestTiDB plays the same runs on TiDB).
func TestPerUserLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, map[string]string{"SECKILL_LOCK_WAIT": "30s"})
	ins := []*apptest.Instance{a, a.Another(t)}
	for _, run := range apptest.LimitRuns() {
		t.Run(run.Name(), func(t *testing.T) { apptest.CheckPerUserLimit(t, ins, run) })
	}
}
