# The commands the README gives. test, bench, soak and test-tidb run against
# a real MariaDB/MySQL and three independent Redis nodes that
# scripts/testenv.sh makes available; vet and fuzz need neither, stack runs
# its own (scripts/stack.sh).
.PHONY: demo test bench bench-driver bench-writers vet fuzz soak test-tidb test-galera test-hydra

# The workshop, go run . demo with a sign of life (scripts/demo.sh): builds
# the program into bin/seckill, saying every DEMO_HEARTBEAT seconds that it
# still compiles (a first build on a fresh clone takes a few minutes),
# then runs its demo with DEMO_ARGS (make demo DEMO_ARGS='-scenario sale').
DEMO_HEARTBEAT ?= 15
DEMO_ARGS ?=
demo:
	@DEMO_HEARTBEAT=$(DEMO_HEARTBEAT) scripts/demo.sh $(DEMO_ARGS)

test:
	scripts/testenv.sh go test -race -count=1 ./...

bench:
	scripts/testenv.sh go test -run '^$$' -bench 'BenchmarkHandler|BenchmarkPurchase|BenchmarkSoldOut|BenchmarkBatchSell' -benchmem -benchtime 2000x ./controller/ ./service/

# The driver against wrk on the same service (GET /healthz and purchases):
# is the driver the bottleneck? (scripts/bench-driver.sh installs wrk.)
bench-driver:
	scripts/bench-driver.sh

# The reservations per second reserve's writers sustain draining a backlog
# (a catalogue and one product), beside the 64-connection anchor.
bench-writers:
	scripts/testenv.sh go test -run '^$$' -bench BenchmarkWritersDrain -benchtime 1x ./service/

# gofmt, go vet and staticcheck (from the module proxy) clean.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
vet:
	gofmt -l . | (! grep .) && go vet ./... && go run $(STATICCHECK) ./...

# Go's native fuzzing, FUZZTIME per target (their seed corpora run in every
# go test). CI runs 30 s of each.
FUZZTIME ?= 30s
FUZZ_TARGETS = FuzzDecodePurchase:./controller FuzzDecodePurchaseFast:./controller FuzzCheckID:./api FuzzRead:./history FuzzVerify:./buyer
# Go 1.26's fuzzing coordinator can fail a run that found nothing with
# "context deadline exceeded" as -fuzztime ends, on a loaded machine
# (go.dev/issue/75804, fixed in Go 1.27; it failed CI once here): the fuzz
# runs use Go 1.27.3, which the go command fetches from the module proxy.
# The project itself stays on the Go of go.mod.
FUZZ_TOOLCHAIN ?= go1.27.3
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} for $(FUZZTIME) on $(FUZZ_TOOLCHAIN)"; \
		GOTOOLCHAIN=$(FUZZ_TOOLCHAIN) go test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) "$${t#*:}"; \
	done

# The fault soak: buyers write a history against two instances while a
# schedule drawn from SOAK_SEED (printed; random when unset) kills, stops
# and restarts processes and breaks the path to MariaDB; then the history
# is checked. SOAK_DURATION=20s make soak is the short run CI makes.
SOAK_DURATION ?= 2m
soak:
	SOAK_DURATION=$(SOAK_DURATION) scripts/testenv.sh go test -run '^TestSoak$$' -v -count=1 -timeout 60m ./internal/testkit/faulttest/

# The service on TiDB's SQL layer (docs/distributed.md): builds tidb-server
# from the Go module proxy once (minutes; cached outside the repository),
# starts it, and runs TestTiDB against it with the Redis nodes of testenv.sh.
test-tidb:
	scripts/testenv.sh scripts/tidb.sh go test -race -count=1 -run '^TestTiDB$$' -v ./internal/testkit/tidbtest/

# The service on a MariaDB Galera Cluster (docs/distributed.md): TestGalera
# starts three nodes of its own from Debian's packages (mariadb-server,
# galera-4, rsync: scripts/testenv.sh installs them) on free loopback ports,
# an instance writing through node 0 and one through node 2.
test-galera:
	SECKILL_TEST_GALERA=1 scripts/testenv.sh go test -race -count=1 -run '^TestGalera' -v -timeout 20m ./internal/testkit/galeratest/ ./internal/testkit/testenv/

# Buyers' tokens from a real OpenID Connect provider (docs/security.md):
# builds ORY Hydra from the Go module proxy once (minutes; cached outside
# the repository), starts it in memory, and runs TestHydra against it: the
# service discovers its keys, buyers get tokens from it, and it rotates its
# key mid-test.
test-hydra:
	scripts/testenv.sh scripts/hydra.sh go test -race -count=1 -run '^TestHydra$$' -v ./internal/testkit/hydratest/

# The topology of docker-compose.yml without Docker, from Debian's packages:
# state under STACK_DIR (.stack/), nginx on STACK_HTTP_PORT (8080),
# Prometheus on STACK_PROMETHEUS_PORT (9090). scripts/stack.sh status says
# what runs.
.PHONY: stack stack-down
stack:
	scripts/stack.sh up

stack-down:
	scripts/stack.sh down
