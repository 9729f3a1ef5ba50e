#!/usr/bin/env bash
# demo.sh [ARG...]
#
# make demo: go run . demo with a sign of life. Builds the program with
# go build into DEMO_BIN, saying first that it compiles and then, until the
# build ends, every DEMO_HEARTBEAT seconds that it still does (a first build
# on a fresh clone downloads the modules and compiles for a few minutes,
# and go build prints nothing while it compiles); then runs DEMO_BIN demo
# ARG... and exits with its status. When the build fails, it exits with go
# build's status after go's error and no heartbeat after it.
#
# Environment:
#   DEMO_HEARTBEAT  seconds between two "still compiling" lines (default 15)
#   DEMO_BIN        where the program is built, from the repository
#                   (default bin/seckill, which git ignores)
#   GOFLAGS         go build flags, as for any go command (e.g. -a)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck source=scripts/heartbeat.sh
. "$here/heartbeat.sh"

cd "$root"
bin=${DEMO_BIN:-bin/seckill}
case $bin in */*) ;; *) bin=./$bin ;; esac # exec runs it, not one on PATH

log() { echo "demo: $*" >&2; }
still_compiling() { log "still compiling ($1 s)"; }

log "compiling the program into $bin (go build), then running its demo; the first build on a fresh clone takes a few minutes"
mkdir -p "$(dirname "$bin")"
trap heartbeat_stop EXIT
heartbeat_start "${DEMO_HEARTBEAT:-15}" still_compiling
status=0
go build -o "$bin" . || status=$?
heartbeat_stop
[ "$status" = 0 ] || exit "$status"
exec "$bin" demo "$@"
