#!/usr/bin/env bash
# bench/tpcc.sh: TPC-C (strata workload tpcc) on Strata and MariaDB side by side.
#
# It starts both servers itself (each a child process with its own data directory under
# WORK_DIR; MariaDB from Debian's mariadb-server, as bench/sysbench.sh does), loads the
# same number of warehouses into each with `strata workload init tpcc`, runs the workload
# against each in alternation with the same driver and the same flags, checks the
# consistency conditions on both at the end, and prints a markdown table that is also
# written to bench/results/<UTC date-time>-tpcc.md with the raw summary lines.
#
# Settings (environment variable, or the same name as a flag: --warehouses=2):
#   WAREHOUSES=1  THREADS=10 (terminals)  TIME=60s  REPEATS=3  WAIT=0 (1: keying and think times)
#   MARIADB_PORT=3307  STRATA_PORT=4000  STRATA_HTTP_PORT=8080  STRATA_GRPC_PORT=20160
#   MARIADB_BUFFER_POOL=1G  WORK_DIR=<mktemp -d>  KEEP_WORK=0  RESULTS_DIR=bench/results
#   STRATA_BIN=bin/strata (built from ./cmd/strata unless SKIP_BUILD=1)  NOTE="free text"
#
# Method, and why:
#   - One client program for both servers: the same SQL, go-sql-driver with server-side
#     prepared statements, the same terminals per warehouse, no think time by default
#     (as tiup bench tpcc), so tpmC compares servers, not tools.
#   - Alternation: repeat r runs MariaDB then Strata when r is odd, Strata then MariaDB
#     when even, so drift over time (page cache, other load on the machine) hits both.
#     Both databases grow with every run (New-Order adds orders); each gets the same
#     number of runs in the same positions.
#   - tpmC is New-Order transactions completed per minute (the 1% the spec rolls back
#     included); the table gives the median over the repeats, every run's value, and the
#     p95 and p99 of New-Order and Payment from the run with the median tpmC.
#   - Durability as in bench/sysbench.sh: MariaDB fsyncs every commit
#     (innodb_flush_log_at_trx_commit=1), Strata fsyncs through Raft.
#   - Run it under the bench lock: flock /tmp/strata-bench.lock bash bench/tpcc.sh
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

usage() { bench_usage "${BASH_SOURCE[0]}" "${1:-0}"; }

parse_flags "WAREHOUSES THREADS TIME REPEATS WAIT MARIADB_PORT STRATA_PORT STRATA_HTTP_PORT STRATA_GRPC_PORT MARIADB_BUFFER_POOL WORK_DIR KEEP_WORK RESULTS_DIR STRATA_BIN SKIP_BUILD NOTE" "$@"

WAREHOUSES=${WAREHOUSES:-1}
THREADS=${THREADS:-10}
TIME=${TIME:-60s}
REPEATS=${REPEATS:-3}
WAIT=${WAIT:-0}
MARIADB_PORT=${MARIADB_PORT:-3307}
STRATA_PORT=${STRATA_PORT:-4000}
STRATA_HTTP_PORT=${STRATA_HTTP_PORT:-8080}
STRATA_GRPC_PORT=${STRATA_GRPC_PORT:-20160}
MARIADB_BUFFER_POOL=${MARIADB_BUFFER_POOL:-1G}
KEEP_WORK=${KEEP_WORK:-0}
RESULTS_DIR=${RESULTS_DIR:-$REPO_ROOT/bench/results}
STRATA_BIN=${STRATA_BIN:-$REPO_ROOT/bin/strata}
SKIP_BUILD=${SKIP_BUILD:-0}
NOTE=${NOTE:-}
bench_setup tpcc

ensure_debian_packages mariadbd mariadb -- mariadb-server mariadb-client
bench_build
COMMIT=$(git -C "$REPO_ROOT" rev-parse --short HEAD)

start_mariadb "$WORK_DIR/mariadb" "$MARIADB_PORT" "$MARIADB_BUFFER_POOL"
start_strata "$STRATA_BIN" "$WORK_DIR/strata" "$STRATA_PORT" "$STRATA_HTTP_PORT" "$STRATA_GRPC_PORT"

declare -A ADDR=([mariadb]="127.0.0.1:$MARIADB_PORT" [strata]="127.0.0.1:$STRATA_PORT")
wait_flag=()
((WAIT)) && wait_flag=(--wait)

for target in mariadb strata; do
	log "loading $WAREHOUSES warehouses into $target"
	"$STRATA_BIN" workload init tpcc --warehouses "$WAREHOUSES" --addr "${ADDR[$target]}" --drop --threads 4
done

RAW=$WORK_DIR/summaries.tsv
: >"$RAW"
for ((r = 1; r <= REPEATS; r++)); do
	order=(mariadb strata)
	((r % 2 == 0)) && order=(strata mariadb)
	for target in "${order[@]}"; do
		log "run $r: $target, $THREADS terminals, $TIME"
		out=$("$STRATA_BIN" workload run tpcc --warehouses "$WAREHOUSES" --threads "$THREADS" --duration "$TIME" \
			--display-every 30s --addr "${ADDR[$target]}" "${wait_flag[@]}")
		summary=$(grep '^_summary ' <<<"$out")
		printf '%s\t%d\t%s\n' "$target" "$r" "$summary" >>"$RAW"
		grep -E '^tpmC ' <<<"$out" | sed "s/^/[$target run $r] /" >&2
	done
done

declare -A CHECK
for target in mariadb strata; do
	log "checking consistency on $target"
	if out=$("$STRATA_BIN" workload check tpcc --addr "${ADDR[$target]}" 2>&1); then
		CHECK[$target]="all hold"
	else
		CHECK[$target]="FAILED"
	fi
	sed "s/^/[$target check] /" <<<"$out" >&2
done

# field <summary> <key>: the value of key=value in a summary line.
field() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k {print $2}'; }

REPORT=$(
	echo "TPC-C, $WAREHOUSES warehouse(s), $THREADS terminals, $TIME per run, $REPEATS runs each, wait=$WAIT; commit $COMMIT; $(date -u +%Y-%m-%d)"
	[[ -n $NOTE ]] && echo && echo "$NOTE"
	echo
	echo "| server | tpmC (median) | every run | New-Order p95 / p99 ms | Payment p95 / p99 ms | retries | errors | consistency |"
	echo "|---|---:|---|---|---|---:|---:|---|"
	declare -A MEDIAN
	for target in mariadb strata; do
		mapfile -t lines < <(awk -F'\t' -v t="$target" '$1 == t {print $3}' "$RAW")
		tpms=()
		for l in "${lines[@]}"; do tpms+=("$(field "$l" tpmC)"); done
		med=$(printf '%s\n' "${tpms[@]}" | sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')
		MEDIAN[$target]=$med
		# The run closest to the median, for its latencies.
		best=${lines[0]}
		for l in "${lines[@]}"; do
			if awk -v a="$(field "$l" tpmC)" -v b="$(field "$best" tpmC)" -v m="$med" 'BEGIN {exit !((a-m)^2 < (b-m)^2)}'; then best=$l; fi
		done
		echo "| $target | $med | ${tpms[*]} | $(field "$best" new_order_p95_ms) / $(field "$best" new_order_p99_ms) | $(field "$best" payment_p95_ms) / $(field "$best" payment_p99_ms) | $(field "$best" retries) | $(field "$best" errors) | ${CHECK[$target]} |"
	done
	echo
	echo "Strata / MariaDB tpmC: $(awk -v s="${MEDIAN[strata]}" -v m="${MEDIAN[mariadb]}" 'BEGIN {printf "%.2f", s / m}')"
)
echo
echo "$REPORT"
mkdir -p "$RESULTS_DIR"
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
echo "$REPORT" >"$RESULTS_DIR/$stamp-tpcc.md"
cp "$RAW" "$RESULTS_DIR/$stamp-tpcc.tsv"
log "wrote $RESULTS_DIR/$stamp-tpcc.md"
