# shellcheck shell=bash
# ports.sh: sourced by scripts/testenv.sh and scripts/tidb.sh.
#
#   port_open HOST PORT   succeeds when something listens on HOST:PORT
#   free_port LOW HIGH    prints a port of 127.0.0.1 in LOW-HIGH nothing
#                         listens on (it tries 50 at random)

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

free_port() {
	local p
	for p in $(shuf -i "$1-$2" -n 50); do
		port_open 127.0.0.1 "$p" || { echo "$p"; return; }
	done
	echo "no free port in $1-$2" >&2
	return 1
}
