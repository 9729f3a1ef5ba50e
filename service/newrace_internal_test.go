package service

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/testenv"
	"github.com/seckill/seckill/service/orders"
	"github.com/seckill/seckill/store"
)

// TestNewStartsWorkAfterWiring: New sets up everything its background
// work reads (reserve's Redis side, the consumer's name) before it starts
// it. Under -race, a sweep that ran before the wiring was done (the first
// one comes orders.SweepEvery after New) was a data race on the service's fields.
func TestNewStartsWorkAfterWiring(t *testing.T) {
	addrs := testenv.RedisAddrs(t)
	nodes := store.OpenRedis(addrs)
	t.Cleanup(func() {
		for _, n := range nodes {
			if err := n.Close(); err != nil {
				t.Errorf("close redis: %v", err)
			}
		}
	})
	s, _ := newOnMySQLWith(t, testenv.MySQL(t), Config{KeyPrefix: testenv.KeyPrefix(t, addrs), NoWriter: true}, nodes)
	if s.reserve == nil {
		t.Fatal("New set up no reserve side over the Redis nodes given")
	}
	time.Sleep(2 * orders.SweepEvery) // a sweep or two, finishReturns reading s.reserve
}
