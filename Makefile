# The commands the README gives. Each runs against a real MariaDB/MySQL and
# three independent Redis nodes that scripts/testenv.sh makes available.
.PHONY: test bench vet

test:
	scripts/testenv.sh go test -race -count=1 ./...

bench:
	scripts/testenv.sh go test -run '^$$' -bench BenchmarkPurchase -benchtime 2000x ./service/

vet:
	gofmt -l . | (! grep .) && go vet ./...
