# shellcheck shell=bash
# gobuild.sh: sourced by scripts/tidb.sh and scripts/hydra.sh, which build a
# server from the Go module proxy once, into a cache outside the repository,
# and run it. They define log.
#
#   module_dir DIR MODULE@VERSION  prints where the module proxy's copy of
#                                  MODULE@VERSION is (downloaded from DIR,
#                                  outside any module, so no go.mod is touched)
#   cached_build BIN CACHE MAKE    unless BIN is there, runs MAKE TMP (TMP a
#                                  new directory in CACHE; MAKE writes TMP/out,
#                                  its output in TMP/build.log) and moves
#                                  TMP/out to BIN; one build at a time: a
#                                  second caller waits, then finds BIN
#   stop_pid PID                   stops a process the script started: TERM,
#                                  up to 10 s, then KILL

module_dir() {
	local dir
	dir=$(cd "$1" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "$2" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	if [ -z "$dir" ] || [ ! -d "$dir" ]; then
		log "go mod download $2 gave no directory"
		return 1
	fi
	echo "$dir"
}

cached_build() {
	local bin=$1 cache=$2 make=$3 tmp
	[ -x "$bin" ] && return 0
	mkdir -p "$cache"
	exec 9>"$cache/build.lock"
	flock 9
	if [ -x "$bin" ]; then exec 9>&-; return 0; fi
	tmp=$(mktemp -d "$cache/build.XXXXXX")
	log "building $(basename "$bin") into $cache (minutes on first run; log in $tmp/build.log)"
	if ! "$make" "$tmp" >"$tmp/build.log" 2>&1 || [ ! -x "$tmp/out" ]; then
		tail -n 30 "$tmp/build.log" >&2
		log "build failed (its tree is kept in $tmp)"
		exec 9>&-
		return 1
	fi
	mv "$tmp/out" "$bin"
	rm -rf "$tmp"
	exec 9>&-
	log "built $bin"
}

stop_pid() {
	kill "$1" 2>/dev/null || true
	for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
