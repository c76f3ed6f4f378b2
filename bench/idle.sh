#!/usr/bin/env bash
# bench/idle.sh: what idle regions cost. Starts NODES strata nodes (a cluster when
# NODES > 1), splits one table into REGIONS regions with SPLIT TABLE, waits until
# every region is fully replicated, lets the cluster settle for SETTLE seconds,
# then measures, over WINDOW seconds with no client traffic at all, the CPU
# seconds each strata process used (utime + stime from /proc/<pid>/stat) and
# prints them as a share of one core. With PROFILE=1 it also writes a CPU
# profile of node 1 over the window (WORK_DIR/idle.pprof; see `go tool pprof`).
# With REUSE=1 it starts the nodes on the data directories a previous run left
# in WORK_DIR (KEEP_WORK=1) instead of splitting again, to compare two builds on
# the same regions. Before measuring it waits (up to 10 minutes) until no
# operator has been in flight for SETTLE seconds, so balancing is not counted.
# The issue's goal: thousands of idle regions cost under 5% of a core per node.
#
# Run it holding the benchmark lock: flock /tmp/strata-bench.lock bash bench/idle.sh
#
# Settings (environment variables, or flags: --regions 2000):
#   NODES=3  REGIONS=2000  SETTLE=20  WINDOW=30  PROFILE=0  REUSE=0  EXTRA_ARGS=
#   BASE_PORT=4700 (node i uses BASE_PORT+10*i .. +3: SQL, RESP, HTTP, gRPC)
#   WORK_DIR=<mktemp -d>  KEEP_WORK=0
#   STRATA_BIN=bin/strata (built from ./cmd/strata unless SKIP_BUILD=1)
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

usage() { bench_usage "${BASH_SOURCE[0]}" "$@"; }
parse_flags "NODES REGIONS SETTLE WINDOW PROFILE REUSE EXTRA_ARGS BASE_PORT WORK_DIR KEEP_WORK STRATA_BIN SKIP_BUILD" "$@"

NODES=${NODES:-3}
REGIONS=${REGIONS:-2000}
SETTLE=${SETTLE:-20}
WINDOW=${WINDOW:-30}
PROFILE=${PROFILE:-0}
REUSE=${REUSE:-0}
# EXTRA_ARGS: more `strata start` flags for every node (word-split).
export STRATA_NODE_ARGS=${EXTRA_ARGS:-}
BASE_PORT=${BASE_PORT:-4700}
KEEP_WORK=${KEEP_WORK:-0}
WORK_DIR=${WORK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/strata-idle.XXXXXX")}

PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		stop_pid "$pid" 30
	done
	[[ $KEEP_WORK == 1 ]] || rm -rf "$WORK_DIR"
}
trap cleanup EXIT

if [[ -z ${STRATA_BIN:-} ]]; then
	if [[ ${SKIP_BUILD:-0} != 1 ]]; then
		(cd "$REPO_ROOT" && go build -o bin/strata ./cmd/strata)
	fi
	STRATA_BIN=$REPO_ROOT/bin/strata
fi

port() { echo $((BASE_PORT + 10 * $1 + $2)); }
HTTP_PORTS=()
for ((i = 0; i < NODES; i++)); do
	join=""
	((i == 0)) || join=127.0.0.1:$(port 0 3)
	# On REUSE every node starts before any is waited for: the first one
	# serves only once a quorum of the system region's replicas runs.
	NODE_NO_WAIT=$REUSE start_cluster_node "$STRATA_BIN" "$WORK_DIR/n$i" "$(port "$i" 0)" "$(port "$i" 1)" "$(port "$i" 2)" "$(port "$i" 3)" "$join"
	PIDS+=("$NODE_PID")
	HTTP_PORTS+=("$(port "$i" 2)")
done
if [[ $REUSE == 1 ]]; then
	for i in "${!PIDS[@]}"; do
		wait_for_sql 127.0.0.1 "$(port "$i" 0)" "${PIDS[i]}" 120 || { log "node $((i + 1)) did not start"; exit 1; }
	done
fi
replicas=$((NODES < 3 ? NODES : 3))
wait_cluster_replicated "$replicas" 120 "${HTTP_PORTS[@]}"

sql() { mysql -h 127.0.0.1 -P "$(port 0 0)" -u root -N -e "$1"; }
if [[ $REUSE != 1 ]]; then
log "splitting a table into $REGIONS regions"
sql "CREATE DATABASE IF NOT EXISTS idle; CREATE TABLE idle.t (id BIGINT PRIMARY KEY, v INT)"
# SPLIT TABLE makes at most 1000 regions a statement (TiDB's limit).
for ((lo = 0; lo < REGIONS; lo += 1000)); do
	n=$((REGIONS - lo < 1000 ? REGIONS - lo : 1000))
	sql "SPLIT TABLE idle.t BETWEEN ($((lo * 1000))) AND ($(((lo + n) * 1000))) REGIONS $n" >/dev/null
done
fi
wait_cluster_replicated "$replicas" 1800 "${HTTP_PORTS[@]}"
# Balancing (leaders and replicas spreading over the nodes) is not idle:
# wait until no operator has been in flight for SETTLE seconds.
quiet=0 waited=0
while ((quiet < SETTLE && waited < 600)); do
	ops=$(cluster_status "${HTTP_PORTS[@]}" | jq '[.nodes[].operators] | add')
	if [[ $ops == 0 ]]; then quiet=$((quiet + 1)); else quiet=0; fi
	sleep 1
	waited=$((waited + 1))
done
total=$(cluster_status "${HTTP_PORTS[@]}" | jq '.regions | length')
log "$total regions, fully replicated, no operator for ${quiet}s; leaders per node: $(cluster_status "${HTTP_PORTS[@]}" | jq -c '[.nodes[].leaders]')"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -a before
for i in "${!PIDS[@]}"; do
	before[i]=$(cpu_ticks "${PIDS[i]}")
done
if [[ $PROFILE == 1 ]]; then
	curl -sf -o "$WORK_DIR/idle.pprof" "http://127.0.0.1:${HTTP_PORTS[0]}/debug/pprof/profile?seconds=$WINDOW" &
	prof=$!
fi
sleep "$WINDOW"
hz=$(getconf CLK_TCK)
echo "nodes=$NODES regions=$total window=${WINDOW}s"
for i in "${!PIDS[@]}"; do
	used=$(($(cpu_ticks "${PIDS[i]}") - before[i]))
	awk -v n="$((i + 1))" -v t="$used" -v hz="$hz" -v w="$WINDOW" \
		'BEGIN { printf "node %d: %.2f CPU s in %d s = %.1f%% of a core\n", n, t / hz, w, 100 * t / hz / w }'
done
if [[ $PROFILE == 1 ]]; then
	wait "$prof" || true
	KEEP_WORK=1
	log "CPU profile of node 1: $WORK_DIR/idle.pprof (go tool pprof -top $STRATA_BIN $WORK_DIR/idle.pprof)"
fi
