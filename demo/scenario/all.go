package scenario

import "github.com/seckill/seckill/demo/lab"

// All returns every scenario, in the order the workshop plays them: the
// sale under every strategy, then each lock's failures and their fixes,
// then the batch, the history and the counter, then reserve and the
// stores behind it.
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
