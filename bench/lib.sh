# shellcheck shell=bash
# bench/lib.sh: server lifecycle shared by bench/sysbench.sh, bench/kv.sh,
# bench/cluster.sh, scripts/test.sh and anyone who needs a throwaway MariaDB, Strata
# (one node or a cluster) or etcd to point a client at.
#
# Contract:
#   - Every server is started as a direct child of the calling shell, so its PID is
#     known exactly; callers stop it with stop_pid <pid> (never by process name).
#   - Each server gets its own data directory, chosen by the caller, and listens on
#     127.0.0.1 only. MariaDB and Strata accept user root with an empty password
#     over TCP.
#   - Functions return non-zero (and print the server's log tail) when a server does
#     not become ready; they never leave a half-started server behind.
#
# Source it, do not execute it.

# log prints a timestamped progress line on stderr, keeping stdout for results.
log() {
	printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2
}

# ensure_debian_packages installs the given Debian packages when any of the
# commands named before "--" is missing. Usage:
#   ensure_debian_packages sysbench mariadbd -- sysbench mariadb-server
# bench_usage <script> <status>: prints the script's header comment (its lines up to
# `set -euo`) as its help, and exits with status.
bench_usage() {
	sed -n '2,/^set -euo/p' "$1" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit "${2:-0}"
}

# parse_flags "<NAME ...>" <args...>: flags mirror the settings' environment
# variables: --table-size=5 or --table-size 5 sets TABLE_SIZE=5, for the names
# listed; -h/--help and anything else call the script's usage function.
parse_flags() {
	local allowed=" $1 " name value
	shift
	while (($#)); do
		case $1 in
		-h | --help) usage 0 ;;
		--*=*)
			name=${1%%=*}
			value=${1#*=}
			;;
		--*)
			(($# >= 2)) || usage 2
			name=$1
			value=$2
			shift
			;;
		*) usage 2 ;;
		esac
		shift
		name=${name#--}
		name=${name^^}
		name=${name//-/_}
		if [[ $allowed != *" $name "* ]]; then
			echo "unknown flag --${name,,}" >&2
			usage 2
		fi
		printf -v "$name" '%s' "$value"
	done
}

ensure_debian_packages() {
	local cmds=() pkgs=() missing=0 seen_sep=0 arg
	for arg in "$@"; do
		if [[ $arg == -- ]]; then
			seen_sep=1
		elif ((seen_sep)); then
			pkgs+=("$arg")
		else
			cmds+=("$arg")
		fi
	done
	for arg in "${cmds[@]}"; do
		if ! command -v "$arg" >/dev/null 2>&1 && [[ ! -x /usr/sbin/$arg ]]; then
			missing=1
		fi
	done
	((missing)) || return 0
	if [[ $(id -u) -ne 0 ]]; then
		log "missing ${cmds[*]}; install ${pkgs[*]} (needs root)"
		return 1
	fi
	log "installing ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
}

# wait_for_sql polls host:port with the mariadb client until "SELECT 1" succeeds
# or the timeout (seconds) expires. It also fails early if pid dies.
wait_for_sql() {
	local host=$1 port=$2 pid=$3 timeout=${4:-60} waited=0
	while ((waited < timeout * 5)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		if mariadb --protocol=tcp -h "$host" -P "$port" -u root --connect-timeout=2 \
			-e 'SELECT 1' >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
		waited=$((waited + 1))
	done
	return 1
}

# port_in_use succeeds when something accepts TCP connections on host:port.
port_in_use() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# require_free_ports fails, naming the culprit, if any of the given 127.0.0.1
# ports is taken: a client must never reach someone else's server by mistake.
require_free_ports() {
	local port
	for port in "$@"; do
		if port_in_use 127.0.0.1 "$port"; then
			log "port 127.0.0.1:$port is already in use; choose another (see --help)"
			return 1
		fi
	done
}

# stop_pid sends SIGTERM to pid, waits up to the timeout (seconds, default 30)
# for it to exit, then SIGKILLs it. It is a no-op for an empty or dead pid.
stop_pid() {
	local pid=$1 timeout=${2:-30} waited=0
	[[ -n $pid ]] || return 0
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null && ((waited < timeout * 10)); do
		sleep 0.1
		waited=$((waited + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid did not exit after ${timeout}s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# start_mariadb <dir> <port> [buffer_pool]: initialises a MariaDB data directory
# under dir (once) and starts mariadbd on 127.0.0.1:port with durable settings:
# every commit is fsynced to the redo log (innodb_flush_log_at_trx_commit=1) and
# there is no binary log. Sets MARIADB_PID.
start_mariadb() {
	local dir=$1 port=$2 pool=${3:-1G}
	require_free_ports "$port" || return 1
	mkdir -p "$dir"
	if [[ ! -d $dir/data/mysql ]]; then
		log "initialising MariaDB data directory $dir/data"
		if ! mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$dir/data" \
			--auth-root-authentication-method=normal --skip-test-db \
			>"$dir/install.log" 2>&1; then
			tail -n 20 "$dir/install.log" >&2
			return 1
		fi
	fi
	log "starting MariaDB on 127.0.0.1:$port (data $dir/data)"
	mariadbd --no-defaults --user="$(id -un)" --datadir="$dir/data" \
		--bind-address=127.0.0.1 --port="$port" --socket="$dir/mariadb.sock" \
		--pid-file="$dir/mariadb.pid" --log-error="$dir/error.log" \
		--skip-log-bin --innodb-buffer-pool-size="$pool" \
		--innodb-flush-log-at-trx-commit=1 --innodb-log-file-size=512M \
		--max-connections=2000 --max-prepared-stmt-count=1000000 \
		--skip-name-resolve &
	MARIADB_PID=$!
	# Root is created as root@localhost, which TCP clients do not match under
	# skip-name-resolve; wait on the socket, then add root@127.0.0.1.
	local waited=0
	until mariadb --socket="$dir/mariadb.sock" -u root -e 'SELECT 1' >/dev/null 2>&1; do
		if ! kill -0 "$MARIADB_PID" 2>/dev/null || ((waited > 600)); then
			log "MariaDB did not start; last lines of $dir/error.log:"
			tail -n 20 "$dir/error.log" >&2 || true
			stop_pid "$MARIADB_PID" 5
			return 1
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	mariadb --socket="$dir/mariadb.sock" -u root -e \
		"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
		 GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
	wait_for_sql 127.0.0.1 "$port" "$MARIADB_PID" 30
}

# start_strata <binary> <dir> <sql_port> <http_port> [grpc_port] [resp_port]:
# starts a single-node Strata with its data under dir/data and waits until its
# SQL port answers. The Redis listener is off unless resp_port is given; the
# block cache is STRATA_CACHE when that is set (--cache), else Strata's
# default. Sets STRATA_PID.
start_strata() {
	local bin=$1 dir=$2 port=$3 http_port=$4 grpc_port=${5:-} resp_port=${6:-}
	local extra=() ports=("$port" "$http_port")
	[[ -n ${STRATA_CACHE:-} ]] && extra+=(--cache "$STRATA_CACHE")
	if [[ -n $grpc_port ]]; then
		extra+=(--grpc-addr "127.0.0.1:$grpc_port")
		ports+=("$grpc_port")
	fi
	if [[ -n $resp_port ]]; then
		extra+=(--resp-addr "127.0.0.1:$resp_port")
		ports+=("$resp_port")
	else
		extra+=(--resp-addr "")
	fi
	require_free_ports "${ports[@]}" || return 1
	mkdir -p "$dir"
	log "starting Strata on 127.0.0.1:$port (data $dir/data, log $dir/strata.log)"
	"$bin" start --data-dir "$dir/data" --sql-addr "127.0.0.1:$port" \
		--http-addr "127.0.0.1:$http_port" "${extra[@]}" >"$dir/strata.log" 2>&1 &
	STRATA_PID=$!
	if ! wait_for_sql 127.0.0.1 "$port" "$STRATA_PID" 60; then
		log "Strata did not start; last lines of $dir/strata.log:"
		tail -n 20 "$dir/strata.log" >&2 || true
		stop_pid "$STRATA_PID" 5
		return 1
	fi
}

# wait_for_resp <port> <pid> [timeout]: until PING answers PONG.
wait_for_resp() {
	local port=$1 pid=$2 timeout=${3:-30} waited=0
	while ((waited < timeout * 10)); do
		kill -0 "$pid" 2>/dev/null || return 1
		if [[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]; then
			return 0
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	return 1
}

# start_etcd_member <dir> <name> <client_port> <peer_port> <cluster> <token>:
# one etcd member with etcd's defaults, a direct child of this shell. Sets
# MEMBER_PID.
start_etcd_member() {
	local dir=$1 name=$2 cport=$3 pport=$4 cluster=$5 token=$6
	mkdir -p "$dir"
	etcd --name "$name" --data-dir "$dir/data" \
		--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "$cluster" --initial-cluster-token "$token" --initial-cluster-state new \
		>"$dir/etcd.log" 2>&1 &
	MEMBER_PID=$!
}

# wait_for_etcd <endpoints> <dir> <pid>...: until every endpoint is healthy
# (a quorum read succeeds).
wait_for_etcd() {
	local endpoints=$1 dir=$2 waited=0 pid
	shift 2
	while ((waited < 300)); do
		for pid in "$@"; do
			if ! kill -0 "$pid" 2>/dev/null; then
				log "etcd ($pid) exited during startup; last lines of its logs:"
				tail -n 20 "$dir"/*/etcd.log >&2 || true
				return 1
			fi
		done
		if ETCDCTL_API=3 etcdctl --endpoints "$endpoints" --dial-timeout 1s endpoint health >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	log "etcd at $endpoints did not become healthy in 30s"
	return 1
}

# start_etcd3 <dir> <port>: a three-member etcd on ports port, port+2, port+4
# (peers one above each), etcd's defaults (every write fsynced), a
# direct child of this shell each. Appends their PIDs to ETCD3_PIDS.
start_etcd3() {
	local dir=$1 port=$2 i cluster="" endpoints=""
	for i in 0 1 2; do
		require_free_ports $((port + 2 * i)) $((port + 2 * i + 1)) || return 1
		cluster+="${cluster:+,}e$i=http://127.0.0.1:$((port + 2 * i + 1))"
		endpoints+="${endpoints:+,}127.0.0.1:$((port + 2 * i))"
	done
	log "starting etcd (3 members) on $endpoints (data $dir)"
	for i in 0 1 2; do
		start_etcd_member "$dir/e$i" "e$i" $((port + 2 * i)) $((port + 2 * i + 1)) "$cluster" kv-bench-3
		ETCD3_PIDS+=("$MEMBER_PID")
	done
	wait_for_etcd "$endpoints" "$dir" "${ETCD3_PIDS[@]}"
}

# start_cluster_node <binary> <dir> <sql_port> <resp_port> <http_port> <grpc_port> [join]:
# starts one node of a Strata cluster on 127.0.0.1 with its data under dir/data,
# appending to dir/strata.log, and waits until its SQL port answers. The node that
# bootstraps the cluster has no join; the others join the given gRPC address(es).
# Called again with the same arguments after the node stopped, it restarts it with
# the same command line, as a user does. STRATA_NODE_ARGS adds flags. Sets NODE_PID.
start_cluster_node() {
	local bin=$1 dir=$2 sql=$3 resp=$4 http=$5 grpc=$6 join=${7:-}
	local args=(start --data-dir "$dir/data" --sql-addr "127.0.0.1:$sql" --resp-addr "127.0.0.1:$resp"
		--http-addr "127.0.0.1:$http" --grpc-addr "127.0.0.1:$grpc")
	[[ -z $join ]] || args+=(--join "$join")
	# STRATA_NODE_ARGS: more flags for every node (word-split).
	# shellcheck disable=SC2206
	[[ -z ${STRATA_NODE_ARGS:-} ]] || args+=($STRATA_NODE_ARGS)
	require_free_ports "$sql" "$resp" "$http" "$grpc" || return 1
	mkdir -p "$dir"
	echo "=== $(date -u +%FT%T.%3NZ) $bin ${args[*]}" >>"$dir/strata.log"
	"$bin" "${args[@]}" >>"$dir/strata.log" 2>&1 &
	NODE_PID=$!
	# NODE_NO_WAIT=1: return at once (nodes restarted on their data
	# directories answer only once a quorum of them runs); wait_for_sql later.
	[[ ${NODE_NO_WAIT:-0} != 1 ]] || return 0
	if ! wait_for_sql 127.0.0.1 "$sql" "$NODE_PID" 60; then
		log "Strata node on 127.0.0.1:$sql did not start; last lines of $dir/strata.log:"
		tail -n 20 "$dir/strata.log" >&2 || true
		stop_pid "$NODE_PID" 5
		return 1
	fi
}

# cluster_status <http_port>...: prints the /status JSON of the first of the given
# nodes (their --http-addr ports on 127.0.0.1) that answers; fails if none does.
cluster_status() {
	local port
	for port in "$@"; do
		if curl -sf --max-time 3 "http://127.0.0.1:$port/status"; then
			return 0
		fi
	done
	return 1
}

# cluster_replicated <replicas> reads /status JSON on stdin and succeeds when the
# cluster is fully replicated: every node up, and every region has a leader and
# exactly <replicas> peers, all voters, none lagging behind the leader's log.
cluster_replicated() {
	jq -e --argjson n "$1" '
		(.nodes | length) >= $n and all(.nodes[]; .up) and (.regions | length) > 0 and
		all(.regions[]; .leader_store != 0 and (.peers | length) == $n and
			all(.peers[]; .role == "voter" and .lag == 0))' >/dev/null
}

# wait_cluster_replicated <replicas> <timeout_s> <http_port>...: polls /status until
# cluster_replicated holds; fails (printing the last status) after the timeout.
wait_cluster_replicated() {
	local n=$1 timeout=$2 started=$SECONDS st=""
	shift 2
	while ((SECONDS - started < timeout)); do
		if st=$(cluster_status "$@") && cluster_replicated "$n" <<<"$st"; then
			return 0
		fi
		sleep 0.2
	done
	log "the cluster is not fully replicated after ${timeout}s; last /status:"
	echo "$st" >&2
	return 1
}

# rss_kib prints the resident set size (VmRSS, KiB) of pid, or nothing if gone.
rss_kib() {
	awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true
}

# bench_setup NAME: the start every side-by-side script shares. WORK_DIR is the
# given one or a new temporary directory (removed at exit unless KEEP_WORK=1);
# at exit the processes in CHILD_PID, STRATA_PID and MARIADB_PID are stopped;
# INT and TERM exit with 130 and 143.
bench_setup() {
	OWN_WORK_DIR=0
	if [[ -z ${WORK_DIR:-} ]]; then
		WORK_DIR=$(mktemp -d -t "strata-$1.XXXXXX")
		OWN_WORK_DIR=1
	fi
	STRATA_PID=
	MARIADB_PID=
	CHILD_PID=
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

bench_cleanup() {
	local rc=$?
	[[ -n ${CHILD_PID:-} ]] && stop_pid "$CHILD_PID" 10
	[[ -n ${STRATA_PID:-} ]] && stop_pid "$STRATA_PID" 60
	[[ -n ${MARIADB_PID:-} ]] && stop_pid "$MARIADB_PID" 60
	if ((OWN_WORK_DIR)) && [[ ${KEEP_WORK:-0} != 1 ]]; then
		rm -rf "$WORK_DIR"
	fi
	exit "$rc"
}

# bench_build: builds STRATA_BIN from this checkout unless SKIP_BUILD=1.
bench_build() {
	if [[ ${SKIP_BUILD:-0} != 1 ]]; then
		log "building $STRATA_BIN"
		(cd "$REPO_ROOT" && go build -o "$STRATA_BIN" ./cmd/strata)
	fi
}

# bg runs a command as a background child and waits, so that a signal is handled at
# once and bench_cleanup can stop the child.
bg() {
	"$@" &
	CHILD_PID=$!
	local rc=0
	wait "$CHILD_PID" || rc=$?
	CHILD_PID=
	return "$rc"
}
