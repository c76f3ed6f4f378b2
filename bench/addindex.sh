#!/usr/bin/env bash
# bench/addindex.sh: how fast Strata adds an index to a loaded table on one node,
# with and without writes to the table meanwhile.
#
# It builds bin/strata (unless SKIP_BUILD=1), starts one node as its own child,
# loads one sysbench table (oltp_common prepare: ROWS rows, whose k_1 index is
# itself added after the load), then times, one after the other, each with the
# backfill's worker count set first (SET GLOBAL tidb_ddl_reorg_worker_cnt):
#   ADD INDEX on c (120-character values) with 1 worker, then with 4
#   ADD INDEX on k (integers) with 1 worker, then with 4
#   the same with 4 workers and tidb_ddl_enable_fast_reorg = OFF (the backfill in
#     transactions of 1,024 rows instead of ingest mode)
#   ADD UNIQUE INDEX on (id, k) with 4 (unique indexes always backfill in transactions)
#   ADD INDEX on k with 4 while sysbench oltp_write_only runs (WRITE_THREADS)
#   ADMIN CHECK TABLE sbtest1 (every index against every row)
# and prints each one's wall time and rows per second of backfill (ROWS divided
# by the statement's time: the statement also moves through four schema
# versions, a few milliseconds on one node). ADMIN SHOW DDL JOBS is sampled
# while the last ADD INDEX runs, to show its progress, and the write load's
# transactions per second are reported before and during it.
#
# Run it holding the benchmark lock:
#   flock /tmp/strata-bench.lock bash bench/addindex.sh
# Settings: ROWS=500000, WRITE_THREADS=4, PORT=4400, HTTP_PORT=18400, GRPC_PORT=20400,
# STRATA_BIN=bin/strata, WORK_DIR (default: a fresh temporary directory, removed).
# The report is printed and written to bench/results/<UTC time>-addindex.md.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

ROWS=${ROWS:-500000}
WRITE_THREADS=${WRITE_THREADS:-4}
PORT=${PORT:-4400}
HTTP_PORT=${HTTP_PORT:-18400}
GRPC_PORT=${GRPC_PORT:-20400}
STRATA_BIN=${STRATA_BIN:-$REPO_ROOT/bin/strata}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_WORK=0
if [[ -n ${WORK_DIR:-} ]]; then
	KEEP_WORK=1
else
	WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/strata-addindex.XXXXXX")
fi
STRATA_PID=
LOAD_PID=

cleanup() {
	trap - EXIT INT TERM
	[[ -n $LOAD_PID ]] && stop_pid "$LOAD_PID" 5
	[[ -n $STRATA_PID ]] && stop_pid "$STRATA_PID" 30
	((KEEP_WORK)) || rm -rf "$WORK_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_debian_packages sysbench mariadb -- sysbench mariadb-client
if [[ $SKIP_BUILD != 1 ]]; then
	log "building $STRATA_BIN"
	(cd "$REPO_ROOT" && go build -o "$STRATA_BIN" ./cmd/strata)
fi
start_strata "$STRATA_BIN" "$WORK_DIR/strata" "$PORT" "$HTTP_PORT" "$GRPC_PORT"

sql() { mariadb --protocol=tcp -h 127.0.0.1 -P "$PORT" -u root -N -B "$@"; }
sb() { # <workload> <command> [args]
	local w=$1 c=$2
	shift 2
	sysbench "$w" --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user=root \
		--mysql-password= --mysql-db=sbtest --tables=1 --table-size="$ROWS" "$@" "$c"
}

sql -e 'CREATE DATABASE sbtest'
log "loading $ROWS rows (sysbench oltp_common prepare, which adds index k_1 after the load)"
started=$(date +%s.%N)
sb oltp_common prepare >"$WORK_DIR/prepare.log" 2>&1
log "loaded in $(echo "$(date +%s.%N) - $started" | bc) s"

REPORT="$WORK_DIR/report.md"
{
	echo "# ADD INDEX on one node, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo
	echo "commit $(cd "$REPO_ROOT" && git rev-parse --short HEAD), $ROWS rows of sysbench's sbtest1, \`flock /tmp/strata-bench.lock bash bench/addindex.sh\`"
	echo
	echo "| statement | backfill workers | mode | seconds | rows/s |"
	echo "|---|---|---|---|---|"
} >"$REPORT"

timed() { # <workers> <statement> [fast reorg ON|OFF]: runs it, appends its row to the report
	local t0 t1 secs mode=${3:-ON}
	t0=$(date +%s.%N)
	if [[ $1 == - ]]; then
		sql sbtest -e "$2"
	else
		sql sbtest -e "SET GLOBAL tidb_ddl_reorg_worker_cnt = $1; SET GLOBAL tidb_ddl_enable_fast_reorg = $mode; $2"
	fi
	t1=$(date +%s.%N)
	secs=$(echo "$t1 - $t0" | bc)
	if [[ $1 == - ]]; then
		mode=-
	else # the mode the job ran in, as ADMIN SHOW DDL JOBS names it after the job type
		mode=$(sql -e 'ADMIN SHOW DDL JOBS 1' | awk -F'\t' '{if (match($4, /\/\* [a-z]+ \*\//)) print substr($4, RSTART + 3, RLENGTH - 6); else print "-"}')
	fi
	printf '| `%s` | %s | %s | %.2f | %.0f |\n' "$2" "$1" "$mode" "$secs" "$(echo "$ROWS / $secs" | bc -l)" >>"$REPORT"
	log "$2 ($1 workers, $mode): ${secs}s"
}

timed 1 'ALTER TABLE sbtest1 ADD INDEX ic1 (c)'
timed 4 'ALTER TABLE sbtest1 ADD INDEX ic4 (c)'
timed 1 'ALTER TABLE sbtest1 ADD INDEX ik1 (k)'
timed 4 'ALTER TABLE sbtest1 ADD INDEX ik4 (k)'
timed 4 'ALTER TABLE sbtest1 ADD INDEX ik4t (k)' OFF
timed 4 'ALTER TABLE sbtest1 ADD UNIQUE INDEX uid (id, k)'

# The same ADD INDEX under a write load on the table.
LOAD_TIME=600
sb oltp_write_only run --threads="$WRITE_THREADS" --time="$LOAD_TIME" --report-interval=1 \
	--mysql-ignore-errors=all >"$WORK_DIR/load.log" 2>&1 &
LOAD_PID=$!
sleep 5
before=$(grep -E '^\[ [0-9]+s \]' "$WORK_DIR/load.log" | tail -n 3 | awk '{s += $7} END {printf "%.0f", s / NR}')
: >"$WORK_DIR/progress.txt"
(
	while sleep 0.5; do
		sql -e 'ADMIN SHOW DDL JOBS 1' 2>/dev/null | awk -F'\t' '$12 == "running" {print $4, $5, $8, $12}' >>"$WORK_DIR/progress.txt" || true
	done
) &
SAMPLER=$!
from=$(grep -cE '^\[ [0-9]+s \]' "$WORK_DIR/load.log" || true)
timed 4 'ALTER TABLE sbtest1 ADD INDEX ikw (k)'
to=$(grep -cE '^\[ [0-9]+s \]' "$WORK_DIR/load.log" || true)
kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true
during=$(grep -E '^\[ [0-9]+s \]' "$WORK_DIR/load.log" | sed -n "$((from + 1)),${to}p" | awk '{s += $7} END {if (NR) printf "%.0f", s / NR; else print "n/a"}')
stop_pid "$LOAD_PID" 5
LOAD_PID=
sed -i 's/^| `ALTER TABLE sbtest1 ADD INDEX ikw (k)`/| `ALTER TABLE sbtest1 ADD INDEX ikw (k)` (under the write load)/' "$REPORT"
timed - 'ADMIN CHECK TABLE sbtest1'
{
	echo
	echo "Write load (sysbench oltp_write_only, $WRITE_THREADS threads, same table): $before tps before the last ADD INDEX, $during tps while it ran."
	echo
	echo "ADMIN SHOW DDL JOBS 1 sampled every 0.5 s during it (JOB_TYPE SCHEMA_STATE ROW_COUNT STATE):"
	echo
	echo '```'
	uniq "$WORK_DIR/progress.txt"
	echo '```'
} >>"$REPORT"
mkdir -p "$REPO_ROOT/bench/results"
out="$REPO_ROOT/bench/results/$(date -u +%Y-%m-%dT%H%M%SZ)-addindex.md"
cp "$REPORT" "$out"
cat "$REPORT"
log "report written to $out"
