#!/usr/bin/env bash
# bench/scale.sh: scale-out on this machine.
#
#   1. Hot spots from ids: sysbench oltp_insert (auto-increment keys, as sysbench
#      runs it) on a 3-node cluster into a table whose key is AUTO_INCREMENT, then
#      into one whose key is AUTO_RANDOM, each for TIME seconds through all three
#      nodes' SQL ports, with a small --region-max-size so the tables split while
#      they grow. It reports the throughput of each and, sampled every 5 s from
#      /status, the leaders per node (of the table's regions, and of all).
#   2. Per-node cost: KV95 through `strata workload run kv` on clusters of 1, 3
#      and 5 nodes, reporting throughput and the CPU seconds all strata processes
#      used per 1,000 operations, for each of KV_DRIVERS: "resp" (Redis protocol,
#      every node's port in turn: a node forwards a request for a key another
#      node leads over gRPC) and "strata" (Strata's Go client, each request
#      straight to its key's region leader, as TiKV's go-ycsb driver runs). On a
#      2-core machine the nodes share the cores, so throughput cannot grow with
#      nodes; the CPU per operation is the number that should stay flat.
#
# Run it holding the benchmark lock: flock /tmp/strata-bench.lock bash bench/scale.sh
#
# Settings (environment variables): TIME=30  THREADS=16  KV_THREADS=32  KV_KEYS=100000
#   KV_DRIVERS="resp strata"
#   REGION_MAX_SIZE=4MiB  NODES_LIST="1 3 5"  PHASES="insert kv"
#   STRATA_PORT=4000 STRATA_RESP_PORT=6380 STRATA_HTTP_PORT=8080 STRATA_GRPC_PORT=20160
#   WORK_DIR=<mktemp -d>  KEEP_WORK=0  RESULTS_DIR=bench/results
#   STRATA_BIN=bin/strata (built from ./cmd/strata unless SKIP_BUILD=1)
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

TIME=${TIME:-30}
THREADS=${THREADS:-16}
KV_THREADS=${KV_THREADS:-32}
KV_KEYS=${KV_KEYS:-100000}
KV_DRIVERS=${KV_DRIVERS:-resp strata}
REGION_MAX_SIZE=${REGION_MAX_SIZE:-4MiB}
NODES_LIST=${NODES_LIST:-"1 3 5"}
PHASES=${PHASES:-"insert kv"}
STRATA_PORT=${STRATA_PORT:-4000}
STRATA_RESP_PORT=${STRATA_RESP_PORT:-6380}
STRATA_HTTP_PORT=${STRATA_HTTP_PORT:-8080}
STRATA_GRPC_PORT=${STRATA_GRPC_PORT:-20160}
RESULTS_DIR=${RESULTS_DIR:-$REPO_ROOT/bench/results}
KEEP_WORK=${KEEP_WORK:-0}
WORK_DIR=${WORK_DIR:-$(mktemp -d /tmp/strata-scale.XXXXXX)}
STRATA_BIN=${STRATA_BIN:-$REPO_ROOT/bin/strata}

for tool in sysbench mysql jq curl; do
	command -v "$tool" >/dev/null || { log "$tool is required"; exit 1; }
done
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
	(cd "$REPO_ROOT" && go build -o "$STRATA_BIN" ./cmd/strata)
fi

PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		stop_pid "$pid" 20 || true
	done
	PIDS=()
	if [[ $KEEP_WORK != 1 ]]; then rm -rf "$WORK_DIR"; fi
}
trap cleanup EXIT

# start_nodes <n> <dir> [extra flags...]: a cluster of n nodes, node 1 bootstrapping.
start_nodes() {
	local n=$1 dir=$2 i
	shift 2
	PIDS=()
	for ((i = 0; i < n; i++)); do
		local join=""
		((i == 0)) || join="127.0.0.1:$STRATA_GRPC_PORT"
		STRATA_NODE_ARGS="$*" start_cluster_node "$STRATA_BIN" "$dir/n$((i + 1))" $((STRATA_PORT + i)) \
			$((STRATA_RESP_PORT + i)) $((STRATA_HTTP_PORT + i)) $((STRATA_GRPC_PORT + i)) "$join"
		PIDS+=("$NODE_PID")
	done
	local ports=()
	for ((i = 0; i < n; i++)); do ports+=($((STRATA_HTTP_PORT + i))); done
	wait_cluster_replicated "$((n < 3 ? n : 3))" 120 "${ports[@]}"
}

stop_nodes() {
	local pid
	for pid in "${PIDS[@]}"; do stop_pid "$pid" 20 || true; done
	PIDS=()
}

# cpu_seconds: user+system CPU seconds of the running nodes so far.
cpu_seconds() {
	local pid total=0 ticks
	ticks=$(getconf CLK_TCK)
	for pid in "${PIDS[@]}"; do
		total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
	done
	awk -v t="$total" -v k="$ticks" 'BEGIN { printf "%.2f", t / k }'
}

# leaders_per_node: "node <id>: <leaders>, ..." over the data regions.
leaders_per_node() {
	cluster_status "$STRATA_HTTP_PORT" $((STRATA_HTTP_PORT + 1)) $((STRATA_HTTP_PORT + 2)) |
		jq -r '[.regions[] | select(.system | not) | .leader_store] | group_by(.) |
			map("node \(.[0]): \(length)") | join(", ")'
}

REPORT=$WORK_DIR/report.md
mkdir -p "$WORK_DIR" "$RESULTS_DIR"
{
	echo "# bench/scale.sh, $(date -u +%F) ($(git -C "$REPO_ROOT" rev-parse --short HEAD))"
	echo
	echo "TIME=$TIME THREADS=$THREADS KV_THREADS=$KV_THREADS KV_KEYS=$KV_KEYS REGION_MAX_SIZE=$REGION_MAX_SIZE"
	echo
} >"$REPORT"

if [[ " $PHASES " == *" insert "* ]]; then
	log "phase 1: oltp_insert, AUTO_INCREMENT vs AUTO_RANDOM, 3 nodes"
	start_nodes 3 "$WORK_DIR/insert" --region-max-size "$REGION_MAX_SIZE" --split-check-interval 2s
	echo "## sysbench oltp_insert on 3 nodes ($THREADS threads, all three SQL ports)" >>"$REPORT"
	echo >>"$REPORT"
	echo "| key | inserts/s | p95 ms | regions after | leaders per node during the run (every 5 s) |" >>"$REPORT"
	echo "|---|---:|---:|---:|---|" >>"$REPORT"
	for kind in auto_increment auto_random; do
		db=scale_$kind
		keydef="BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY"
		[[ $kind == auto_random ]] && keydef="BIGINT NOT NULL PRIMARY KEY AUTO_RANDOM(5)"
		mysql -h 127.0.0.1 -P "$STRATA_PORT" -u root -e "CREATE DATABASE $db;
			CREATE TABLE $db.sbtest1 (id $keydef, k INT NOT NULL DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '',
				pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))"
		sleep 2 # every node's schema cache
		(
			for ((s = 5; s <= TIME; s += 5)); do
				sleep 5
				leaders_per_node || true
			done
		) >"$WORK_DIR/$kind.leaders" &
		sampler=$!
		# --table-size only bounds the k column's random values here.
		sysbench oltp_insert --db-driver=mysql --mysql-host=127.0.0.1 \
			--mysql-port="$STRATA_PORT,$((STRATA_PORT + 1)),$((STRATA_PORT + 2))" --mysql-user=root \
			--mysql-db="$db" --tables=1 --table-size=100000 --threads="$THREADS" --time="$TIME" \
			--report-interval=0 --histogram=on --auto-inc=on run >"$WORK_DIR/$kind.sysbench" 2>&1 || true
		wait "$sampler" || true
		tps=$(awk '/queries:/ {gsub(/[()]/, "", $3); print $3; exit}' "$WORK_DIR/$kind.sysbench")
		p95=$(awk '/95th percentile:/ {print $3; exit}' "$WORK_DIR/$kind.sysbench")
		regions=$(cluster_status "$STRATA_HTTP_PORT" | jq '[.regions[] | select(.system | not)] | length')
		if [[ -z $tps ]]; then
			log "sysbench failed on $kind:"
			grep -m3 FATAL "$WORK_DIR/$kind.sysbench" >&2 || tail -5 "$WORK_DIR/$kind.sysbench" >&2
		fi
		mapfile -t samples <"$WORK_DIR/$kind.leaders"
		echo "| $kind | ${tps:-?} | ${p95:-?} | $regions | $(IFS='; '; echo "${samples[*]}") |" >>"$REPORT"
	done
	stop_nodes
	echo >>"$REPORT"
fi

if [[ " $PHASES " == *" kv "* ]]; then
	echo "## KV95 (strata workload run kv), $KV_THREADS threads, $KV_KEYS keys" >>"$REPORT"
	echo >>"$REPORT"
	echo "| nodes | driver | ops/s | p99 ms | CPU s per 1,000 ops (all nodes) |" >>"$REPORT"
	echo "|---:|---|---:|---:|---:|" >>"$REPORT"
	for n in $NODES_LIST; do
		log "phase 2: KV95 on $n node(s)"
		start_nodes "$n" "$WORK_DIR/kv$n"
		resp_addrs="" grpc_addrs=""
		for ((i = 0; i < n; i++)); do
			resp_addrs+="${resp_addrs:+,}127.0.0.1:$((STRATA_RESP_PORT + i))"
			grpc_addrs+="${grpc_addrs:+,}127.0.0.1:$((STRATA_GRPC_PORT + i))"
		done
		# One load (the drivers share the resp layout), then each driver.
		"$STRATA_BIN" workload init kv --driver resp --addr "$resp_addrs" --keys "$KV_KEYS" >"$WORK_DIR/kv$n.init" 2>&1
		for drv in $KV_DRIVERS; do
			addrs=$resp_addrs
			[[ $drv == strata ]] && addrs=$grpc_addrs
			before=$(cpu_seconds)
			"$STRATA_BIN" workload run kv --read-percent 95 --driver "$drv" --addr "$addrs" --keys "$KV_KEYS" \
				--threads "$KV_THREADS" --duration "${TIME}s" >"$WORK_DIR/kv$n-$drv.run" 2>&1 || true
			after=$(cpu_seconds)
			summary=$(grep '^_summary' "$WORK_DIR/kv$n-$drv.run" | tail -1)
			ops=$(sed -n 's/.* ops=\([0-9]*\) .*/\1/p' <<<"$summary")
			ops_s=$(sed -n 's/.* ops\/sec=\([0-9.]*\) .*/\1/p' <<<"$summary")
			p99=$(sed -n 's/.* p99_ms=\([0-9.]*\).*/\1/p' <<<"$summary")
			cpu=$(awk -v a="$after" -v b="$before" -v o="${ops:-0}" 'BEGIN { if (o > 0) printf "%.3f", (a - b) * 1000 / o; else print "?" }')
			echo "| $n | $drv | ${ops_s:-?} | ${p99:-?} | $cpu |" >>"$REPORT"
		done
		stop_nodes
	done
	echo >>"$REPORT"
fi

cat "$REPORT"
out="$RESULTS_DIR/$(date -u +%Y-%m-%dT%H%M%SZ)-scale.md"
cp "$REPORT" "$out"
log "report written to $out"
