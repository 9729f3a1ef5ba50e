#!/usr/bin/env bash
# bench-driver.sh: is the load-test driver fast enough not to be the
# bottleneck? It builds the service and the driver, starts the service on a
# real MariaDB and three Redis nodes (scripts/testenv.sh makes them
# available), then fires at it with wrk and with the driver in turn, at the
# same concurrency and for the same time: GET /healthz (the driver's raw
# mode, -get /healthz), then purchases of one product under the default
# strategy (a stock that never runs out, no per-user limit: wrk sends one
# buyer again and again, the driver a buyer per request). It prints each
# client's rate and CPU per request, and the ratio driver / wrk (aim: at
# least 0.95, for both).
#
#   scripts/bench-driver.sh            # 2 rounds of 5 s, 64 connections, wrk -t 2
#   ROUNDS=3 DURATION=10 CONCURRENCY=128 scripts/bench-driver.sh
#
# Installs wrk and curl with apt-get when missing. Stops what it started.
set -euo pipefail

cd "$(dirname "$0")/.."
if [ -z "${SECKILL_TEST_MYSQL_DSN:-}" ]; then
	exec scripts/testenv.sh "$0" "$@"
fi
# shellcheck source=scripts/packages.sh
. scripts/packages.sh
# shellcheck source=scripts/ports.sh
. scripts/ports.sh
packages_install_missing wrk=wrk curl=curl

ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-5}
CONCURRENCY=${CONCURRENCY:-64}
THREADS=${THREADS:-2}

work=$(mktemp -d "${TMPDIR:-/tmp}/seckill-bench.XXXXXX")
database="seckill_bench_driver_$$"
service_pid=""
cleanup() {
	if [ -n "$service_pid" ]; then
		kill "$service_pid" 2>/dev/null || true
		wait "$service_pid" 2>/dev/null || true
	fi
	drop_database || echo "bench-driver: could not drop database $database" >&2
	rm -rf "$work"
}
trap cleanup EXIT

# drop_database drops the run's database through the server of the DSN.
drop_database() {
	local addr user cli password=()
	addr=$(sed -E 's/.*@tcp\(([^)]*)\).*/\1/' <<<"$SECKILL_TEST_MYSQL_DSN")
	user=${SECKILL_TEST_MYSQL_DSN%%@*}
	if [[ $user == *:* ]]; then
		password=("-p${user#*:}")
	fi
	cli=$(command -v mariadb || command -v mysql)
	"$cli" -h "${addr%:*}" -P "${addr##*:}" -u "${user%%:*}" "${password[@]}" \
		-e "DROP DATABASE IF EXISTS $database"
}

echo "bench-driver: building the service and the driver" >&2
go build -o "$work/seckill" .
go build -o "$work/loadtest" ./loadtest

port=$(free_port 20000 29999)
url="http://127.0.0.1:$port"
token=bench

dsn="${SECKILL_TEST_MYSQL_DSN%/*}/$database?parseTime=true"
SECKILL_ADDR="127.0.0.1:$port" SECKILL_MYSQL_DSN="$dsn" SECKILL_REDIS_ADDRS="$SECKILL_TEST_REDIS_ADDRS" \
	SECKILL_ADMIN_TOKEN=$token SECKILL_PER_USER_LIMIT=0 "$work/seckill" >"$work/service.log" 2>&1 &
service_pid=$!
for _ in $(seq 1 200); do
	curl -sf "$url/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -sf "$url/readyz" >/dev/null || { echo "bench-driver: the service did not start:" >&2; cat "$work/service.log" >&2; exit 1; }
product=$(curl -sf -H "Authorization: Bearer $token" -d '{"name":"bench-driver","stock":1000000000}' \
	"$url/api/v1/admin/products" | sed -E 's/.*"id":([0-9]+).*/\1/')
[ -n "$product" ] || { echo "bench-driver: could not create the product" >&2; exit 1; }
cat >"$work/purchase.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"user_id":"wrk","quantity":1}'
wrk.headers["Content-Type"] = "application/json"
LUA

# Each run's CPU time (user + sys, from bash's time) says what a request
# costs each client, a figure that other load on the machine disturbs less
# than the rate does. run_wrk and run_driver set rate, n (requests) and
# cpu (seconds).
TIMEFORMAT='%U %S'
run_wrk() { # path [wrk args]
	local path=$1
	shift
	{ time wrk -t "$THREADS" -c "$CONCURRENCY" -d "${DURATION}s" "$@" "$url$path" >"$work/wrk.out"; } 2>"$work/wrk.time"
	if grep -q 'Non-2xx' "$work/wrk.out"; then
		echo "bench-driver: wrk got answers other than 2xx:" >&2
		cat "$work/wrk.out" >&2
		exit 1
	fi
	rate=$(awk '/^Requests\/sec:/ {print $2}' "$work/wrk.out")
	n=$(awk '/requests in/ {print $1}' "$work/wrk.out")
	cpu=$(awk '{print $1 + $2}' "$work/wrk.time")
}
run_driver() { # driver args
	{ time "$work/loadtest" -url "$url" -admin-token "$token" -concurrency "$CONCURRENCY" -duration "${DURATION}s" \
		-quiet -json "$work/driver.json" "$@" >/dev/null; } 2>"$work/driver.time"
	rate=$(awk -F': ' '/"throughput"/ {gsub(/,/, "", $2); print $2; exit}' "$work/driver.json")
	n=$(awk -F': ' '/"results"/ {r = 1} r && /"requests"/ {gsub(/,/, "", $2); print $2; exit}' "$work/driver.json")
	cpu=$(awk '{print $1 + $2}' "$work/driver.time")
}

echo "bench-driver: $CONCURRENCY connections, $ROUNDS rounds of ${DURATION}s, $(nproc) CPUs" >&2
wrk -t "$THREADS" -c "$CONCURRENCY" -d 1s "$url/healthz" >/dev/null # warm up the service
"$work/loadtest" -url "$url" -get /healthz -concurrency "$CONCURRENCY" -duration 1s -quiet >/dev/null

printf '%-6s %-10s %12s %14s %7s %16s %19s\n' round what "wrk req/s" "driver req/s" ratio "wrk CPU µs/req" "driver CPU µs/req"
: >"$work/rows"
for round in $(seq 1 "$ROUNDS"); do
	for what in healthz purchase; do
		if [ "$what" = healthz ]; then
			run_wrk /healthz
			w=$rate wn=$n wc=$cpu
			run_driver -get /healthz
		else
			run_wrk "/api/v1/products/$product/purchase" -s "$work/purchase.lua"
			w=$rate wn=$n wc=$cpu
			run_driver -product "$product"
		fi
		awk -v r="$round" -v k="$what" -v w="$w" -v d="$rate" -v wn="$wn" -v wc="$wc" -v n="$n" -v dc="$cpu" \
			'BEGIN {printf "%-6s %-10s %12.0f %14.0f %7.2f %16.1f %19.1f\n", r, k, w, d, d / w, wc * 1e6 / wn, dc * 1e6 / n}' |
			tee -a "$work/rows"
	done
done
awk '{w[$2] += $3; d[$2] += $4; wc[$2] += $6; dc[$2] += $7; n[$2]++}
	END {
		for (k in w) {
			printf "driver / wrk, %s: %.2f of the rate (aim: >= 0.95: %s); %.1fx the CPU per request of wrk\n",
				k, d[k] / w[k], d[k] / w[k] >= 0.95 ? "met" : "NOT MET", dc[k] / wc[k]
		}
	}' "$work/rows" | sort
