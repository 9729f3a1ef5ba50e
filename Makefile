# The commands the README gives. Each runs against a real MariaDB/MySQL and
# three independent Redis nodes that scripts/testenv.sh makes available.
.PHONY: test bench vet soak

test:
	scripts/testenv.sh go test -race -count=1 ./...

bench:
	scripts/testenv.sh go test -run '^$$' -bench BenchmarkPurchase -benchtime 2000x ./service/

vet:
	gofmt -l . | (! grep .) && go vet ./...

# The fault soak: buyers write a history against two instances while a
# schedule drawn from SOAK_SEED (printed; random when unset) kills, stops
# and restarts processes and breaks the path to MariaDB; then the history
# is checked. SOAK_DURATION=20s make soak is the short run CI makes.
SOAK_DURATION ?= 2m
soak:
	SOAK_DURATION=$(SOAK_DURATION) scripts/testenv.sh go test -run '^TestSoak$$' -v -count=1 -timeout 60m ./internal/faulttest/
