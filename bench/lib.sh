# shellcheck shell=bash
# bench/lib.sh: server lifecycle shared by bench/sysbench.sh, scripts/test.sh and
# anyone who needs a throwaway MariaDB or Strata to point a client at.
#
# Contract:
#   - Every server is started as a direct child of the calling shell, so its PID is
#     known exactly; callers stop it with stop_pid <pid> (never by process name).
#   - Each server gets its own data directory, chosen by the caller, and listens on
#     127.0.0.1 only. Both accept user root with an empty password over TCP.
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
# SQL port answers. The Redis listener is off unless resp_port is given. Sets
# STRATA_PID.
start_strata() {
	local bin=$1 dir=$2 port=$3 http_port=$4 grpc_port=${5:-} resp_port=${6:-}
	local extra=() ports=("$port" "$http_port")
	if [[ -n $grpc_port ]]; then
		extra=(--grpc-addr "127.0.0.1:$grpc_port")
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

# rss_kib prints the resident set size (VmRSS, KiB) of pid, or nothing if gone.
rss_kib() {
	awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true
}
