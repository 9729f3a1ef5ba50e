# shellcheck shell=bash
# heartbeat.sh: sourced by scripts/testenv.sh and scripts/demo.sh.
#
#   heartbeat_start SECONDS COMMAND [ARG...]
#                   every SECONDS seconds, runs COMMAND ARG... N in the
#                   background, N the seconds since the start (COMMAND
#                   prints the line), until heartbeat_stop or until the
#                   shell that started it is gone; sets heartbeat_pid
#   heartbeat_stop  stops it and waits until it has stopped: nothing it
#                   prints comes after; does nothing when none runs
#
# A sign of life for a command that prints nothing for minutes (go build,
# go test compiling every package first): plain lines, in a terminal, a
# pipe or CI alike. Its sleep writes nowhere and reads nothing, so that the
# sleep a stopped heartbeat leaves behind holds no pipe open (make demo |
# tee ends with the demo, not a heartbeat later).

heartbeat_start() {
	local every=$1
	shift
	_heartbeat_loop "$every" "$@" </dev/null &
	heartbeat_pid=$!
}

heartbeat_stop() {
	[ -n "${heartbeat_pid:-}" ] || return 0
	kill "$heartbeat_pid" 2>/dev/null || true
	wait "$heartbeat_pid" 2>/dev/null || true
	heartbeat_pid=""
}

# _heartbeat_loop runs in the background: $$ is still the pid of the shell
# that started it.
_heartbeat_loop() {
	local every=$1 start=$SECONDS
	shift
	while sleep "$every" >/dev/null 2>&1 && kill -0 $$ 2>/dev/null; do
		"$@" "$((SECONDS - start))"
	done
}
