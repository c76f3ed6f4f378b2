#!/usr/bin/env bash
# bench/spill.sh: queries that hold more than a small statement memory quota, timed
# with the quota (so they spill to <data-dir>/tmp) and without it (the default 1 GiB).
#
# It starts Strata itself (a child process with its own data directory under
# WORK_DIR), loads sysbench's sbtest1 with ROWS rows (sysbench oltp_common prepare, as
# bench/olap.sh does) and times each query below REPEATS times with
# tidb_mem_quota_query at its default and at QUOTA, alternating which goes first. It
# checks that both settings return the same answer, and prints a markdown table of the
# medians and every run, with the strata_sql_spill_* counters read from /metrics.
#   window, many partitions:  ROW_NUMBER and a running SUM over PARTITION BY k % 1000
#   window, one partition:    RANK, ROW_NUMBER and a running SUM over ORDER BY k
#   UNION (distinct):         (k, c) of every row UNION (k, c) of every other row
#   EXCEPT:                   (id, k) of every row EXCEPT those with id % 3 = 0
#
# Settings (environment variable, or the same name as a flag: --rows=100000):
#   ROWS=1000000  QUOTA=8388608 (8 MiB)  REPEATS=3
#   STRATA_PORT=4000  STRATA_HTTP_PORT=8080  STRATA_GRPC_PORT=20160
#   WORK_DIR=<mktemp -d>  KEEP_WORK=0  STRATA_BIN=bin/strata (built from ./cmd/strata
#   unless SKIP_BUILD=1)  RESULTS_DIR=bench/results  NOTE="free text"
#
# Run it under the bench lock: flock /tmp/strata-bench.lock bash bench/spill.sh
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

usage() { bench_usage "${BASH_SOURCE[0]}" "${1:-0}"; }

parse_flags "ROWS QUOTA REPEATS STRATA_PORT STRATA_HTTP_PORT STRATA_GRPC_PORT WORK_DIR KEEP_WORK STRATA_BIN SKIP_BUILD RESULTS_DIR NOTE" "$@"

ROWS=${ROWS:-1000000}
QUOTA=${QUOTA:-8388608}
REPEATS=${REPEATS:-3}
STRATA_PORT=${STRATA_PORT:-4000}
STRATA_HTTP_PORT=${STRATA_HTTP_PORT:-8080}
STRATA_GRPC_PORT=${STRATA_GRPC_PORT:-20160}
KEEP_WORK=${KEEP_WORK:-0}
RESULTS_DIR=${RESULTS_DIR:-$REPO_ROOT/bench/results}
STRATA_BIN=${STRATA_BIN:-$REPO_ROOT/bin/strata}
SKIP_BUILD=${SKIP_BUILD:-0}
NOTE=${NOTE:-}
bench_setup spill

ensure_debian_packages mariadb sysbench -- mariadb-client sysbench
bench_build
COMMIT=$(git -C "$REPO_ROOT" rev-parse --short HEAD)

start_strata "$STRATA_BIN" "$WORK_DIR/strata" "$STRATA_PORT" "$STRATA_HTTP_PORT" "$STRATA_GRPC_PORT"

sql() { # <session settings> <query>: runs a query in database sbtest, rows to stdout
	mariadb --protocol=tcp -h 127.0.0.1 -P "$STRATA_PORT" -u root -N -B sbtest -e "$1 $2"
}

log "preparing sbtest1 with $ROWS rows"
mariadb --protocol=tcp -h 127.0.0.1 -P "$STRATA_PORT" -u root -e 'DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest'
started=$SECONDS
if ! sysbench oltp_common --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$STRATA_PORT" \
	--mysql-user=root --mysql-password= --mysql-db=sbtest --tables=1 --table-size="$ROWS" \
	--threads=1 prepare >"$WORK_DIR/prepare.log" 2>&1; then
	tail -n 20 "$WORK_DIR/prepare.log" >&2
	log "prepare failed"
	exit 1
fi
log "prepared in $((SECONDS - started))s"

NAMES=("window, many partitions" "window, one partition" "UNION (distinct)" "EXCEPT")
QUERIES=(
	"SELECT COUNT(*), SUM(rn), SUM(s) FROM (SELECT ROW_NUMBER() OVER w rn, SUM(k) OVER w s FROM sbtest1 WINDOW w AS (PARTITION BY k % 1000 ORDER BY id)) t"
	"SELECT COUNT(*), SUM(rk), SUM(rn), MAX(s) FROM (SELECT RANK() OVER w rk, ROW_NUMBER() OVER w rn, SUM(k) OVER w s FROM sbtest1 WINDOW w AS (ORDER BY k)) t"
	"SELECT COUNT(*), SUM(k), MAX(c) FROM (SELECT k, c FROM sbtest1 UNION SELECT k, c FROM sbtest1 WHERE id % 2 = 0) t"
	"SELECT COUNT(*), SUM(id), SUM(k) FROM (SELECT id, k FROM sbtest1 EXCEPT SELECT id, k FROM sbtest1 WHERE id % 3 = 0) t"
)
SETTINGS=("SET tidb_mem_quota_query = DEFAULT;" "SET tidb_mem_quota_query = $QUOTA;")
LABELS=("default quota (1 GiB)" "quota $QUOTA bytes")

metric() { curl -s "http://127.0.0.1:$STRATA_HTTP_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

RAW=$WORK_DIR/timings.tsv
: >"$RAW"
for q in "${!QUERIES[@]}"; do
	declare -A answer=()
	for ((r = 1; r <= REPEATS; r++)); do
		order=(0 1)
		((r % 2 == 0)) && order=(1 0)
		for s in "${order[@]}"; do
			files_before=$(metric strata_sql_spill_files_total)
			t0=$(date +%s.%N)
			out=$(sql "${SETTINGS[$s]}" "${QUERIES[$q]}")
			t1=$(date +%s.%N)
			files_after=$(metric strata_sql_spill_files_total)
			secs=$(echo "$t1 - $t0" | bc)
			files=$(echo "${files_after:-0} - ${files_before:-0}" | bc)
			printf '%s\t%s\t%s\t%s\t%s\n' "$q" "$s" "$r" "$secs" "$files" >>"$RAW"
			log "${NAMES[$q]}, ${LABELS[$s]}, run $r: ${secs}s, $files spill files: $out"
			if [[ -n ${answer[x]:-} && ${answer[x]} != "$out" ]]; then
				log "answers differ: '${answer[x]}' vs '$out'"
				exit 1
			fi
			answer[x]=$out
		done
	done
	unset answer
done
leftover=$(find "$WORK_DIR/strata/data/tmp" -type f 2>/dev/null | wc -l)

REPORT=$(
	echo "## Spilling past the statement memory quota ($(date -u +%F), commit $COMMIT)"
	echo
	echo "sbtest1 with $ROWS rows on one node; seconds per query, median of $REPEATS (every run), through the mariadb client."
	[[ -n $NOTE ]] && echo && echo "$NOTE"
	echo
	echo "| query | ${LABELS[0]} | ${LABELS[1]} | spill files per run |"
	echo "|---|---|---|---|"
	for q in "${!QUERIES[@]}"; do
		row="| ${NAMES[$q]} |"
		for s in 0 1; do
			runs=$(awk -F'\t' -v q="$q" -v s="$s" '$1 == q && $2 == s { printf "%.2f\n", $4 }' "$RAW")
			med=$(sort -n <<<"$runs" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
			row+=" $med ($(paste -sd' ' <<<"$runs")) |"
		done
		files=$(awk -F'\t' -v q="$q" '$1 == q && $2 == 1 { print $5 }' "$RAW" | sort -n | tail -1)
		row+=" $files |"
		echo "$row"
	done
	echo
	echo "Temporary files left in <data-dir>/tmp after the runs: $leftover."
	echo
	for q in "${!QUERIES[@]}"; do echo "- ${NAMES[$q]}: \`${QUERIES[$q]}\`"; done
)
echo "$REPORT"
mkdir -p "$RESULTS_DIR"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
echo "$REPORT" >"$RESULTS_DIR/$stamp-spill.md"
cp "$RAW" "$RESULTS_DIR/$stamp-spill.tsv"
log "wrote $RESULTS_DIR/$stamp-spill.md"
