# shellcheck shell=bash
# gobuild.sh: sourced by scripts/tidb.sh and scripts/hydra.sh, which build a
# server from the Go module proxy once, into a cache outside the repository,
# and run it. They define log, and keep the server's process ID in pid and
# its directory in work; the server is stopped when the script exits.
#
#   module_dir DIR MODULE@VERSION  prints where the module proxy's copy of
#                                  MODULE@VERSION is (downloaded from DIR,
#                                  outside any module, so no go.mod is touched)
#   cached_build BIN CACHE MAKE    unless BIN is there, runs MAKE TMP (TMP a
#                                  new directory in CACHE; MAKE writes TMP/out,
#                                  its output in TMP/build.log) and moves
#                                  TMP/out to BIN; one build at a time: a
#                                  second caller waits, then finds BIN
#   module_tree DIR MODULE@VERSION NESTED@VERSION PATH
#                                  copies MODULE's source to DIR/src, writable,
#                                  with NESTED's in place of its PATH (a nested
#                                  module that the module's go.mod replaces and
#                                  its zip leaves out), and prints DIR/src
#   start_server START_ONCE        runs START_ONCE, again while the server
#                                  exits at once (a port taken between its
#                                  choice and the bind), three tries in all
#   stop_server                    stops the server (TERM, up to 10 s, then
#                                  KILL) and removes its directory

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

module_tree() {
	local dir=$1 src nested
	src=$(module_dir "$dir" "$2") && nested=$(module_dir "$dir" "$3") &&
		cp -r "$src" "$dir/src" && chmod -R u+w "$dir/src" &&
		rm -rf "${dir:?}/src/$4" && cp -r "$nested" "$dir/src/$4" && chmod -R u+w "$dir/src/$4" &&
		echo "$dir/src"
}

start_server() {
	local try
	for try in 1 2 3; do
		"$1" && return 0
		[ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null || return 1 # running, not answering
		log "the server exited at once (try $try of 3)"
		rm -rf "$work"
		work="" pid=""
	done
	return 1
}

stop_server() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	[ -z "$work" ] || rm -rf "$work"
}

work=""
pid=""
trap stop_server EXIT
