package scenario

import "github.com/seckill/seckill/demo/lab"

// All returns every scenario, in the order the workshop plays them: the
// sale under every strategy, then each lock's failures beside their
// fixes, then the batch, the history and the rate limit's counter, then
// reserve, the order's life and the clusters under them (a Redis Cluster's
// failover, Galera).
func All() []lab.Scenario {
	return []lab.Scenario{
		saleScenario(),
		clockScenario(),
		unlockScenario(),
		overrunScenario(),
		killScenario(),
		nodeDownScenario(),
		nodeRestartScenario(),
		batchScenario(),
		linearScenario(),
		counterScenario(),
		reserveScenario(),
		ordersScenario(),
		failoverScenario(),
		galeraScenario(),
	}
}
