#!/usr/bin/env bash
# testenv.sh COMMAND [ARG...]
#
# Makes a real MariaDB/MySQL and three independent redis-server processes
# available, runs COMMAND with them, then stops what it started:
#   - uses a MySQL server that already answers on 127.0.0.1:3306
#     (SECKILL_TEST_MYSQL_PORT);
#   - installs mariadb-server and mariadb-client, redis-server, curl and
#     chromium (for the tests that look at the pages in a headless browser)
#     with apt-get when missing (the fault tests start MariaDB servers of
#     their own, so mariadbd and mariadb-install-db must be here even when a
#     server already answers), galera-4 and rsync (the tests that start a
#     Galera Cluster of their own: internal/testkit/testenv/galera.go), and nginx,
#     prometheus and redis-tools for the test of scripts/stack.sh (no system
#     service is started: see scripts/packages.sh);
#   - starts MariaDB when it is not running (and stops it afterwards);
#   - always starts its own three Redis nodes on free ports of its own.
# COMMAND sees SECKILL_TEST_MYSQL_DSN (a server DSN, no database),
# SECKILL_TEST_REDIS_ADDRS (three host:port, comma-separated) and
# SECKILL_TEST_GALERA_REQUIRED=1 (unless set otherwise): what it installed
# is there, so a Galera test fails instead of skipping when a piece is not.
set -euo pipefail

# shellcheck source=scripts/packages.sh
. "$(dirname "${BASH_SOURCE[0]}")/packages.sh"
# shellcheck source=scripts/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/ports.sh"
# shellcheck source=scripts/heartbeat.sh
. "$(dirname "${BASH_SOURCE[0]}")/heartbeat.sh"

MYSQL_HOST=127.0.0.1
MYSQL_PORT=${SECKILL_TEST_MYSQL_PORT:-3306}
work=$(mktemp -d "${TMPDIR:-/tmp}/seckill-testenv.XXXXXX")
started_mysql=""
redis_pids=()

log() { echo "testenv: $*" >&2; }

cleanup() {
	local pid
	heartbeat_stop
	for pid in "${redis_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${redis_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [ -n "$started_mysql" ]; then
		log "stopping the MariaDB it started"
		as_root start-stop-daemon --stop --oknodo --retry 30 --pidfile "$started_mysql" >/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

install_missing() {
	# curl: the README's curl sale (readme_test.go).
	packages_install_missing redis-server=redis-server curl=curl "chromium|chromium-browser=chromium" \
		mariadb-install-db=mariadb-server mariadbd=mariadb-server "mysql|mariadb=mariadb-client" \
		rsync=rsync
	# The Galera Cluster's provider is a library, not a command, which
	# packages_install_missing cannot look for: the name given for it is
	# found nowhere, so that galera-4 is installed.
	if [ ! -e /usr/lib/galera/libgalera_smm.so ]; then
		packages_install_missing libgalera_smm.so=galera-4
	fi
	# The stack's test (deploy/stack_test.go); without the recommended
	# prometheus-node-exporter, a system service.
	packages_install_missing --no-recommends nginx=nginx prometheus=prometheus redis-cli=redis-tools
}

start_mysql() {
	port_open "$MYSQL_HOST" "$MYSQL_PORT" && return 0
	local bin
	bin=$(command -v mariadbd || command -v mysqld)
	log "starting MariaDB ($bin)"
	as_root mkdir -p /run/mysqld
	as_root chown mysql:mysql /run/mysqld 2>/dev/null || true
	if [ ! -d /var/lib/mysql/mysql ]; then
		as_root mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
	fi
	started_mysql=$work/mysqld.pid
	as_root start-stop-daemon --start --background --make-pidfile --pidfile "$started_mysql" \
		--exec "$bin" -- --user=mysql --bind-address=127.0.0.1 --port="$MYSQL_PORT"
	for _ in $(seq 1 120); do
		port_open "$MYSQL_HOST" "$MYSQL_PORT" && return 0
		sleep 0.5
	done
	log "MariaDB did not start"
	return 1
}

mysql_cli() { command -v mariadb || command -v mysql; }

# mysql_dsn prints a DSN that can create databases: root with no password
# over TCP when that works, else a user it creates through the local socket.
mysql_dsn() {
	local cli
	cli=$(mysql_cli)
	if "$cli" -h "$MYSQL_HOST" -P "$MYSQL_PORT" -uroot -e 'SELECT 1' >/dev/null 2>&1; then
		echo "root@tcp($MYSQL_HOST:$MYSQL_PORT)/"
		return
	fi
	log "root needs a password over TCP: creating user seckill_test"
	as_root "$cli" -uroot -e "CREATE USER IF NOT EXISTS 'seckill_test'@'127.0.0.1' IDENTIFIED BY 'seckill_test';
		CREATE USER IF NOT EXISTS 'seckill_test'@'localhost' IDENTIFIED BY 'seckill_test';
		GRANT ALL ON *.* TO 'seckill_test'@'127.0.0.1'; GRANT ALL ON *.* TO 'seckill_test'@'localhost';"
	echo "seckill_test:seckill_test@tcp($MYSQL_HOST:$MYSQL_PORT)/"
}

# start_redis_nodes sets SECKILL_TEST_REDIS_ADDRS; it runs in this shell
# (not in $(...)) so that cleanup knows the pids.
start_redis_nodes() {
	local addrs=() i port
	for i in 1 2 3; do
		# One at a time, so that the next free port is chosen after this
		# node has bound its own.
		port=$(free_port 20000 29999)
		mkdir -p "$work/redis$i"
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
			--dir "$work/redis$i" --logfile "$work/redis$i/redis.log" </dev/null >/dev/null 2>&1 &
		redis_pids+=($!)
		for _ in $(seq 1 100); do
			port_open 127.0.0.1 "$port" && break
			sleep 0.1
		done
		port_open 127.0.0.1 "$port" || { log "redis on port $port did not start"; return 1; }
		addrs+=("127.0.0.1:$port")
	done
	SECKILL_TEST_REDIS_ADDRS=$(IFS=,; echo "${addrs[*]}")
}

[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }
install_missing
start_mysql
SECKILL_TEST_MYSQL_DSN=$(mysql_dsn)
start_redis_nodes
SECKILL_TEST_GALERA_REQUIRED=${SECKILL_TEST_GALERA_REQUIRED:-1}
export SECKILL_TEST_MYSQL_DSN SECKILL_TEST_REDIS_ADDRS SECKILL_TEST_GALERA_REQUIRED
log "mysql ${SECKILL_TEST_MYSQL_DSN}; redis ${SECKILL_TEST_REDIS_ADDRS}"
# A sign of life while the command runs: go test prints nothing until a
# package is done, and compiling them all first takes minutes on a fresh
# clone. A line every TESTENV_HEARTBEAT seconds (30), in a terminal, a pipe
# or CI alike (scripts/heartbeat.sh).
still_running() { log "still running ($1), $2 s so far"; }
heartbeat_start "${TESTENV_HEARTBEAT:-30}" still_running "$1"
"$@"
