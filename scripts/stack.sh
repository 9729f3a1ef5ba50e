#!/usr/bin/env bash
# stack.sh up | down | status
#
# The topology of docker-compose.yml without Docker, from Debian's packages
# (installed with apt-get when missing; no system service is started or
# changed): a MariaDB of its own, three independent Redis nodes, two
# instances of the service built from this tree, nginx in front of them with
# deploy/nginx.conf, and Prometheus scraping them with deploy/prometheus.yml.
# Every process runs as a plain process of this user with its state under
# STACK_DIR; only nginx and Prometheus have fixed ports (127.0.0.1 only).
#
#   up      starts what is not running and returns once every part answers,
#           printing the URLs (and the admin token when it made one up); when
#           a part does not start it stops them all, names the part and shows
#           the end of its log, and exits 1
#   down    stops every part (the data stays in STACK_DIR for the next up)
#   status  says which parts run; exits 0 when all do, 3 otherwise
#
# Environment:
#   STACK_DIR              state, logs and data (default .stack/ in the repository)
#   STACK_HTTP_PORT        nginx's port (default 8080)
#   STACK_PROMETHEUS_PORT  Prometheus' port (default 9090)
#   STACK_GOFLAGS          go build flags for the instances (e.g. -race)
#   STACK_SECKILL_BIN      a service binary to copy in instead of building one
#   STACK_RESERVE_CLUSTER  1: reserve's Redis is a Redis Cluster of its own,
#                          six redis-server processes in cluster mode (three
#                          masters, each with a replica, rcl1 to rcl6), and
#                          the instances get SECKILL_RESERVE_REDIS=cluster:...
#                          (default: reserve uses the first Redis node); kept
#                          in STACK_DIR/reserve-redis, and not changed while
#                          an instance runs
#   STACK_BUYER_AUTH       open (default) or jwt: the instances get
#                          SECKILL_BUYER_AUTH=jwt and SECKILL_BUYER_JWKS, a
#                          key set of one key made once by the driver's
#                          -keygen in STACK_DIR/buyer/ (key.pem signs the
#                          buyers' tokens: go run ./loadtest -buyer-key
#                          STACK_DIR/buyer/key.pem -token u-42); kept in
#                          STACK_DIR/buyer-auth, and not changed while an
#                          instance runs
#   SECKILL_ADMIN_TOKEN    the instances' admin token (default: made up once,
#                          kept in STACK_DIR/admin-token)
#   SECKILL_LOCK, SECKILL_LOCK_TTL, SECKILL_LOCK_WAIT, ... reach the instances
#                          as compose passes them on
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck source=scripts/packages.sh
. "$here/packages.sh"

HTTP_PORT=${STACK_HTTP_PORT:-8080}
PROM_PORT=${STACK_PROMETHEUS_PORT:-9090}
PARTS=(mariadb redis1 redis2 redis3 seckill1 seckill2 nginx prometheus)
CLUSTER_PARTS=(rcl1 rcl2 rcl3 rcl4 rcl5 rcl6)

log() { echo "stack: $*" >&2; }

usage() {
	echo "usage: $0 up | down | status" >&2
	exit 2
}

# setup makes STACK_DIR absolute (the processes' command lines name it, which
# is how a pid is known to be one of ours) and its layout.
setup() {
	local dir=${STACK_DIR:-$root/.stack}
	mkdir -p "$dir"
	STACK_DIR=$(cd "$dir" && pwd)
	RUN=$STACK_DIR/run
	LOGS=$STACK_DIR/log
	mkdir -p "$RUN" "$LOGS"
	# The cluster's nodes start before the instances that use them, and are
	# stopped and shown whenever a stack has them.
	if [ "${STACK_RESERVE_CLUSTER:-}" = 1 ] || [ -e "$RUN/rcl1.pid" ] ||
		[ "$(cat "$STACK_DIR/reserve-redis" 2>/dev/null)" = cluster ]; then
		PARTS=(mariadb redis1 redis2 redis3 "${CLUSTER_PARTS[@]}" seckill1 seckill2 nginx prometheus)
	fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# exists PID: the process exists and is not a zombie (a zombie is stopped).
exists() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# ours PID: the process runs from STACK_DIR: its command line names it, or
# its working directory is in it (redis-server rewrites its command line).
ours() {
	local cwd
	tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$STACK_DIR" && return 0
	cwd=$(readlink "/proc/$1/cwd" 2>/dev/null) || return 1
	case $cwd/ in "$STACK_DIR"/*) return 0 ;; esac
	return 1
}

# alive PID: one of ours runs as PID (not some later process given the pid).
alive() { exists "$1" && ours "$1"; }

pid_of() { cat "$RUN/$1.pid" 2>/dev/null || true; }
port_of() { cat "$RUN/$1.port" 2>/dev/null || true; }

running() {
	local pid
	pid=$(pid_of "$1")
	[ -n "$pid" ] && alive "$pid"
}

# free_port LAST [GAP] prints a port nothing listens on, below the kernel's
# range for outgoing connections so that none of those takes it meanwhile,
# and GAP below it (a cluster node's bus port is its port + 10000); the
# last one the part had comes first.
free_port() {
	local last=$1 gap=${2:-0} low hi p
	if [ -n "$last" ] && ! port_open "$last"; then
		echo "$last"
		return
	fi
	low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	hi=$((low - 1 - gap))
	[ "$hi" -gt 11000 ] || { log "ip_local_port_range starts at $low: no room below it"; return 1; }
	for p in $(shuf -i "10000-$hi" -n 50); do
		port_open "$p" || { echo "$p"; return; }
	done
	log "no free port below $low"
	return 1
}

# launch PART PORT COMMAND...: starts COMMAND in STACK_DIR/PART, in a
# session of its own (a Ctrl-C at the terminal does not reach it), output to
# the part's log, and returns once it runs (or has already ended).
launch() {
	local part=$1 port=$2 pid i
	shift 2
	mkdir -p "$STACK_DIR/$part"
	: >"$LOGS/$part.log"
	(cd "$STACK_DIR/$part" && exec setsid "$@") </dev/null >>"$LOGS/$part.log" 2>&1 &
	pid=$!
	echo "$pid" >"$RUN/$part.pid"
	echo "$port" >"$RUN/$part.port"
	for ((i = 0; i < 500; i++)); do
		exists "$pid" || return 0
		ours "$pid" && return 0
		sleep 0.01
	done
}

# await PART SECONDS CHECK...: waits until CHECK succeeds while the part runs.
await() {
	local part=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 10; i++)); do
		running "$part" || return 1
		if "$@" >/dev/null 2>&1; then
			running "$part" && return 0 # and not someone else on its port
			return 1
		fi
		sleep 0.1
	done
	log "$part did not answer within ${secs}s"
	return 1
}

# stop PART: SIGTERM, then SIGKILL after the part's grace; a zombie is
# stopped.
stop() {
	local part=$1 pid grace=20 i
	pid=$(pid_of "$part")
	if [ -n "$pid" ] && alive "$pid"; then
		# An instance drains: SECKILL_DRAIN_DELAY, then the longest purchase
		# and its unlock (app.DrainBudget: 54 s with these settings).
		case $part in seckill*) grace=60 ;; esac
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < grace * 10; i++)); do
			alive "$pid" || break
			sleep 0.1
		done
		if alive "$pid"; then
			log "$part did not stop within ${grace}s: killing it"
			kill -KILL "$pid" 2>/dev/null || true
			for ((i = 0; i < 50; i++)); do
				alive "$pid" || break
				sleep 0.1
			done
		fi
		echo "stopped $part"
	fi
	rm -f "$RUN/$part.pid"
}

stop_all() {
	local i
	for ((i = ${#PARTS[@]} - 1; i >= 0; i--)); do
		stop "${PARTS[i]}"
	done
}

# fail PART WHAT: stops everything, names the part and shows its log's end.
fail() {
	local part=$1
	shift
	log "$part did not start${*:+: $*}"
	if [ -s "$LOGS/$part.log" ]; then
		log "the end of $LOGS/$part.log:"
		tail -n 20 "$LOGS/$part.log" | sed 's/^/    /' >&2
	fi
	log "stopping the rest"
	stop_all >&2
	exit 1
}

# start PART: starts the part on a free port of its own and waits for it to
# answer; when something took the port meanwhile it tries another (twice).
start() {
	local part=$1 port
	if running "$part"; then
		return 0
	fi
	for _ in 1 2 3; do
		case $part in
		nginx) port=$HTTP_PORT ;;
		prometheus) port=$PROM_PORT ;;
		rcl*) port=$(free_port "$(port_of "$part")" 10000) || fail "$part" "no free port" ;;
		*) port=$(free_port "$(port_of "$part")") || fail "$part" "no free port" ;;
		esac
		if "start_${part%[0-9]}" "$part" "$port"; then
			return 0
		fi
		case $part in nginx | prometheus) break ;; esac
		grep -qi "already in use" "$LOGS/$part.log" 2>/dev/null || break
		rm -f "$RUN/$part.port"
		log "$part: port $port was taken meanwhile; trying another"
	done
	stop "$part" >/dev/null
	fail "$part"
}

mariadb_admin() { command -v mariadb-admin || command -v mysqladmin; }

start_mariadb() {
	local part=$1 port=$2 dir=$STACK_DIR/mariadb bin
	bin=$(command -v mariadbd || command -v mysqld || echo /usr/sbin/mariadbd)
	mkdir -p "$dir/tmp"
	if [ ! -d "$dir/data/mysql" ]; then
		rm -rf "$dir/data"
		mariadb-install-db --no-defaults --datadir="$dir/data" --user="$(id -un)" \
			--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
			--tmpdir="$dir/tmp" --innodb-log-file-size=16M >"$LOGS/$part.log" 2>&1 ||
			fail "$part" "mariadb-install-db failed"
	fi
	launch "$part" "$port" "$bin" --no-defaults --datadir="$dir/data" --port="$port" \
		--bind-address=127.0.0.1 --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" \
		--tmpdir="$dir/tmp" --user="$(id -un)" --skip-log-bin --innodb-log-file-size=16M \
		--innodb-buffer-pool-size=64M --max-connections=200
	await "$part" 60 "$(mariadb_admin)" --no-defaults --protocol=tcp -h127.0.0.1 -P"$port" -uroot ping
}

start_redis() {
	local part=$1 port=$2
	mkdir -p "$STACK_DIR/$part"
	# An independent master that keeps nothing on disk, as compose runs it.
	launch "$part" "$port" redis-server --port "$port" --bind 127.0.0.1 --save "" \
		--appendonly no --dir "$STACK_DIR/$part"
	await "$part" 15 redis_ping "$port"
}

redis_ping() { [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; }

# start_rcl: one node of reserve's Redis Cluster (STACK_RESERVE_CLUSTER=1).
# Its cluster configuration (nodes.conf) and append-only file stay in its
# directory, so that a node started again on its port rejoins with its data.
start_rcl() {
	local part=$1 port=$2
	mkdir -p "$STACK_DIR/$part"
	launch "$part" "$port" redis-server --port "$port" --bind 127.0.0.1 --save "" \
		--appendonly yes --dir "$STACK_DIR/$part" --cluster-enabled yes \
		--cluster-config-file nodes.conf --cluster-node-timeout 5000
	await "$part" 15 redis_ping "$port"
}

# cluster_ready joins the six nodes into one cluster the first time
# (redis-cli --cluster create), and waits until every node says it is ok.
cluster_ready() {
	local n addrs=() assigned known
	for n in "${CLUSTER_PARTS[@]}"; do addrs+=("127.0.0.1:$(port_of "$n")"); done
	assigned=$(redis-cli -p "$(port_of rcl1)" cluster info | tr -d '\r' | sed -n 's/^cluster_slots_assigned://p')
	known=$(redis-cli -p "$(port_of rcl1)" cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')
	if [ "$assigned" != 16384 ]; then
		if [ "$known" != 1 ]; then
			log "reserve's cluster is half made ($known nodes known, $assigned slots assigned):" \
				"stack.sh down, then remove $STACK_DIR/rcl*"
			return 1
		fi
		log "joining ${addrs[*]} into one cluster (3 masters, 3 replicas)"
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
			>>"$LOGS/rcl1.log" 2>&1 || { log "redis-cli --cluster create failed (see $LOGS/rcl1.log)"; return 1; }
	fi
	local i
	for ((i = 0; i < 300; i++)); do
		cluster_ok "${addrs[@]}" && return 0
		sleep 0.1
	done
	log "reserve's cluster is not ok after 30s"
	return 1
}

# reserve_mode reads or sets where reserve's Redis is, in STACK_DIR/reserve-redis
# ("node" or "cluster", from STACK_RESERVE_CLUSTER), and refuses to change it
# while an instance runs on the other.
reserve_mode() {
	local file=$STACK_DIR/reserve-redis want=node have
	[ "${STACK_RESERVE_CLUSTER:-}" = 1 ] && want=cluster
	have=$(cat "$file" 2>/dev/null || true)
	if [ -n "$have" ] && [ "$have" != "$want" ] && { running seckill1 || running seckill2; }; then
		log "the instances run with reserve's Redis on a $have; STACK_RESERVE_CLUSTER asks for a $want:" \
			"stack.sh down first"
		exit 1
	fi
	echo "$want" >"$file"
	RESERVE_MODE=$want
	if [ "$want" = node ] && ! running rcl1; then
		PARTS=(mariadb redis1 redis2 redis3 seckill1 seckill2 nginx prometheus)
	else
		PARTS=(mariadb redis1 redis2 redis3 "${CLUSTER_PARTS[@]}" seckill1 seckill2 nginx prometheus)
	fi
}

# buyer_auth reads or sets who the buyers are, in STACK_DIR/buyer-auth
# ("open" or "jwt", from STACK_BUYER_AUTH), and refuses to change it while
# an instance runs; under jwt it makes the buyers' key and its set once.
buyer_auth() {
	local file=$STACK_DIR/buyer-auth want=${STACK_BUYER_AUTH:-open} have keys=$STACK_DIR/buyer
	case $want in
	open | jwt) ;;
	*) log "STACK_BUYER_AUTH=$want: want open or jwt"; exit 2 ;;
	esac
	have=$(cat "$file" 2>/dev/null || true)
	if [ -n "$have" ] && [ "$have" != "$want" ] && { running seckill1 || running seckill2; }; then
		log "the instances run with buyers $have; STACK_BUYER_AUTH asks for $want: stack.sh down first"
		exit 1
	fi
	echo "$want" >"$file"
	BUYER_AUTH=$want
	if [ "$want" = open ] || { [ -s "$keys/key.pem" ] && [ -s "$keys/jwks.json" ]; }; then
		return 0
	fi
	command -v go >/dev/null || fail buyer-keys "go not found: the driver makes the buyers' key (go run ./loadtest -keygen)"
	log "making the buyers' key in $keys (go run ./loadtest -keygen)"
	(cd "$root" && go run ./loadtest -keygen "$keys") >>"$LOGS/buyer-keys.log" 2>&1 ||
		fail buyer-keys "go run ./loadtest -keygen failed"
}

# cluster_ok ADDR...: every node says the cluster is ok, and every replica
# is attached to its master and synced with it.
cluster_ok() {
	local a info
	for a in "$@"; do
		redis-cli -h "${a%:*}" -p "${a#*:}" cluster info | grep -q '^cluster_state:ok' || return 1
		info=$(redis-cli -h "${a%:*}" -p "${a#*:}" info replication | tr -d '\r')
		case $info in
		*role:master*) ;;
		*master_link_status:up*master_sync_in_progress:0*) ;;
		*) return 1 ;;
		esac
	done
	[ "$(redis-cli -h "${1%:*}" -p "${1#*:}" cluster nodes | grep -c ' slave [0-9a-f]')" = 3 ]
}

http_ok() { curl -fsS -o /dev/null --max-time 2 "$1"; }

start_seckill() {
	local part=$1 port=$2 redis=() reserve=() buyers=()
	local n
	for n in redis1 redis2 redis3; do redis+=("127.0.0.1:$(port_of "$n")"); done
	if [ "$RESERVE_MODE" = cluster ]; then
		cluster_ready || return 1
		for n in "${CLUSTER_PARTS[@]}"; do reserve+=("127.0.0.1:$(port_of "$n")"); done
		reserve=("SECKILL_RESERVE_REDIS=cluster:$(IFS=,; echo "${reserve[*]}")")
	fi
	if [ "$BUYER_AUTH" = jwt ]; then
		buyers=("SECKILL_BUYER_AUTH=jwt" "SECKILL_BUYER_JWKS=$STACK_DIR/buyer/jwks.json")
	fi
	# What compose sets, with the addresses of this stack; nginx is on
	# 127.0.0.1, so its X-Forwarded-For is trusted from there.
	launch "$part" "$port" env \
		SECKILL_ADDR="127.0.0.1:$port" \
		SECKILL_MYSQL_DSN="root@tcp(127.0.0.1:$(port_of mariadb))/seckill?parseTime=true" \
		SECKILL_REDIS_ADDRS="$(IFS=,; echo "${redis[*]}")" \
		SECKILL_ADMIN_TOKEN="$TOKEN" \
		SECKILL_MYSQL_MAX_CONNS=20 \
		SECKILL_DRAIN_DELAY=5s \
		SECKILL_STRATEGY_OVERRIDE=true \
		SECKILL_TRUSTED_PROXIES=127.0.0.1/32 \
		"${reserve[@]}" "${buyers[@]}" \
		"$STACK_DIR/bin/seckill"
	await "$part" 60 http_ok "http://127.0.0.1:$port/readyz"
}

start_nginx() {
	local part=$1 port=$2 dir=$STACK_DIR/nginx conf unfilled t
	mkdir -p "$dir/tmp"
	# deploy/nginx.conf is the server and upstream of compose's nginx: filled
	# in as the image does, and included in an http block of our own.
	sed -e "s/\${SECKILL1_ADDR}/127.0.0.1:$(port_of seckill1)/g" \
		-e "s/\${SECKILL2_ADDR}/127.0.0.1:$(port_of seckill2)/g" \
		-e "s/\${NGINX_PORT}/127.0.0.1:$port/g" \
		"$root/deploy/nginx.conf" >"$dir/seckill.conf"
	unfilled=$(grep -v '^\s*#' "$dir/seckill.conf" | grep -o '[$][{][^}]*[}]' | sort -u | tr '\n' ' ')
	[ -z "$unfilled" ] || fail "$part" "deploy/nginx.conf uses variables stack.sh does not fill in: $unfilled"
	conf=$dir/nginx.conf
	{
		echo "# Written by scripts/stack.sh: deploy/nginx.conf in an http block of its own."
		echo "daemon off;"
		# Workers of root's nginx would run as nobody, who cannot reach STACK_DIR.
		[ "$(id -u)" != 0 ] || echo "user root;"
		echo "worker_processes 2;"
		echo "pid $dir/nginx.pid;"
		echo "error_log $LOGS/$part.log;"
		echo "events { worker_connections 4096; }"
		echo "http {"
		echo "    access_log $dir/access.log;"
		for t in client_body proxy fastcgi uwsgi scgi; do
			echo "    ${t}_temp_path $dir/tmp/$t;"
		done
		echo "    include $dir/seckill.conf;"
		echo "}"
	} >"$conf"
	if ! nginx -p "$dir" -c "$conf" -e "$LOGS/$part.log" -t >"$dir/test.log" 2>&1; then
		cat "$dir/test.log" >>"$LOGS/$part.log"
		fail "$part" "nginx -t refuses the configuration"
	fi
	port_open "$port" && fail "$part" "port $port (STACK_HTTP_PORT) is in use"
	launch "$part" "$port" nginx -p "$dir" -c "$conf" -e "$LOGS/$part.log"
	await "$part" 15 http_ok "http://127.0.0.1:$port/nginx-healthz" &&
		await "$part" 15 http_ok "http://127.0.0.1:$port/readyz"
}

start_prometheus() {
	local part=$1 port=$2 dir=$STACK_DIR/prometheus
	mkdir -p "$dir/data"
	# deploy/prometheus.yml as it is; the file_sd file it reads from beside
	# it names this stack's instances.
	cp "$root/deploy/prometheus.yml" "$dir/prometheus.yml"
	{
		echo "# Written by scripts/stack.sh: the instances of the stack in $STACK_DIR."
		echo "- targets: [\"127.0.0.1:$(port_of seckill1)\", \"127.0.0.1:$(port_of seckill2)\"]"
	} >"$dir/seckill-targets.yml"
	port_open "$port" && fail "$part" "port $port (STACK_PROMETHEUS_PORT) is in use"
	launch "$part" "$port" prometheus --config.file="$dir/prometheus.yml" \
		--storage.tsdb.path="$dir/data" --web.listen-address="127.0.0.1:$port"
	await "$part" 60 http_ok "http://127.0.0.1:$port/-/ready" || return 1
	# Ready is not yet scraping: up returns once both instances are up in
	# Prometheus (its first scrape comes within the 5 s scrape_interval).
	await "$part" 60 targets_up "$port"
}

# targets_up PORT: Prometheus on PORT has scraped both instances, and both
# were up.
targets_up() {
	[ "$(curl -fsS --max-time 2 "http://127.0.0.1:$1/api/v1/targets?state=active" |
		grep -o '"health":"up"' | wc -l)" -ge 2 ]
}

# admin_token sets TOKEN: SECKILL_ADMIN_TOKEN, or the one made up before,
# or a new one (then printed).
admin_token() {
	local file=$STACK_DIR/admin-token
	if [ -n "${SECKILL_ADMIN_TOKEN:-}" ]; then
		TOKEN=$SECKILL_ADMIN_TOKEN
	elif [ -s "$file" ]; then
		TOKEN=$(cat "$file")
	else
		TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
		MADE_UP=1
	fi
	if [ -s "$file" ] && [ "$(cat "$file")" != "$TOKEN" ] && { running seckill1 || running seckill2; }; then
		log "the running instances keep the token in $file: run down first to change it"
		TOKEN=$(cat "$file")
	fi
	(umask 077 && printf '%s\n' "$TOKEN" >"$file")
}

build() {
	mkdir -p "$STACK_DIR/bin"
	if [ -n "${STACK_SECKILL_BIN:-}" ]; then
		cp "$STACK_SECKILL_BIN" "$STACK_DIR/bin/seckill" || fail build "cannot copy STACK_SECKILL_BIN ($STACK_SECKILL_BIN)"
		return
	fi
	command -v go >/dev/null || fail build "go not found: the instances are built from this tree"
	log "building the service (go build${STACK_GOFLAGS:+ $STACK_GOFLAGS})"
	# shellcheck disable=SC2086 # STACK_GOFLAGS is a list of flags
	(cd "$root" && go build ${STACK_GOFLAGS:-} -o "$STACK_DIR/bin/seckill" .) >"$LOGS/build.log" 2>&1 ||
		fail build "go build failed"
}

urls() {
	echo "seckill (nginx):  http://127.0.0.1:$HTTP_PORT/"
	echo "Prometheus:       http://127.0.0.1:$PROM_PORT/"
	echo "instances:        http://127.0.0.1:$(port_of seckill1)/ http://127.0.0.1:$(port_of seckill2)/"
	if [ "$(cat "$STACK_DIR/reserve-redis" 2>/dev/null)" = cluster ] && running rcl1; then
		echo "reserve's Redis:  a Redis Cluster, seeds 127.0.0.1:$(port_of rcl1) (redis-cli -c -p $(port_of rcl1))"
	fi
	if [ "$(cat "$STACK_DIR/buyer-auth" 2>/dev/null)" = jwt ]; then
		echo "buyers' tokens:   go run ./loadtest -buyer-key $STACK_DIR/buyer/key.pem -token u-42"
	fi
	echo "logs:             $LOGS/"
}

up() {
	packages_install_missing --no-recommends \
		"mariadbd=mariadb-server" "mariadb-install-db=mariadb-server" \
		"mariadb-admin|mysqladmin=mariadb-client" redis-server=redis-server \
		redis-cli=redis-tools nginx=nginx prometheus=prometheus curl=curl
	reserve_mode
	buyer_auth
	trap 'log "interrupted: stopping the rest"; stop_all >&2; exit 130' INT TERM
	MADE_UP=""
	admin_token
	if ! running seckill1 || ! running seckill2; then
		build
	fi
	local part
	for part in "${PARTS[@]}"; do
		if running "$part"; then
			echo "$part runs already (127.0.0.1:$(port_of "$part"))"
			continue
		fi
		start "$part"
		echo "started $part on 127.0.0.1:$(port_of "$part")"
	done
	trap - INT TERM
	urls
	if [ -n "$MADE_UP" ]; then
		echo "admin token:      $TOKEN (made up; kept in $STACK_DIR/admin-token)"
	else
		echo "admin token:      in $STACK_DIR/admin-token"
	fi
}

status() {
	local part n=0
	for part in "${PARTS[@]}"; do
		if running "$part"; then
			n=$((n + 1))
			printf '%-10s runs    pid %s, 127.0.0.1:%s\n' "$part" "$(pid_of "$part")" "$(port_of "$part")"
		else
			printf '%-10s stopped\n' "$part"
		fi
	done
	if [ "$n" = "${#PARTS[@]}" ]; then
		urls
		return 0
	fi
	return 3
}

[ $# = 1 ] || usage
case $1 in
up) setup && up ;;
down) setup && stop_all ;;
status) setup && status ;;
*) usage ;;
esac
