#!/usr/bin/env bash
# bench-driver.sh: is the load-test driver fast enough not to be the
# bottleneck? It builds the service and the driver, starts the service on its
# embedded stores, then fires GET /healthz at it with wrk and with the
# driver's raw mode (-get /healthz) in turn, at the same concurrency, and
# prints both request rates and their ratio (driver / wrk; aim: >= 0.8).
#
#   scripts/bench-driver.sh            # 3 rounds of 5 s, 64 connections, wrk -t 2
#   ROUNDS=5 DURATION=10 CONCURRENCY=128 scripts/bench-driver.sh
#
# Needs wrk (apt-get install -y wrk) and curl. Stops what it started.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONCURRENCY=${CONCURRENCY:-64}
THREADS=${THREADS:-2}

cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "bench-driver: wrk not found (apt-get install -y wrk)" >&2; exit 1; }
command -v curl >/dev/null || { echo "bench-driver: curl not found" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/seckill-bench.XXXXXX")
service_pid=""
cleanup() {
	if [ -n "$service_pid" ]; then
		kill "$service_pid" 2>/dev/null || true
		wait "$service_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "bench-driver: building the service and the driver" >&2
go build -o "$work/seckill" .
go build -o "$work/loadtest" ./loadtest

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=""
for p in $(shuf -i 20000-29999 -n 50); do
	port_open "$p" || { port=$p; break; }
done
[ -n "$port" ] || { echo "bench-driver: no free port" >&2; exit 1; }
url="http://127.0.0.1:$port"

SECKILL_ADDR="127.0.0.1:$port" SECKILL_MYSQL_DSN="" SECKILL_REDIS_ADDRS="" \
	SECKILL_ADMIN_TOKEN=bench "$work/seckill" >"$work/service.log" 2>&1 &
service_pid=$!
for _ in $(seq 1 100); do
	curl -sf "$url/healthz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -sf "$url/healthz" >/dev/null || { echo "bench-driver: the service did not start:" >&2; cat "$work/service.log" >&2; exit 1; }

# Each run's CPU time (user + sys, from bash's time) says what a request
# costs each client, a figure that other load on the machine disturbs less
# than the rate does.
TIMEFORMAT='%U %S'
run_wrk() { # sets w (req/s), wn (requests), wcpu (CPU seconds)
	{ time wrk -t "$THREADS" -c "$CONCURRENCY" -d "${DURATION}s" "$url/healthz" >"$work/wrk.out"; } 2>"$work/wrk.time"
	w=$(awk '/^Requests\/sec:/ {print $2}' "$work/wrk.out")
	wn=$(awk '/requests in/ {print $1}' "$work/wrk.out")
	wcpu=$(awk '{print $1 + $2}' "$work/wrk.time")
}
run_driver() { # sets d (req/s), dn (requests), dcpu (CPU seconds)
	{ time "$work/loadtest" -url "$url" -get /healthz -concurrency "$CONCURRENCY" -duration "${DURATION}s" -quiet \
		-json "$work/driver.json" >/dev/null; } 2>"$work/driver.time"
	d=$(awk -F': ' '/"throughput"/ {gsub(/,/, "", $2); print $2; exit}' "$work/driver.json")
	dn=$(awk -F': ' '/"results"/ {r = 1} r && /"requests"/ {gsub(/,/, "", $2); print $2; exit}' "$work/driver.json")
	dcpu=$(awk '{print $1 + $2}' "$work/driver.time")
}

echo "bench-driver: GET /healthz, $CONCURRENCY connections, $ROUNDS rounds of ${DURATION}s, $(nproc) CPUs" >&2
wrk -t "$THREADS" -c "$CONCURRENCY" -d 1s "$url/healthz" >/dev/null # warm up the service
"$work/loadtest" -url "$url" -get /healthz -concurrency "$CONCURRENCY" -duration 1s -quiet >/dev/null

sums="0 0 0 0" # wrk req/s, driver req/s, wrk CPU µs/req, driver CPU µs/req
printf '%-6s %12s %14s %7s %16s %19s\n' round "wrk req/s" "driver req/s" ratio "wrk CPU µs/req" "driver CPU µs/req"
for round in $(seq 1 "$ROUNDS"); do
	run_wrk
	run_driver # its closed loop runs DURATION, as wrk -d does
	line=$(awk -v w="$w" -v d="$d" -v wn="$wn" -v wc="$wcpu" -v n="$dn" -v dc="$dcpu" \
		'BEGIN {printf "%.0f %.0f %.2f %.1f %.1f", w, d, d / w, wc * 1e6 / wn, dc * 1e6 / n}')
	read -r lw ld lr lwc ldc <<<"$line"
	printf '%-6s %12s %14s %7s %16s %19s\n' "$round" "$lw" "$ld" "$lr" "$lwc" "$ldc"
	sums=$(awk -v s="$sums" -v l="$lw $ld $lwc $ldc" 'BEGIN {split(s, a); split(l, b); printf "%s %s %s %s", a[1]+b[1], a[2]+b[2], a[3]+b[3], a[4]+b[4]}')
done
awk -v s="$sums" -v n="$ROUNDS" -v c="$CONCURRENCY" 'BEGIN {
	split(s, a)
	printf "%-6s %12.0f %14.0f %7.2f %16.1f %19.1f\n", "mean", a[1] / n, a[2] / n, a[2] / a[1], a[3] / n, a[4] / n
	printf "driver / wrk = %.2f of the request rate at concurrency %d (aim: >= 0.80); the driver spends %.1fx the CPU per request of wrk\n",
		a[2] / a[1], c, a[4] / a[3]
}'
