#!/usr/bin/env bash
# hydra.sh COMMAND [ARG...]
#
# Makes a real OpenID Connect provider (ORY Hydra) available, runs COMMAND
# with it, then stops what it started:
#   - builds hydra once from the Go module proxy into a cache outside the
#     repository, ${SECKILL_HYDRA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seckill-hydra}
#     (about 60 MB; the first build takes minutes);
#   - starts its own provider on two free ports of 127.0.0.1 (public and
#     admin), in memory (SQLite), with JWT access tokens, and waits until its
#     discovery document answers.
# COMMAND sees SECKILL_TEST_HYDRA_ISSUER (the public URL, the tokens' iss) and
# SECKILL_TEST_HYDRA_ADMIN (the admin API's URL, for clients and keys).
#   scripts/testenv.sh scripts/hydra.sh go test -race -count=1 -run TestHydra ./internal/testkit/hydratest/
# `scripts/hydra.sh build` only builds (or finds) the binary and prints its path.
set -euo pipefail

# shellcheck source=scripts/ports.sh
. "$(dirname "${BASH_SOURCE[0]}")/ports.sh"
# shellcheck source=scripts/packages.sh
. "$(dirname "${BASH_SOURCE[0]}")/packages.sh"
# shellcheck source=scripts/gobuild.sh
. "$(dirname "${BASH_SOURCE[0]}")/gobuild.sh"

# The module's go.mod replaces its API client with ./internal/httpclient, a
# nested module its zip leaves out: the client of the same API is fetched
# and put in place.
HYDRA_MODULE=github.com/ory/hydra/v2@v2.3.0
CLIENT_MODULE=github.com/ory/hydra-client-go/v2@v2.2.1
cache=${SECKILL_HYDRA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/seckill-hydra}
bin=$cache/hydra-${HYDRA_MODULE##*@}

log() { echo "hydra: $*" >&2; }

# make_hydra TMP builds hydra into TMP/out, with -tags sqlite: the
# in-memory store (DSN=memory); without it hydra wants MySQL 8 or
# PostgreSQL.
make_hydra() {
	local src
	src=$(module_tree "$1" "$HYDRA_MODULE" "$CLIENT_MODULE" internal/httpclient) &&
		(cd "$src" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=1 go build -buildvcs=false -tags sqlite -o "$1/out" .)
}

build() { cached_build "$bin" "$cache" make_hydra; }

# hydra_port prints a free port below Linux's ephemeral range, apart from
# testenv.sh's Redis nodes (20000-29999) and tidb.sh's (10000-19999).
hydra_port() { free_port 30000 32000; }

start_once() {
	local public admin secret
	# set -e does not hold here (start_server tests this function): each
	# step that can fail says so.
	work=$(mktemp -d "${TMPDIR:-/tmp}/seckill-hydra.XXXXXX") || return 1
	public=$(hydra_port) || return 1
	admin=$(hydra_port) || return 1
	if [ "$public" = "$admin" ]; then admin=$(hydra_port) || return 1; fi
	secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n') || return 1
	# --dev allows the issuer over http; the store is in memory, so every
	# run starts with no clients and fresh keys.
	DSN=memory URLS_SELF_ISSUER="http://127.0.0.1:$public" \
		SERVE_PUBLIC_PORT="$public" SERVE_PUBLIC_HOST=127.0.0.1 \
		SERVE_ADMIN_PORT="$admin" SERVE_ADMIN_HOST=127.0.0.1 \
		STRATEGIES_ACCESS_TOKEN=jwt SECRETS_SYSTEM="$secret" LOG_LEVEL=warn \
		"$bin" serve all --dev --sqa-opt-out </dev/null >"$work/hydra.log" 2>&1 &
	pid=$!
	for _ in $(seq 1 120); do
		if curl -fsS -o /dev/null "http://127.0.0.1:$public/.well-known/openid-configuration" 2>/dev/null &&
			curl -fsS -o /dev/null "http://127.0.0.1:$admin/health/ready" 2>/dev/null; then
			SECKILL_TEST_HYDRA_ISSUER="http://127.0.0.1:$public"
			SECKILL_TEST_HYDRA_ADMIN="http://127.0.0.1:$admin"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	tail -n 30 "$work/hydra.log" >&2 || true
	log "hydra on ports $public and $admin did not answer"
	return 1
}

[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...] | $0 build" >&2; exit 2; }
# gcc and the C library's headers: the sqlite tag is cgo; curl: asking
# whether it answers.
packages_install_missing gcc=gcc /usr/include/stdlib.h=libc6-dev curl=curl
build
if [ "$1" = build ] && [ $# -eq 1 ]; then
	echo "$bin"
	exit 0
fi
start_server start_once
export SECKILL_TEST_HYDRA_ISSUER SECKILL_TEST_HYDRA_ADMIN
log "hydra ${SECKILL_TEST_HYDRA_ISSUER} (admin ${SECKILL_TEST_HYDRA_ADMIN}; log in $work/hydra.log)"
"$@"
