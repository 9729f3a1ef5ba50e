package app_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/testkit/testenv"
)

// TestInstancesStartAtOnce: six instances started at the same moment
// against a database that does not exist yet all start (create the
// database, migrate the tables) and find the same tables; a few rounds, each
// on a new database, give the race its chances. Without the migration lock
// some die with "Table ... already exists".
func TestInstancesStartAtOnce(t *testing.T) {
	const rounds, instances = 4, 6
	addrs := testenv.RedisAddrs(t)
	for round := range rounds {
		cfg, err := app.LoadConfig(func(k string) string {
			return map[string]string{
				"SECKILL_MYSQL_DSN":   testenv.MySQLNotCreated(t),
				"SECKILL_REDIS_ADDRS": strings.Join(addrs, ","),
			}[k]
		}, false)
		if err != nil {
			t.Fatalf("LoadConfig = %v", err)
		}
		var wg sync.WaitGroup
		errs := make([]error, instances)
		start := make(chan struct{})
		for i := range instances {
			wg.Go(func() {
				<-start
				st, err := app.OpenStores(context.Background(), cfg, slog.New(slog.DiscardHandler))
				if err != nil {
					errs[i] = err
					return
				}
				var tables []string
				errs[i] = st.DB.Raw("SHOW TABLES").Scan(&tables).Error
				if errs[i] == nil && strings.Join(tables, ",") != "orders,products,reserve_returns,user_units" {
					t.Errorf("round %d, instance %d: tables %q; want orders, products, reserve_returns, user_units", round, i, tables)
				}
				if err := st.Close(); err != nil && errs[i] == nil {
					errs[i] = err
				}
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: instance %d of %d started at once: %v", round, i, instances, err)
			}
		}
	}
}

// TestAcksWarnsOfMissingReplicas: an instance whose SECKILL_RESERVE_ACKS
// waits for a replica that its reserve Redis does not have says so in its
// log when it starts, naming that master; with the replica connected it
// says nothing of it.
func TestAcksWarnsOfMissingReplicas(t *testing.T) {
	master := testenv.StartRedis(t)
	addrs := testenv.RedisAddrs(t)
	warned := func() bool {
		t.Helper()
		cfg, err := app.LoadConfig(func(k string) string {
			return map[string]string{
				"SECKILL_MYSQL_DSN":     testenv.MySQL(t),
				"SECKILL_REDIS_ADDRS":   strings.Join(addrs, ","),
				"SECKILL_RESERVE_REDIS": master.Addr,
				"SECKILL_RESERVE_ACKS":  "1/100ms",
			}[k]
		}, false)
		if err != nil {
			t.Fatalf("LoadConfig = %v", err)
		}
		var logs testenv.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		st, err := app.OpenStores(t.Context(), cfg, log)
		if err != nil {
			t.Fatal(err)
		}
		srv := app.NewServer(t.Context(), cfg, st, log, app.Options{KeyPrefix: testenv.KeyPrefix(t, addrs)})
		defer func() {
			if err := errors.Join(srv.Close(), st.Close()); err != nil {
				t.Error(err)
			}
		}()
		return strings.Contains(logs.String(), "SECKILL_RESERVE_ACKS waits for more replicas") && strings.Contains(logs.String(), master.Addr)
	}
	if !warned() {
		t.Error("no warning of a master of reserve's Redis without the replica SECKILL_RESERVE_ACKS waits for")
	}
	testenv.StartRedisReplica(t, master)
	if warned() {
		t.Error("a warning of missing replicas with the replica connected")
	}
}
