#!/usr/bin/env bash
# tidb.sh COMMAND [ARG...]
#
# Makes a TiDB server (a MySQL-protocol distributed database's SQL layer)
# available, runs COMMAND with it, then stops what it started:
#   - builds tidb-server once from the Go module proxy into a cache outside
#     the repository, ${SECKILL_TIDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seckill-tidb}
#     (the binary is about 240 MB; the first build takes minutes);
#   - starts its own server on a free port of 127.0.0.1, on TiDB's embedded
#     store (unistore, in memory: not a TiKV/PD cluster, which is Rust and not
#     built here), with its own temp dir, and waits until it answers.
# COMMAND sees SECKILL_TEST_TIDB_DSN (a server DSN, no database, like
# SECKILL_TEST_MYSQL_DSN). Run it inside scripts/testenv.sh so that the Redis
# nodes and MariaDB are there too:
#   scripts/testenv.sh scripts/tidb.sh go test -race -count=1 -run TestTiDB ./internal/testkit/tidbtest/
# `scripts/tidb.sh build` only builds (or finds) the binary and prints its path.
set -euo pipefail

# shellcheck source=scripts/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/ports.sh"
# shellcheck source=scripts/gobuild.sh
. "$(dirname "${BASH_SOURCE[0]}")/gobuild.sh"

# A v8.4-era commit of TiDB. The module's go.mod replaces its parser with
# ./pkg/parser, a nested module its zip leaves out: it is fetched at the
# same commit and put back in place.
TIDB_MODULE=github.com/pingcap/tidb@v1.1.0-beta.0.20241125141335-ec8b81b98edc
PARSER_MODULE=github.com/pingcap/tidb/pkg/parser@v0.0.0-20241125141335-ec8b81b98edc
cache=${SECKILL_TIDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seckill-tidb}
bin=$cache/tidb-server-${TIDB_MODULE##*-}

log() { echo "tidb: $*" >&2; }

# make_tidb TMP builds tidb-server into TMP/out.
make_tidb() {
	local src
	src=$(module_tree "$1" "$TIDB_MODULE" "$PARSER_MODULE" pkg/parser) &&
		(cd "$src" && GOWORK=off GOFLAGS=-mod=mod go build -buildvcs=false -o "$1/out" ./cmd/tidb-server)
}

build() { cached_build "$bin" "$cache" make_tidb; }

# tidb_port prints a free port below Linux's ephemeral range (32768-60999),
# where an outgoing connection's own port could take one between this check
# and the bind, and apart from testenv.sh's Redis nodes (20000-29999).
tidb_port() { free_port 10000 19999; }

# answers: the server takes a connection and runs a statement. Without a
# mysql client, an open port is taken as the answer.
answers() {
	local cli
	cli=$(command -v mariadb || command -v mysql || true)
	if [ -n "$cli" ]; then
		# tidb_version() exists on TiDB only: no other server on the port
		# is taken for it.
		"$cli" -h 127.0.0.1 -P "$1" -uroot --connect-timeout=2 -e 'SELECT tidb_version()' >/dev/null 2>&1
	else
		port_open 127.0.0.1 "$1"
	fi
}

start_once() {
	local port status
	# set -e does not hold here (start_server tests this function): each
	# step that can fail says so.
	work=$(mktemp -d "${TMPDIR:-/tmp}/seckill-tidb.XXXXXX") || return 1
	mkdir -p "$work/tmp" || return 1
	port=$(tidb_port) || return 1
	status=$(tidb_port) || return 1
	if [ "$port" = "$status" ]; then status=$(tidb_port) || return 1; fi
	# -path "" keeps unistore in memory; the temp dir is the server's own
	# (TiDB locks it, so two servers cannot share one).
	"$bin" -store unistore -path "" -host 127.0.0.1 -P "$port" -status "$status" \
		-status-host 127.0.0.1 -socket "" -temp-dir "$work/tmp" \
		-log-file "$work/tidb.log" -log-slow-query "$work/slow.log" </dev/null >"$work/stdout.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 240); do
		if answers "$port"; then
			SECKILL_TEST_TIDB_DSN="root@tcp(127.0.0.1:$port)/"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	tail -n 30 "$work/tidb.log" "$work/stdout.log" >&2 || true
	log "tidb-server on port $port did not answer"
	return 1
}

[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...] | $0 build" >&2; exit 2; }
build
if [ "$1" = build ] && [ $# -eq 1 ]; then
	echo "$bin"
	exit 0
fi
start_server start_once
export SECKILL_TEST_TIDB_DSN
log "tidb ${SECKILL_TEST_TIDB_DSN} (log in $work/tidb.log)"
"$@"
