#!/usr/bin/env bash
# bench/cluster.sh: a three-node Strata cluster on this machine against MariaDB and
# a three-member etcd on the same machine, and the cluster's recovery from kill -9.
#
# It starts every server itself, each a child process with its own data directory
# under WORK_DIR, on 127.0.0.1: three `strata start` processes (node 1 bootstraps,
# nodes 2 and 3 --join node 1; node i listens on STRATA_PORT+i-1 for SQL,
# STRATA_RESP_PORT+i-1 for Redis, STRATA_HTTP_PORT+i-1 for HTTP and
# STRATA_GRPC_PORT+i-1 for gRPC), and waits until /status shows every region with
# three voters. Then, in four phases:
#   1. sysbench (as bench/sysbench.sh runs it) against MariaDB, against the node
#      SQL_NODE (target "strata"), and spread over all three nodes' SQL ports
#      (target "strata-all": sysbench's --mysql-port=a,b,c deals its connections
#      round robin), repeated, the order alternating each repeat.
#   2. YCSB through `strata workload run ycsb` against the cluster (target
#      "strata": SQL_NODE's Redis port; "strata-all": the three Redis ports, each
#      operation to the next; "strata-client": Strata's Go client, --driver
#      strata, each operation over gRPC to its key's region leader, as TiKV's
#      go-ycsb driver runs; all three on the same records) and a three-member etcd (etcd's defaults, its client
#      given the three endpoints), repeated, alternating. MariaDB is stopped first.
#   3. Failover, FAILOVERS times: sysbench FAILOVER_WORKLOAD at FAILOVER_THREADS
#      threads spread over the two nodes that will survive, for FAILOVER_PRE
#      seconds; then kill -9 of the node holding the most region leaders (ties:
#      the placement driver's leader), load for FAILOVER_POST more seconds, restart
#      the node with the same command line, wait until fully replicated again.
#   4. Memory: VmRSS of every node (and of MariaDB) with the sysbench tables
#      loaded, and the peak of each, sampled every second, per phase.
# It prints a markdown report of medians, ratios and recovery times, also written
# to bench/results/<UTC date-time>-cluster.md with the raw TSV beside it.
#
# Settings (environment variable, or the same name as a flag: --table-size=1000):
#   TABLES=4  TABLE_SIZE=100000  TIME=30  REPEATS=3  THREADS=8
#   WORKLOADS="oltp_point_select oltp_read_write oltp_insert"
#   TARGETS="mariadb strata strata-all"          (sysbench; any subset)
#   SQL_NODE=1        the node (1-3) target "strata" connects to
#   YCSB_WORKLOADS="a c"  YCSB_TARGETS="strata strata-all strata-client etcd3"  YCSB_TIME=$TIME
#   YCSB_THREADS=64  YCSB_RECORDS=100000
#   FAILOVERS=20  FAILOVER_WORKLOAD=oltp_read_write  FAILOVER_THREADS=8
#   FAILOVER_PRE=6  FAILOVER_POST=10   (seconds of load before and after each kill)
#   PHASES="sysbench ycsb failover"    (any subset, in this order)
#   STRATA_PORT=4000 STRATA_RESP_PORT=6380 STRATA_HTTP_PORT=8080 STRATA_GRPC_PORT=20160
#   MARIADB_PORT=3307  MARIADB_BUFFER_POOL=1G  ETCD3_PORT=2479 (members 2479, 2481,
#   2483; peers one port up)
#   WORK_DIR=<mktemp -d>  KEEP_WORK=0  RESULTS_DIR=bench/results
#   STRATA_BIN=bin/strata (built from ./cmd/strata unless SKIP_BUILD=1)
#   NOTE="free text"  (added to the report)
#
# Method, and why:
#   - sysbench as bench/sysbench.sh runs it: its defaults otherwise (server-side
#     prepared statements, default distribution, default ignored errors), p95/p99
#     from --histogram (bench/sysbench_run.awk), tables re-prepared (not timed)
#     before any run that follows oltp_insert on the same data ("strata" and
#     "strata-all" share the cluster's tables). After a Strata prepare the script
#     waits until every node sees every table, then 2 s more: another node's
#     schema cache may be up to a second stale.
#   - Alternation: repeat r runs the targets in their listed order when r is odd
#     and reversed when r is even, so drift over time hits every target alike.
#   - YCSB as bench/kv.sh runs it (one value per record, linearizable reads on
#     both); the records are loaded once per system, through node SQL_NODE.
#   - Recovery time is measured at 100 ms, not from sysbench's 1 s reports: the
#     failover runs bench/sysbench_timeline.lua, which runs the workload unchanged
#     (with --mysql-ignore-errors=all, so a failed transaction is retried, not
#     fatal) and records in which 100 ms of wall-clock time each transaction
#     completed. The baseline is the rate over the last 3 s before the kill (at
#     most FAILOVER_PRE-2 s, after a warm-up); the recovery time is from the kill
#     to the start of the first 100 ms slot that, and the 1 s window it starts,
#     both ran at >= 90% of the baseline rate (the slot alone keeps a burst of
#     retried transactions after a stall from averaging the stall away). A
#     failover with no such slot before the load ends counts as the time from
#     the kill to the end of the load and is marked. Also reported: the
#     longest stretch after the kill with no transaction completed, and the
#     lowest 1 s rate, and how long the restarted node took to be a full replica.
#   - Memory: "loaded" is VmRSS of each node 5 s after the first prepare; the peaks
#     are the largest VmRSS sampled each second during each phase.
#   - A server that exits unexpectedly ends the benchmark: the report covers the
#     runs done so far and says so; the script then exits 1.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

usage() { bench_usage "${BASH_SOURCE[0]}" "${1:-0}"; }

# Flags mirror the environment variables: --table-size=5 sets TABLE_SIZE=5.
parse_flags "TABLES TABLE_SIZE TIME REPEATS THREADS WORKLOADS TARGETS SQL_NODE YCSB_WORKLOADS YCSB_TARGETS YCSB_TIME YCSB_THREADS YCSB_RECORDS FAILOVERS FAILOVER_WORKLOAD FAILOVER_THREADS FAILOVER_PRE FAILOVER_POST PHASES STRATA_PORT STRATA_RESP_PORT STRATA_HTTP_PORT STRATA_GRPC_PORT MARIADB_PORT MARIADB_BUFFER_POOL ETCD3_PORT WORK_DIR KEEP_WORK RESULTS_DIR STRATA_BIN SKIP_BUILD NOTE" "$@"

TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-100000}
TIME=${TIME:-30}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-8}
WORKLOADS=${WORKLOADS:-oltp_point_select oltp_read_write oltp_insert}
TARGETS=${TARGETS:-mariadb strata strata-all}
SQL_NODE=${SQL_NODE:-1}
YCSB_WORKLOADS=${YCSB_WORKLOADS:-a c}
YCSB_TARGETS=${YCSB_TARGETS:-strata strata-all strata-client etcd3}
YCSB_TIME=${YCSB_TIME:-$TIME}
YCSB_THREADS=${YCSB_THREADS:-64}
YCSB_RECORDS=${YCSB_RECORDS:-100000}
FAILOVERS=${FAILOVERS:-20}
FAILOVER_WORKLOAD=${FAILOVER_WORKLOAD:-oltp_read_write}
FAILOVER_THREADS=${FAILOVER_THREADS:-8}
FAILOVER_PRE=${FAILOVER_PRE:-6}
FAILOVER_POST=${FAILOVER_POST:-10}
PHASES=${PHASES:-sysbench ycsb failover}
STRATA_PORT=${STRATA_PORT:-4000}
STRATA_RESP_PORT=${STRATA_RESP_PORT:-6380}
STRATA_HTTP_PORT=${STRATA_HTTP_PORT:-8080}
STRATA_GRPC_PORT=${STRATA_GRPC_PORT:-20160}
MARIADB_PORT=${MARIADB_PORT:-3307}
MARIADB_BUFFER_POOL=${MARIADB_BUFFER_POOL:-1G}
ETCD3_PORT=${ETCD3_PORT:-2479}
KEEP_WORK=${KEEP_WORK:-0}
RESULTS_DIR=${RESULTS_DIR:-$REPO_ROOT/bench/results}
STRATA_BIN=${STRATA_BIN:-$REPO_ROOT/bin/strata}
SKIP_BUILD=${SKIP_BUILD:-0}
NOTE=${NOTE:-}

for n in TABLES TABLE_SIZE TIME REPEATS THREADS YCSB_TIME YCSB_THREADS YCSB_RECORDS FAILOVER_THREADS FAILOVER_POST; do
	if ! [[ ${!n} =~ ^[1-9][0-9]*$ ]]; then
		echo "$n must be a positive integer, got '${!n}'" >&2
		exit 2
	fi
done
[[ $FAILOVERS =~ ^[0-9]+$ ]] || {
	echo "FAILOVERS must be a non-negative integer, got '$FAILOVERS'" >&2
	exit 2
}
[[ $FAILOVER_PRE =~ ^[0-9]+$ ]] && ((FAILOVER_PRE >= 3)) || {
	echo "FAILOVER_PRE must be at least 3 (seconds: a warm-up, then the baseline), got '$FAILOVER_PRE'" >&2
	exit 2
}
[[ $SQL_NODE =~ ^[123]$ ]] || {
	echo "SQL_NODE must be 1, 2 or 3, got '$SQL_NODE'" >&2
	exit 2
}
for t in $TARGETS; do
	case $t in
	mariadb | strata | strata-all) ;;
	*)
		echo "TARGETS may name mariadb, strata and strata-all, got '$t'" >&2
		exit 2
		;;
	esac
done
for t in $YCSB_TARGETS; do
	case $t in
	strata | strata-all | strata-client | etcd3) ;;
	*)
		echo "YCSB_TARGETS may name strata, strata-all, strata-client and etcd3, got '$t'" >&2
		exit 2
		;;
	esac
done
for w in $YCSB_WORKLOADS; do
	case $w in
	a | b | c | d | f) ;;
	*)
		echo "YCSB_WORKLOADS may name YCSB workloads a b c d f, got '$w'" >&2
		exit 2
		;;
	esac
done
for p in $PHASES; do
	case $p in
	sysbench | ycsb | failover) ;;
	*)
		echo "PHASES may name sysbench, ycsb and failover, got '$p'" >&2
		exit 2
		;;
	esac
done
read -r -a workload_list <<<"$WORKLOADS"
read -r -a targets <<<"$TARGETS"
read -r -a ycsb_targets <<<"$YCSB_TARGETS"

has_phase() { [[ " $PHASES " == *" $1 "* ]]; }
has_target() { [[ " $TARGETS " == *" $1 "* ]]; }

# The nodes: index 1..3 in the arrays below.
NODES=(1 2 3)
declare -a SQL_PORT RESP_PORT HTTP_PORT GRPC_PORT NODE_PIDS
for i in "${NODES[@]}"; do
	SQL_PORT[i]=$((STRATA_PORT + i - 1))
	RESP_PORT[i]=$((STRATA_RESP_PORT + i - 1))
	HTTP_PORT[i]=$((STRATA_HTTP_PORT + i - 1))
	GRPC_PORT[i]=$((STRATA_GRPC_PORT + i - 1))
	NODE_PIDS[i]=
done
ALL_SQL_PORTS="${SQL_PORT[1]},${SQL_PORT[2]},${SQL_PORT[3]}"
ALL_RESP_ADDRS="127.0.0.1:${RESP_PORT[1]},127.0.0.1:${RESP_PORT[2]},127.0.0.1:${RESP_PORT[3]}"
ALL_GRPC_ADDRS="127.0.0.1:${GRPC_PORT[1]},127.0.0.1:${GRPC_PORT[2]},127.0.0.1:${GRPC_PORT[3]}"
ETCD3_ENDPOINTS="127.0.0.1:$ETCD3_PORT,127.0.0.1:$((ETCD3_PORT + 2)),127.0.0.1:$((ETCD3_PORT + 4))"

MARIADB_PID=
ETCD3_PIDS=()
CLIENT_PID=
SAMPLER_PID=
POLL_PID=
OWN_WORK_DIR=0
if [[ -z ${WORK_DIR:-} ]]; then
	WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/strata-cluster.XXXXXX")
	OWN_WORK_DIR=1
fi
mkdir -p "$WORK_DIR"

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local pid
	for pid in $CLIENT_PID $SAMPLER_PID $POLL_PID; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	# SIGTERM to every server at once, then wait for each: they shut down in parallel.
	for pid in "${NODE_PIDS[@]}" $MARIADB_PID "${ETCD3_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for i in "${NODES[@]}"; do
		stop_pid "${NODE_PIDS[i]}" 30
	done
	stop_pid "$MARIADB_PID" 60
	for pid in "${ETCD3_PIDS[@]}"; do
		stop_pid "$pid" 30
	done
	if ((OWN_WORK_DIR)) && [[ $KEEP_WORK != 1 ]]; then
		rm -rf "$WORK_DIR"
	else
		log "work directory kept: $WORK_DIR"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_debian_packages sysbench mariadb jq curl -- sysbench mariadb-client jq curl
has_target mariadb && ensure_debian_packages mariadbd mariadb-install-db -- mariadb-server
if has_phase ycsb && [[ " $YCSB_TARGETS " == *" etcd3 "* ]]; then
	ensure_debian_packages etcd etcdctl -- etcd-server etcd-client
fi

if [[ $SKIP_BUILD != 1 ]]; then
	log "building $STRATA_BIN"
	(cd "$REPO_ROOT" && go build -o "$STRATA_BIN" ./cmd/strata)
fi
[[ -x $STRATA_BIN ]] || {
	log "no strata binary at $STRATA_BIN"
	exit 1
}

# Processes whose memory is sampled: "<name> <pid>" lines, rewritten when a
# node restarts; the phase the samples belong to is in $WORK_DIR/phase.
PIDS_FILE=$WORK_DIR/pids
RSS_FILE=$WORK_DIR/rss-samples.txt
: >"$PIDS_FILE"
: >"$RSS_FILE"
echo setup >"$WORK_DIR/phase"
set_pid() { # <name> <pid>: records (or, with no pid, forgets) a sampled process
	local rest
	rest=$(grep -v "^$1 " "$PIDS_FILE" || true)
	{
		[[ -z $rest ]] || echo "$rest"
		[[ -z ${2:-} ]] || echo "$1 $2"
	} >"$PIDS_FILE.new"
	mv "$PIDS_FILE.new" "$PIDS_FILE"
}
set_phase() { # written whole (rename), so the sampler never reads it empty
	echo "$1" >"$WORK_DIR/phase.new"
	mv "$WORK_DIR/phase.new" "$WORK_DIR/phase"
}

# sampler appends "<phase> <name> <VmRSS KiB>" for every process once a second.
sampler() {
	local phase name pid kib
	while true; do
		phase=$(cat "$WORK_DIR/phase" 2>/dev/null || true)
		while read -r name pid; do
			kib=$(rss_kib "$pid")
			[[ -z $kib ]] || echo "${phase:-unknown} $name $kib"
		done <"$PIDS_FILE" >>"$RSS_FILE"
		sleep 1
	done
}
sampler &
SAMPLER_PID=$!

node_join() { # <i>: the --join of node i (none for node 1, which bootstraps)
	((i == 1)) || echo "127.0.0.1:${GRPC_PORT[1]}"
}
start_node() { # <i>
	local i=$1
	start_cluster_node "$STRATA_BIN" "$WORK_DIR/n$i" "${SQL_PORT[i]}" "${RESP_PORT[i]}" \
		"${HTTP_PORT[i]}" "${GRPC_PORT[i]}" "$(node_join "$i")" || return 1
	NODE_PIDS[i]=$NODE_PID
	set_pid "n$i" "$NODE_PID"
}
live_http_ports() {
	local i
	for i in "${NODES[@]}"; do
		if [[ -n ${NODE_PIDS[i]} ]] && kill -0 "${NODE_PIDS[i]}" 2>/dev/null; then
			echo "${HTTP_PORT[i]}"
		fi
	done
}
status_json() {
	# shellcheck disable=SC2046
	cluster_status $(live_http_ports)
}
wait_replicated() { # <timeout_s>
	# shellcheck disable=SC2046
	wait_cluster_replicated 3 "$1" $(live_http_ports)
}
# node_of_store <status json> <store id>: the node index (1-3) serving a store.
node_of_store() {
	local addr i
	addr=$(jq -r --argjson s "$2" '.nodes[] | select(.id == $s) | .sql_address' <<<"$1")
	for i in "${NODES[@]}"; do
		if [[ $addr == "127.0.0.1:${SQL_PORT[i]}" ]]; then
			echo "$i"
			return 0
		fi
	done
	return 1
}
# leaders_line <status json>: "n1=2 n2=0 n3=0 (pd: n1)", region leaders per node.
leaders_line() {
	local st=$1 i id n line=""
	for i in "${NODES[@]}"; do
		id=$(jq -r --arg a "127.0.0.1:${SQL_PORT[i]}" '.nodes[] | select(.sql_address == $a) | .id' <<<"$st")
		n=$(jq --argjson s "${id:-0}" '[.regions[] | select(.leader_store == $s)] | length' <<<"$st")
		line+="n$i=$n "
	done
	echo "${line}(placement driver: n$(node_of_store "$st" "$(jq .pd_leader_store <<<"$st")" || echo '?'))"
}

LOAD_AT_START=$(cut -d' ' -f1 /proc/loadavg)
log "starting a 3-node Strata cluster (SQL ports $ALL_SQL_PORTS, data under $WORK_DIR/n1..n3)"
for i in "${NODES[@]}"; do
	start_node "$i"
done
if ! wait_replicated 120; then
	exit 1
fi
LEADERS_AT_START=$(leaders_line "$(status_json)")
log "cluster replicated: every region has 3 voters; leaders $LEADERS_AT_START"

cluster_alive() {
	local i
	for i in "${NODES[@]}"; do
		kill -0 "${NODE_PIDS[i]}" 2>/dev/null || return 1
	done
}

RAW=$WORK_DIR/runs.tsv
printf 'kind\ttest\ttarget\trepeat\tmetric\tvalue\n' >"$RAW"
row() { # <kind> <test> <target> <repeat> <metric> <value>
	local IFS=$'\t'
	echo "$*" >>"$RAW"
}

ABORTED=
# check_alive <what>: every Strata node (and MariaDB while it runs) is running.
check_alive() {
	local i
	for i in "${NODES[@]}"; do
		if ! kill -0 "${NODE_PIDS[i]}" 2>/dev/null; then
			ABORTED="node $i exited during $1"
			log "$ABORTED; last lines of $WORK_DIR/n$i/strata.log:"
			tail -n 20 "$WORK_DIR/n$i/strata.log" >&2 || true
			return 1
		fi
	done
	if [[ -n $MARIADB_PID ]] && ! kill -0 "$MARIADB_PID" 2>/dev/null; then
		ABORTED="MariaDB exited during $1"
		log "$ABORTED; last lines of $WORK_DIR/mariadb/error.log:"
		tail -n 20 "$WORK_DIR/mariadb/error.log" >&2 || true
		return 1
	fi
}

# client <log> <command...>: runs a client in the background and waits for it,
# so that a signal to this script is handled at once and cleanup can stop it.
client() {
	local out=$1 rc=0
	shift
	"$@" >"$out" 2>&1 &
	CLIENT_PID=$!
	wait "$CLIENT_PID" || rc=$?
	CLIENT_PID=
	return "$rc"
}

sysbench_ports() { # <target>
	case $1 in
	mariadb) echo "$MARIADB_PORT" ;;
	strata) echo "${SQL_PORT[SQL_NODE]}" ;;
	strata-all) echo "$ALL_SQL_PORTS" ;;
	esac
}
dataset_of() { if [[ $1 == mariadb ]]; then echo mariadb; else echo cluster; fi; }

sysbench_cmd() { # <log> <ports> <workload> <threads> <command> [extra args]
	local out=$1 ports=$2 workload=$3 threads=$4 cmd=$5
	shift 5
	client "$out" sysbench "$workload" --db-driver=mysql --mysql-host=127.0.0.1 \
		--mysql-port="$ports" --mysql-user=root --mysql-password= \
		--mysql-db=sbtest --tables="$TABLES" --table-size="$TABLE_SIZE" \
		--threads="$threads" "$@" "$cmd"
}

# tables_visible <port>: the node on port sees every sbtest table.
tables_visible() {
	local t
	for ((t = 1; t <= TABLES; t++)); do
		mariadb --protocol=tcp -h 127.0.0.1 -P "$1" -u root -N -e "SELECT 1 FROM sbtest.sbtest$t LIMIT 1" \
			>/dev/null 2>&1 || return 1
	done
}

prepare_threads=$((TABLES < 4 ? TABLES : 4))
declare -A TABLES_DIRTY=()
RSS_LOADED_DONE=0
prepare_tables() { # <dataset>
	local ds=$1 port started=$SECONDS i waited
	if [[ $ds == mariadb ]]; then port=$MARIADB_PORT; else port=${SQL_PORT[SQL_NODE]}; fi
	set_phase prepare
	mariadb --protocol=tcp -h 127.0.0.1 -P "$port" -u root \
		-e 'DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest'
	if ! sysbench_cmd "$WORK_DIR/prepare-$ds.log" "$port" oltp_common "$prepare_threads" prepare; then
		tail -n 20 "$WORK_DIR/prepare-$ds.log" >&2
		log "$ds: prepare failed"
		exit 1
	fi
	if [[ $ds == cluster ]]; then
		for i in "${NODES[@]}"; do
			waited=0
			until tables_visible "${SQL_PORT[i]}"; do
				if ((waited++ > 300)); then
					log "node $i does not see the sbtest tables 60 s after they were created"
					exit 1
				fi
				sleep 0.2
			done
		done
		sleep 2
	fi
	TABLES_DIRTY[$ds]=0
	log "$ds: prepared $TABLES tables of $TABLE_SIZE rows in $((SECONDS - started))s"
}

# record_loaded_rss: VmRSS of every server, 5 s after the tables are loaded.
record_loaded_rss() {
	local name pid kib
	sleep 5
	while read -r name pid; do
		kib=$(rss_kib "$pid")
		[[ -z $kib ]] || row rss loaded "$name" - rss_kib "$kib"
	done <"$PIDS_FILE"
}

run_sysbench() { # <target> <workload> <repeat>
	local t=$1 w=$2 rep=$3 out line rc=0
	out="$WORK_DIR/run-$w-$rep-$t.log"
	sysbench_cmd "$out" "$(sysbench_ports "$t")" "$w" "$THREADS" run --time="$TIME" --events=0 \
		--percentile=99 --histogram=on || rc=$?
	if ((rc != 0)) || ! line=$(awk -f "$REPO_ROOT/bench/sysbench_run.awk" "$out"); then
		log "$t $w repeat=$rep FAILED (exit $rc); tail of $out:"
		tail -n 5 "$out" >&2
		row sysbench "$w" "$t" "$rep" failed 1
		return 0
	fi
	local qps tps p95 p99 reported errors events
	IFS=$'\t' read -r qps tps p95 p99 reported errors events <<<"$line"
	log "$t $w threads=$THREADS repeat=$rep: qps=$qps tps=$tps p95=${p95}ms p99=${p99}ms errors=$errors"
	row sysbench "$w" "$t" "$rep" qps "$qps"
	row sysbench "$w" "$t" "$rep" tps "$tps"
	row sysbench "$w" "$t" "$rep" p95_ms "$p95"
	row sysbench "$w" "$t" "$rep" p99_ms "$p99"
	row sysbench "$w" "$t" "$rep" errors "$errors"
}

order_for() { # <repeat> <items...>: the items, reversed on even repeats
	local rep=$1
	shift
	if ((rep % 2 == 0)); then
		printf '%s\n' "$@" | tac | tr '\n' ' '
	else
		echo "$*"
	fi
}

# Phase 1: sysbench.
if has_phase sysbench; then
	if has_target mariadb; then
		start_mariadb "$WORK_DIR/mariadb" "$MARIADB_PORT" "$MARIADB_BUFFER_POOL"
		set_pid mariadb "$MARIADB_PID"
	fi
	datasets=()
	has_target mariadb && datasets+=(mariadb)
	{ has_target strata || has_target strata-all; } && datasets+=(cluster)
	for ds in "${datasets[@]}"; do
		prepare_tables "$ds"
	done
	record_loaded_rss
	RSS_LOADED_DONE=1
	LEADERS_AT_SYSBENCH=$(leaders_line "$(status_json)")
	log "sysbench: leaders $LEADERS_AT_SYSBENCH; target strata is node $SQL_NODE (127.0.0.1:${SQL_PORT[SQL_NODE]})"
	for w in "${workload_list[@]}"; do
		for ((rep = 1; rep <= REPEATS; rep++)); do
			for t in $(order_for "$rep" "${targets[@]}"); do
				ds=$(dataset_of "$t")
				if [[ ${TABLES_DIRTY[$ds]} == 1 ]]; then
					prepare_tables "$ds"
				fi
				set_phase sysbench
				run_sysbench "$t" "$w" "$rep"
				check_alive "sysbench $w on $t, repeat $rep" || break 3
				if [[ $w == oltp_insert || $w == oltp_delete ]]; then
					TABLES_DIRTY[$ds]=1
				fi
			done
		done
	done
	if [[ -n $MARIADB_PID ]]; then
		log "stopping MariaDB"
		stop_pid "$MARIADB_PID" 60
		MARIADB_PID=
		set_pid mariadb
	fi
fi

# Phase 2: YCSB through strata workload.
ycsb_driver_args() {
	case $1 in
	strata) echo "--driver resp --addr 127.0.0.1:${RESP_PORT[SQL_NODE]}" ;;
	strata-all) echo "--driver resp --addr $ALL_RESP_ADDRS" ;;
	strata-client) echo "--driver strata --addr $ALL_GRPC_ADDRS" ;;
	etcd3) echo "--driver etcd --endpoints $ETCD3_ENDPOINTS" ;;
	esac
}
summary_field() { sed -n "s|.* $1=\([^ ]*\).*|\1|p" <<<"$summary"; }
if has_phase ycsb && [[ -z $ABORTED ]]; then
	set_phase ycsb-load
	if [[ " $YCSB_TARGETS " == *" etcd3 "* ]]; then
		start_etcd3 "$WORK_DIR/etcd3" "$ETCD3_PORT"
		for i in 0 1 2; do set_pid "etcd$i" "${ETCD3_PIDS[i]}"; done
	fi
	loaded=()
	for t in "${ycsb_targets[@]}"; do
		ds=$t
		[[ $t == strata-all || $t == strata-client ]] && ds=strata
		[[ " ${loaded[*]} " == *" $ds "* ]] && continue
		loaded+=("$ds")
		log "loading $YCSB_RECORDS YCSB records into $ds"
		# shellcheck disable=SC2046
		if ! client "$WORK_DIR/ycsb-load-$ds.log" "$STRATA_BIN" workload init ycsb --drop $(ycsb_driver_args "$ds") \
			--records "$YCSB_RECORDS" --threads 16 --display-every 10s; then
			log "loading $ds failed; tail of $WORK_DIR/ycsb-load-$ds.log:"
			tail -n 5 "$WORK_DIR/ycsb-load-$ds.log" >&2
			ABORTED="loading the YCSB records into $ds failed"
			break
		fi
		tail -n 1 "$WORK_DIR/ycsb-load-$ds.log" >&2
	done
	set_phase ycsb
	for w in $YCSB_WORKLOADS; do
		[[ -z $ABORTED ]] || break
		for ((rep = 1; rep <= REPEATS; rep++)); do
			for t in $(order_for "$rep" "${ycsb_targets[@]}"); do
				out="$WORK_DIR/ycsb-$w-$t-$rep.log"
				rc=0
				# shellcheck disable=SC2046
				client "$out" "$STRATA_BIN" workload run ycsb --workload "$w" $(ycsb_driver_args "$t") \
					--records "$YCSB_RECORDS" --threads "$YCSB_THREADS" --display-every 10s \
					--duration "${YCSB_TIME}s" || rc=$?
				summary=$(grep '^_summary ' "$out" || true)
				if [[ -z $summary ]]; then
					log "ycsb-$w on $t (repeat $rep) FAILED (exit $rc); tail of $out:"
					tail -n 5 "$out" >&2
					row ycsb "$w" "$t" "$rep" failed 1
				else
					log "ycsb-$w on $t (repeat $rep): $(summary_field ops/sec) ops/s, p99 $(summary_field p99_ms) ms, $(summary_field errors) errors"
					row ycsb "$w" "$t" "$rep" ops_per_sec "$(summary_field ops/sec)"
					row ycsb "$w" "$t" "$rep" p99_ms "$(summary_field p99_ms)"
					row ycsb "$w" "$t" "$rep" errors "$(summary_field errors)"
				fi
				check_alive "ycsb-$w on $t" || break 3
				if [[ $t == etcd3 ]]; then
					for pid in "${ETCD3_PIDS[@]}"; do
						if ! kill -0 "$pid" 2>/dev/null; then
							ABORTED="an etcd member exited during ycsb-$w"
							break 4
						fi
					done
				fi
			done
		done
	done
	if ((${#ETCD3_PIDS[@]})); then
		log "stopping etcd"
		for pid in "${ETCD3_PIDS[@]}"; do
			stop_pid "$pid" 30
		done
		ETCD3_PIDS=()
		for i in 0 1 2; do set_pid "etcd$i"; done
	fi
fi

# Phase 3: failover.
#
# analyze_failover <timeline files...>: reads "<slot> <events>" lines (slots are
# tenths of a second since the epoch) and prints "recovery_s censored stall_s
# baseline_tps min_tps" for the kill at KILL_AT, the load ending at LOAD_END.
analyze_failover() {
	cat "$@" | awk -v kill="$KILL_AT" -v end="$LOAD_END" -v pre="$FAILOVER_PRE" '
	{ n[$1] += $2 }
	END {
		ks = int(kill * 10)            # the slot the kill fell in
		es = int(end * 10)             # the slot the load ended in (partial)
		bw = pre - 2; if (bw > 3) bw = 3
		base = 0
		for (s = ks - 10 * bw; s < ks; s++) base += n[s]
		base /= bw
		rec = -1; minw = -1
		for (s = ks; s + 10 <= es; s++) {
			w = 0
			for (j = s; j < s + 10; j++) w += n[j]
			if (minw < 0 || w < minw) minw = w
			# recovered: this 100 ms and the second it starts both at >= 90%
			if (rec < 0 && n[s] >= 0.09 * base && w >= 0.9 * base) rec = s / 10 - kill
		}
		censored = 0
		if (rec < 0) { rec = end - kill; censored = 1 }
		if (rec < 0) rec = 0
		# the longest run of slots after the kill in which nothing completed
		stall = 0; run = 0
		for (s = ks; s < es; s++) {
			if (n[s] + 0 == 0) { run++; if (run > stall) stall = run } else run = 0
		}
		printf "%.2f %d %.1f %.0f %.0f\n", rec, censored, stall / 10, base, minw < 0 ? 0 : minw
	}'
}

if has_phase failover && [[ -z $ABORTED ]] && ((FAILOVERS > 0)); then
	if [[ -z ${TABLES_DIRTY[cluster]:-} ]]; then
		# The sysbench phase did not run: the load needs its tables.
		prepare_tables cluster
		((RSS_LOADED_DONE)) || record_loaded_rss
	fi
	set_phase failover
	log "failover: $FAILOVERS kills under $FAILOVER_WORKLOAD at $FAILOVER_THREADS threads (${FAILOVER_PRE}s before, ${FAILOVER_POST}s after each)"
	for ((f = 1; f <= FAILOVERS; f++)); do
		st=$(status_json) || {
			ABORTED="no node answers /status before failover $f"
			break
		}
		leaders=$(leaders_line "$st")
		# The victim: most region leaders, ties broken by the placement driver's leader.
		victim=$(jq -r '
			.pd_leader_store as $pd
			| [.regions[].leader_store] as $l
			| [.nodes[] | .id as $id | {id, n: ([$l[] | select(. == $id)] | length), pd: (if .id == $pd then 1 else 0 end)}]
			| sort_by(.n, .pd) | last | .id' <<<"$st")
		v=$(node_of_store "$st" "$victim") || {
			ABORTED="store $victim of /status is none of this script's nodes"
			break
		}
		survivors=()
		for i in "${NODES[@]}"; do
			((i == v)) || survivors+=("${SQL_PORT[i]}")
		done
		ports=$(
			IFS=,
			echo "${survivors[*]}"
		)
		tl="$WORK_DIR/failover-$f.timeline"
		out="$WORK_DIR/failover-$f.log"
		rm -f "$tl".*
		# The load, in the background: the kill happens while it runs.
		# timeout: a thread stuck in a request that never returns would keep
		# sysbench from ending; 30 s past its time it is stopped (a failed load).
		SB_TIMELINE_WORKLOAD=$FAILOVER_WORKLOAD SB_TIMELINE_OUT=$tl \
			timeout --kill-after=5 $((FAILOVER_PRE + FAILOVER_POST + 30)) \
			sysbench "$REPO_ROOT/bench/sysbench_timeline.lua" --db-driver=mysql --mysql-host=127.0.0.1 \
			--mysql-port="$ports" --mysql-user=root --mysql-password= --mysql-db=sbtest \
			--tables="$TABLES" --table-size="$TABLE_SIZE" --threads="$FAILOVER_THREADS" \
			--mysql-ignore-errors=all --report-interval=1 --time=$((FAILOVER_PRE + FAILOVER_POST)) \
			--events=0 run >"$out" 2>&1 &
		CLIENT_PID=$!
		waited=0
		until grep -q '^Threads started!' "$out" 2>/dev/null; do
			if ! kill -0 "$CLIENT_PID" 2>/dev/null || ((waited++ > 300)); then
				break
			fi
			sleep 0.1
		done
		sleep "$FAILOVER_PRE"
		KILL_AT=$(date +%s.%N)
		kill -KILL "${NODE_PIDS[v]}"
		wait "${NODE_PIDS[v]}" 2>/dev/null || true
		set_pid "n$v"
		echo "=== $(date -u +%FT%T.%3NZ) killed with SIGKILL by bench/cluster.sh (failover $f)" >>"$WORK_DIR/n$v/strata.log"
		# Where the time goes: what a survivor's /status says, every 0.5 s for 5 s.
		(
			for ((s = 1; s <= 10; s++)); do
				sleep 0.5
				echo "--- $(date -u +%T.%3N) (kill + $((s * 5 / 10)).$((s * 5 % 10)) s)"
				status_json | jq -c '{pd_leader_store, regions: [.regions[] | {id, leader_store}], nodes: [.nodes[] | {id, up, leaders}]}' || echo "no answer"
			done >"$WORK_DIR/failover-$f.status" 2>&1
		) &
		POLL_PID=$!
		rc=0
		wait "$CLIENT_PID" || rc=$?
		CLIENT_PID=
		LOAD_END=$(date +%s.%N)
		wait "$POLL_PID" || true
		POLL_PID=
		restarted_at=$SECONDS
		if ! start_node "$v"; then
			ABORTED="node $v did not restart after failover $f"
			break
		fi
		if ! wait_replicated 180; then
			ABORTED="the cluster did not become fully replicated after node $v restarted (failover $f)"
			break
		fi
		replicated_s=$((SECONDS - restarted_at))
		# How the restarted node caught up: snapshots it applied since its restart.
		snaps=$(curl -sf --max-time 3 "http://127.0.0.1:${HTTP_PORT[v]}/metrics" |
			awk '/^strata_raftstore_snapshots_total\{kind="applied"\}/ { print $2 }' || true)
		if ((rc != 0)) || ! compgen -G "$tl.*" >/dev/null; then
			log "failover $f: the load failed (exit $rc); tail of $out:"
			tail -n 5 "$out" >&2
			row failover "$FAILOVER_WORKLOAD" "n$v" "$f" failed 1
			continue
		fi
		read -r rec censored stall base minw < <(analyze_failover "$tl".*)
		log "failover $f: killed node $v (leaders $leaders); back to 90% of $base tps after ${rec}s$( ((censored)) && echo " (NOT within the ${FAILOVER_POST}s of load)"), longest stall ${stall}s, lowest 1 s $minw tps; fully replicated ${replicated_s}s after the restart (${snaps:-0} snapshots applied)"
		row failover "$FAILOVER_WORKLOAD" "n$v" "$f" recovery_s "$rec"
		row failover "$FAILOVER_WORKLOAD" "n$v" "$f" censored "$censored"
		row failover "$FAILOVER_WORKLOAD" "n$v" "$f" stall_s "$stall"
		row failover "$FAILOVER_WORKLOAD" "n$v" "$f" baseline_tps "$base"
		row failover "$FAILOVER_WORKLOAD" "n$v" "$f" min_1s_tps "$minw"
		row failover "$FAILOVER_WORKLOAD" "n$v" "$f" replicated_s "$replicated_s"
		row failover "$FAILOVER_WORKLOAD" "n$v" "$f" snapshots_applied "${snaps:-0}"
		row failover "$FAILOVER_WORKLOAD" "n$v" "$f" leaders "\"$leaders\""
		check_alive "failover $f" || break
	done
fi
set_phase done

# Memory: the peak of each process in each phase.
awk 'NF == 3 { k = $1 SUBSEP $2; if ($3 + 0 > peak[k] + 0) peak[k] = $3 }
	END { for (k in peak) { split(k, a, SUBSEP); printf "rss\tpeak-%s\t%s\t-\trss_kib\t%s\n", a[1], a[2], peak[k] } }' \
	"$RSS_FILE" | sort >>"$RAW"

# Report.
summarize() {
	awk -F'\t' -v targets="$TARGETS" -v ytargets="$YCSB_TARGETS" -v post="$FAILOVER_POST" '
	function median(list,    n, a, i, j, t) {
		n = split(list, a, " ")
		if (n == 0) return ""
		for (i = 2; i <= n; i++) {
			t = a[i] + 0
			for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]
			a[j + 1] = t
		}
		if (n % 2) return a[(n + 1) / 2]
		return (a[n / 2] + a[n / 2 + 1]) / 2
	}
	# pct: the nearest-rank percentile of a list of numbers.
	function pct(list, p,    n, a, i, j, t, r) {
		n = split(list, a, " ")
		if (n == 0) return ""
		for (i = 2; i <= n; i++) {
			t = a[i] + 0
			for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]
			a[j + 1] = t
		}
		r = int(n * p / 100 + 0.999999); if (r < 1) r = 1; if (r > n) r = n
		return a[r]
	}
	function num(v) { return v == "" ? "-" : sprintf("%.0f", v) }
	function ms(v) { return v == "" ? "-" : sprintf("%.2f", v) }
	function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("**%.2f**", a / b) }
	function mib(k) { return k == "" ? "-" : sprintf("%.0f", k / 1024) }
	NR == 1 { next }
	{
		kind = $1; test = $2; who = $3; metric = $5; v = $6
		if (kind == "sysbench" || kind == "ycsb") {
			if (!((kind, test) in seen)) { seen[kind, test] = 1; order[kind] = order[kind] " " test }
			k = kind SUBSEP test SUBSEP who
			if (metric == "failed") failed[k]++
			else if (metric == "errors") errs[k] += v
			else vals[k, metric] = vals[k, metric] " " v
		} else if (kind == "failover") {
			if (metric == "failed") { fofail++; next }
			fo[$4, metric] = v
			if (metric == "recovery_s") { fon++; foi[fon] = $4; fov[$4] = who; rec = rec " " v }
			if (metric == "stall_s") stall = stall " " v
			if (metric == "censored" && v == 1) censored++
		} else if (kind == "rss") {
			rss[test, who] = v
			rsseen[who] = 1; phseen[test] = 1
		}
	}
	END {
		name["mariadb"] = "MariaDB"; name["strata"] = "Strata, one node"; name["strata-all"] = "Strata, 3 nodes"; name["strata-client"] = "Strata, Go client"
		name["etcd3"] = "etcd 3 members"
		goal["oltp_point_select"] = ">= 1.0"; goal["oltp_insert"] = ">= 0.6"; goal["a"] = ">= 5"
		nt = split(targets, tg, " ")
		nw = split(order["sysbench"], ws, " ")
		if (nw > 0) {
			print "### sysbench: TPS (p99 ms), median of the repeats\n"
			line = "| workload |"; sep = "|---|"
			for (s = 1; s <= nt; s++) { line = line " " name[tg[s]] " |"; sep = sep "---:|" }
			hasm = (targets ~ /mariadb/)
			if (hasm) for (s = 1; s <= nt; s++) if (tg[s] != "mariadb") { line = line " " name[tg[s]] " / MariaDB |"; sep = sep "---:|" }
			print line " target |"; print sep "---|"
			for (i = 1; i <= nw; i++) {
				row = "| " ws[i] " |"
				for (s = 1; s <= nt; s++) {
					k = "sysbench" SUBSEP ws[i] SUBSEP tg[s]
					m[tg[s]] = median(vals[k, "tps"])
					cell = num(m[tg[s]]) " (" ms(median(vals[k, "p99_ms"])) ")"
					if (errs[k] > 0) cell = cell ", " errs[k] " errors"
					if (failed[k] > 0) cell = cell ", " failed[k] " failed runs"
					row = row " " cell " |"
				}
				if (hasm) for (s = 1; s <= nt; s++) if (tg[s] != "mariadb") row = row " " ratio(m[tg[s]], m["mariadb"]) " |"
				print row " " (ws[i] in goal ? goal[ws[i]] : "") " |"
			}
			print "\nerrors: transactions sysbench rolled back and retried on its default ignored errors (1213, 1205, 1020), summed over the repeats."
		}
		ny = split(ytargets, yt, " ")
		nw = split(order["ycsb"], ws, " ")
		if (nw > 0) {
			print "\n### YCSB through strata workload: operations/s (p99 ms), median of the repeats\n"
			line = "| workload |"; sep = "|---|"
			for (s = 1; s <= ny; s++) { line = line " " name[yt[s]] " |"; sep = sep "---:|" }
			hase = (ytargets ~ /etcd3/)
			if (hase) for (s = 1; s <= ny; s++) if (yt[s] != "etcd3") { line = line " " name[yt[s]] " / etcd 3 |"; sep = sep "---:|" }
			print line " target |"; print sep "---|"
			for (i = 1; i <= nw; i++) {
				row = "| " toupper(ws[i]) " |"
				for (s = 1; s <= ny; s++) {
					k = "ycsb" SUBSEP ws[i] SUBSEP yt[s]
					m[yt[s]] = median(vals[k, "ops_per_sec"])
					cell = num(m[yt[s]]) " (" ms(median(vals[k, "p99_ms"])) ")"
					if (errs[k] > 0) cell = cell ", " errs[k] " errors"
					if (failed[k] > 0) cell = cell ", " failed[k] " failed runs"
					row = row " " cell " |"
				}
				if (hase) for (s = 1; s <= ny; s++) if (yt[s] != "etcd3") row = row " " ratio(m[yt[s]], m["etcd3"]) " |"
				print row " " (ws[i] in goal ? goal[ws[i]] : "") " |"
			}
		}
		if (fon > 0 || fofail > 0) {
			print "\n### Failover: kill -9 of the node with the most region leaders, under load\n"
			printf "%d kills, %d with a failed load, %d not recovered before the load ended. Recovery, in seconds from the kill until the first 100 ms that, and the second it starts, ran at >= 90%% of the pre-kill rate: **p50 %s, p99 %s, max %s** (goal: under 3 s). Longest stall with no transaction completed: p50 %s, max %s s.\n\n", \
				fon + fofail, fofail + 0, censored + 0, pct(rec, 50), pct(rec, 99), pct(rec, 100), pct(stall, 50), pct(stall, 100)
			print "| # | killed | leaders before (placement driver) | pre-kill TPS | lowest 1 s TPS | longest stall s | recovery s | fully replicated after restart, s | snapshots it applied |"
			print "|---:|---|---|---:|---:|---:|---:|---:|---:|"
			for (i = 1; i <= fon; i++) {
				f = foi[i]; l = fo[f, "leaders"]; gsub(/"/, "", l)
				r = fo[f, "recovery_s"]; if (fo[f, "censored"] == 1) r = "> " r " (not recovered)"
				printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f, fov[f], l, fo[f, "baseline_tps"], fo[f, "min_1s_tps"], fo[f, "stall_s"], r, fo[f, "replicated_s"], ((f, "snapshots_applied") in fo) ? fo[f, "snapshots_applied"] : "-"
			}
		}
		# fixed orders: the phases as they run, the processes as they start
		np = 0; nph = split("loaded peak-prepare peak-sysbench peak-ycsb-load peak-ycsb peak-failover", allph, " ")
		for (p = 1; p <= nph; p++) if (allph[p] in phseen) ph[++np] = allph[p]
		nr = 0; nrn = split("n1 n2 n3 mariadb etcd0 etcd1 etcd2", allrn, " ")
		for (r = 1; r <= nrn; r++) if (allrn[r] in rsseen) rn[++nr] = allrn[r]
		if (nr > 0) {
			print "\n### Memory: VmRSS in MiB\n"
			line = "| process |"; sep = "|---|"
			for (p = 1; p <= np; p++) { line = line " " ph[p] " |"; sep = sep "---:|" }
			print line; print sep
			for (r = 1; r <= nr; r++) {
				line = "| " rn[r] " |"
				for (p = 1; p <= np; p++) line = line " " mib(rss[ph[p], rn[r]]) " |"
				print line
			}
			print "\nloaded: 5 s after the sysbench tables were loaded; peak-<phase>: the largest of the samples taken each second during that phase (prepare: the first and every re-prepare; failover: a restarted node counts from its restart)."
		}
	}' "$RAW"
}

version_of() {
	case $1 in
	strata)
		local v
		v=$("$STRATA_BIN" version 2>/dev/null || echo "$STRATA_BIN (version unknown)")
		if [[ $SKIP_BUILD != 1 ]]; then
			v="$v, built by this run from $(cd "$REPO_ROOT" && git describe --always --dirty 2>/dev/null || echo "an unknown tree")"
		fi
		echo "$v"
		;;
	mariadb | etcd)
		local v
		v=$(${1/mariadb/mariadbd} --version 2>/dev/null || true)
		v=${v%%$'\n'*}
		echo "${v:-unknown}"
		;;
	esac
}

stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
mkdir -p "$RESULTS_DIR"
report="$RESULTS_DIR/$stamp-cluster.md"
{
	echo "# bench/cluster.sh: 3-node Strata cluster vs MariaDB and etcd x3, $stamp"
	echo
	echo "- machine: $(nproc) CPUs, $(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr); every server and client shares it; load average (1 min) $LOAD_AT_START when the run began, $(cut -d' ' -f1 /proc/loadavg) when it ended"
	echo "- strata: $(version_of strata); 3 nodes on 127.0.0.1 (SQL $ALL_SQL_PORTS), replication factor 3, every write fsynced on a quorum"
	echo "- region leaders per node when the cluster formed: $LEADERS_AT_START; when sysbench began: ${LEADERS_AT_SYSBENCH:--}"
	if has_phase sysbench; then
		echo "- $(sysbench --version): tables=$TABLES table_size=$TABLE_SIZE time=${TIME}s repeats=$REPEATS threads=$THREADS, order alternating"
		echo "- targets: \"Strata, one node\" = every connection to node $SQL_NODE (127.0.0.1:${SQL_PORT[SQL_NODE]}); \"Strata, 3 nodes\" = --mysql-port=$ALL_SQL_PORTS (connections dealt round robin)"
		has_target mariadb && echo "- mariadb: $(version_of mariadb); innodb_flush_log_at_trx_commit=1, no binlog, buffer pool $MARIADB_BUFFER_POOL"
	fi
	if has_phase ycsb; then
		echo "- YCSB: workloads \"$YCSB_WORKLOADS\", $YCSB_RECORDS records of 10 x 100 bytes, $YCSB_THREADS threads, ${YCSB_TIME}s per run; \"Strata, one node\" = node $SQL_NODE's Redis port, \"Strata, 3 nodes\" = the three Redis ports in turn, \"Strata, Go client\" = Strata's Go client (--driver strata), each operation over gRPC to its key's region leader, writes waiting at once committed together as the Redis server commits them"
		[[ " $YCSB_TARGETS " == *" etcd3 "* ]] && echo "- etcd: $(version_of etcd); 3 members, default configuration (fsync per write batch), linearizable reads"
	fi
	if has_phase failover; then
		echo "- failover: $FAILOVERS kills; load $FAILOVER_WORKLOAD at $FAILOVER_THREADS threads over the two other nodes (--mysql-ignore-errors=all), ${FAILOVER_PRE}s before and ${FAILOVER_POST}s after each kill; transactions counted per 100 ms (bench/sysbench_timeline.lua)"
	fi
	[[ -z $NOTE ]] || echo "- note: $NOTE"
	[[ -z $ABORTED ]] || echo "- **ABORTED: $ABORTED**; the tables cover the runs before it"
	echo
	summarize
} >"$report"
cp "$RAW" "${report%.md}.tsv"
cat "$report"
log "report written to $report (raw runs: ${report%.md}.tsv)"
[[ -z $ABORTED ]] || exit 1
