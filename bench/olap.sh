#!/usr/bin/env bash
# bench/olap.sh: analytic queries on Strata and MariaDB side by side.
#
# It starts both servers itself (each a child process with its own data directory under
# WORK_DIR; MariaDB from Debian's mariadb-server, as bench/sysbench.sh does), then
#   1. for each table size in ROWS, loads sysbench's sbtest1 into both (sysbench
#      oltp_common prepare, as bench/sysbench.sh does) and times three queries (their
#      answers are not compared: sysbench draws the rows at random in each prepare,
#      --rand-seed or not, so the two tables hold different k and pad values):
#        SELECT COUNT(*) FROM sbtest1
#        SELECT k % 100 g, COUNT(*), SUM(LENGTH(c)) FROM sbtest1 GROUP BY g ORDER BY g
#        SELECT SUBSTRING(pad,1,2) p, COUNT(*), AVG(k) FROM sbtest1 GROUP BY p ORDER BY 2 DESC LIMIT 5
#   2. loads TPC-H at scale factor SCALE into both (strata workload init tpch: the same
#      generated rows in each), times the 22 queries, and compares every answer
#      (strata workload check tpch --against: numbers rounded to hundredths; row counts
#      and Q1, Q4, Q6, Q12, Q13 also against values computed from the generator).
# After each load it waits (up to SETTLE_TIMEOUT) until Strata's KV engine has run no
# compaction for 10 s (strata_storage_compactions_running and _total on /metrics), so
# that queries meet the LSM in the shape it keeps, not while a bulk load's compactions
# still take a core.
# It prints markdown tables (medians, every run, Strata/MariaDB time ratio) that are also
# written to bench/results/<UTC date-time>-olap.md, with the raw timings in a .tsv.
#
# Settings (environment variable, or the same name as a flag: --scale=0.1):
#   ROWS="1000000 10000000" (sbtest1 sizes; "" skips part 1)  SCALE=1 (0 skips part 2)
#   REPEATS=3  WARMUP=1 (0: no unmeasured first run)  QUERY_TIMEOUT=1800s (per TPC-H query; a query past it counts as failed)
#   QUERIES=1-22 (TPC-H queries, e.g. 1,3,5-7)  LOAD_THREADS=4
#   MARIADB_PORT=3307  STRATA_PORT=4000  STRATA_HTTP_PORT=8080  STRATA_GRPC_PORT=20160
#   MARIADB_BUFFER_POOL=4G  STRATA_CACHE=$MARIADB_BUFFER_POOL (Strata's --cache: the same memory
#   for its block cache as MariaDB's buffer pool)  WORK_DIR=<mktemp -d>  KEEP_WORK=0  RESULTS_DIR=bench/results
#   STRATA_BIN=bin/strata (built from ./cmd/strata unless SKIP_BUILD=1)  NOTE="free text"
#   SETTLE_TIMEOUT=600 (seconds to wait for Strata's compactions to stop after a load)
#
# Method, and why:
#   - Alternation: repeat r runs MariaDB first when r is odd and Strata first when it is
#     even, query by query, so drift over time (page cache, other load) hits both.
#     Before the timed repeats each query runs once on each server unmeasured, so both
#     start warm (MariaDB's buffer pool, Strata's block cache).
#   - The sbtest queries are timed around the mariadb client (one connection per query,
#     a few milliseconds of the total); the TPC-H queries inside strata workload run tpch,
#     around the query and the reading of its rows.
#   - Ratios are Strata time / MariaDB time of the medians: below 1, Strata is faster.
#   - Run it under the bench lock: flock /tmp/strata-bench.lock bash bench/olap.sh
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

usage() { bench_usage "${BASH_SOURCE[0]}" "${1:-0}"; }

parse_flags "ROWS SCALE REPEATS WARMUP QUERY_TIMEOUT QUERIES LOAD_THREADS MARIADB_PORT STRATA_PORT STRATA_HTTP_PORT STRATA_GRPC_PORT MARIADB_BUFFER_POOL STRATA_CACHE WORK_DIR KEEP_WORK RESULTS_DIR STRATA_BIN SKIP_BUILD NOTE SETTLE_TIMEOUT" "$@"

ROWS=${ROWS-1000000 10000000}
SCALE=${SCALE:-1}
REPEATS=${REPEATS:-3}
WARMUP=${WARMUP:-1}
QUERY_TIMEOUT=${QUERY_TIMEOUT:-1800s}
QUERIES=${QUERIES:-1-22}
LOAD_THREADS=${LOAD_THREADS:-4}
MARIADB_PORT=${MARIADB_PORT:-3307}
STRATA_PORT=${STRATA_PORT:-4000}
STRATA_HTTP_PORT=${STRATA_HTTP_PORT:-8080}
STRATA_GRPC_PORT=${STRATA_GRPC_PORT:-20160}
MARIADB_BUFFER_POOL=${MARIADB_BUFFER_POOL:-4G}
STRATA_CACHE=${STRATA_CACHE:-$MARIADB_BUFFER_POOL}
KEEP_WORK=${KEEP_WORK:-0}
RESULTS_DIR=${RESULTS_DIR:-$REPO_ROOT/bench/results}
STRATA_BIN=${STRATA_BIN:-$REPO_ROOT/bin/strata}
SKIP_BUILD=${SKIP_BUILD:-0}
NOTE=${NOTE:-}
SETTLE_TIMEOUT=${SETTLE_TIMEOUT:-600}
bench_setup olap

ensure_debian_packages mariadbd mariadb sysbench -- mariadb-server mariadb-client sysbench
bench_build
COMMIT=$(git -C "$REPO_ROOT" rev-parse --short HEAD)

start_mariadb "$WORK_DIR/mariadb" "$MARIADB_PORT" "$MARIADB_BUFFER_POOL"
start_strata "$STRATA_BIN" "$WORK_DIR/strata" "$STRATA_PORT" "$STRATA_HTTP_PORT" "$STRATA_GRPC_PORT"

declare -A PORT_OF=([mariadb]=$MARIADB_PORT [strata]=$STRATA_PORT)
TARGETS="mariadb strata"


sql() { # <server> <database or ""> <query>: runs a query, rows to stdout
	local db=()
	[[ -n $2 ]] && db=("$2")
	mariadb --protocol=tcp -h 127.0.0.1 -P "${PORT_OF[$1]}" -u root -N -B "${db[@]}" -e "$3"
}

# order <repeat>: the servers in the order of that repeat.
order() { if (($1 % 2)); then echo "mariadb strata"; else echo "strata mariadb"; fi; }

# median of the numbers on stdin.
median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "-"; else print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# settle_strata waits until Strata's KV engine has run no compaction for 10 s.
settle_strata() {
	local started=$SECONDS quiet=0 last= metrics running total
	while ((SECONDS - started < SETTLE_TIMEOUT)); do
		metrics=$(curl -fsS "http://127.0.0.1:$STRATA_HTTP_PORT/metrics" 2>/dev/null) || metrics=
		running=$(awk '$1 == "strata_storage_compactions_running" {print $2}' <<<"$metrics")
		total=$(awk '$1 == "strata_storage_compactions_total" {print $2}' <<<"$metrics")
		if [[ -n $total && $running == 0 && $total == "$last" ]]; then
			quiet=$((quiet + 2))
		else
			quiet=0
		fi
		last=$total
		if ((quiet >= 10)); then
			log "strata: compactions settled after $((SECONDS - started))s"
			return
		fi
		sleep 2
	done
	log "strata: compactions still running after ${SETTLE_TIMEOUT}s; measuring anyway"
}

RAW=$WORK_DIR/timings.tsv # part, size, query, server, repeat, seconds
: >"$RAW"
REPORT_PARTS=()

# ---------- 1. sysbench's sbtest1 ----------
SB_QUERIES=(
	"SELECT COUNT(*) FROM sbtest1"
	"SELECT k % 100 g, COUNT(*), SUM(LENGTH(c)) FROM sbtest1 GROUP BY g ORDER BY g"
	"SELECT SUBSTRING(pad,1,2) p, COUNT(*), AVG(k) FROM sbtest1 GROUP BY p ORDER BY 2 DESC LIMIT 5"
)
for rows in $ROWS; do
	for server in $TARGETS; do
		log "$server: preparing sbtest1 with $rows rows"
		sql "$server" "" 'DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest'
		started=$SECONDS
		if ! bg sysbench oltp_common --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="${PORT_OF[$server]}" \
			--mysql-user=root --mysql-password= --mysql-db=sbtest --tables=1 --table-size="$rows" \
			--threads=1 prepare >"$WORK_DIR/prepare-$server-$rows.log" 2>&1; then
			tail -n 20 "$WORK_DIR/prepare-$server-$rows.log" >&2
			log "$server: prepare failed"
			exit 1
		fi
		log "$server: prepared in $((SECONDS - started))s"
	done
	settle_strata
	for ((i = 0; i < ${#SB_QUERIES[@]}; i++)); do
		q=${SB_QUERIES[$i]}
		for server in $TARGETS; do # warm-up
			sql "$server" sbtest "$q" >/dev/null
		done
		for ((r = 1; r <= REPEATS; r++)); do
			for server in $(order "$r"); do
				t0=$(date +%s.%N)
				sql "$server" sbtest "$q" >/dev/null
				t1=$(date +%s.%N)
				printf 'sbtest\t%s\t%d\t%s\t%d\t%s\n' "$rows" "$((i + 1))" "$server" "$r" \
					"$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')" >>"$RAW"
			done
		done
		log "sbtest1 $rows rows, query $((i + 1)) timed"
	done
	for server in $TARGETS; do sql "$server" "" 'DROP DATABASE sbtest'; done
done

sbtest_table() {
	echo "sysbench sbtest1, $REPEATS runs each, seconds (median, every run):"
	echo
	echo "| rows | query | MariaDB | Strata | Strata/MariaDB | MariaDB runs | Strata runs |"
	echo "|---:|---|---:|---:|---:|---|---|"
	for rows in $ROWS; do
		for ((i = 0; i < ${#SB_QUERIES[@]}; i++)); do
			local q=$((i + 1)) m s
			m=$(awk -F'\t' -v n="$rows" -v q="$q" '$1 == "sbtest" && $2 == n && $3 == q && $4 == "mariadb" {print $6}' "$RAW" | median)
			s=$(awk -F'\t' -v n="$rows" -v q="$q" '$1 == "sbtest" && $2 == n && $3 == q && $4 == "strata" {print $6}' "$RAW" | median)
			echo "| $rows | \`${SB_QUERIES[$i]}\` | $m | $s | $(awk -v s="$s" -v m="$m" 'BEGIN {if (m > 0) printf "%.2f", s / m; else print "-"}') |" \
				"$(awk -F'\t' -v n="$rows" -v q="$q" '$1 == "sbtest" && $2 == n && $3 == q && $4 == "mariadb" {printf "%s ", $6}' "$RAW")|" \
				"$(awk -F'\t' -v n="$rows" -v q="$q" '$1 == "sbtest" && $2 == n && $3 == q && $4 == "strata" {printf "%s ", $6}' "$RAW")|"
		done
	done
}
[[ -n $ROWS ]] && REPORT_PARTS+=("$(sbtest_table)")

# ---------- 2. TPC-H ----------
declare -A CHECK=()
if [[ $SCALE != 0 ]]; then
	for server in $TARGETS; do
		log "$server: loading TPC-H scale factor $SCALE"
		started=$SECONDS
		bg "$STRATA_BIN" workload init tpch --scale-factor "$SCALE" --addr "127.0.0.1:${PORT_OF[$server]}" \
			--drop --threads "$LOAD_THREADS"
		printf 'load\t%s\t0\t%s\t0\t%d\n' "$SCALE" "$server" "$((SECONDS - started))" >>"$RAW"
	done
	settle_strata
	# The query numbers of QUERIES.
	mapfile -t QLIST < <(tr ',' '\n' <<<"$QUERIES" | awk -F- '{hi = ($2 == "") ? $1 : $2; for (q = $1; q <= hi; q++) print q}')
	tpch_run() { # <server> <query> <repeat>: times one query, appends to RAW
		local out secs
		out=$(bg "$STRATA_BIN" workload run tpch --scale-factor "$SCALE" --addr "127.0.0.1:${PORT_OF[$1]}" \
			--queries "$2" --query-timeout "$QUERY_TIMEOUT" 2>&1) || true
		secs=$(grep -o '^_query q=[0-9]* seconds=[0-9.]*' <<<"$out" | sed 's/.*seconds=//')
		if grep -q '^_query .* error=' <<<"$out"; then
			log "$1 Q$2: $(grep '^_query' <<<"$out" | sed 's/.*error=//')"
			secs="error"
		fi
		printf 'tpch\t%s\t%d\t%s\t%d\t%s\n' "$SCALE" "$2" "$1" "$3" "${secs:-error}" >>"$RAW"
		log "TPC-H Q$2 on $1 (repeat $3): ${secs:-error}"
	}
	for q in "${QLIST[@]}"; do
		if ((WARMUP)); then
			for server in $TARGETS; do tpch_run "$server" "$q" 0; done
		fi
		for ((r = 1; r <= REPEATS; r++)); do
			for server in $(order "$r"); do tpch_run "$server" "$q" "$r"; done
		done
	done
	log "comparing answers"
	check_out=$(bg "$STRATA_BIN" workload check tpch --scale-factor "$SCALE" --addr "127.0.0.1:$STRATA_PORT" \
		--against "127.0.0.1:$MARIADB_PORT" --queries "$QUERIES" --query-timeout "$QUERY_TIMEOUT" 2>&1) || true
	echo "$check_out" >"$WORK_DIR/check.txt"
	sed 's/^/[check] /' <<<"$check_out" >&2
	for q in "${QLIST[@]}"; do
		line=$(grep "^Q$q = answer of " <<<"$check_out" || true)
		case $line in
		*" ok") CHECK[$q]="same" ;;
		*FAILED*) CHECK[$q]="DIFFERENT: ${line#*FAILED: }" ;;
		*) CHECK[$q]="not compared" ;;
		esac
	done
	generator_checks=$(grep -c ' ok$' <<<"$(grep -v ' = answer of ' <<<"$check_out")" || true)
	generator_failed=$(grep -v ' = answer of ' <<<"$check_out" | grep -c 'FAILED' || true)

	tpch_table() {
		echo "TPC-H scale factor $SCALE, $REPEATS runs each (warm-up run first: $WARMUP), seconds (median, every run);" \
			"load: MariaDB $(awk -F'\t' '$1 == "load" && $4 == "mariadb" {print $6}' "$RAW") s, Strata $(awk -F'\t' '$1 == "load" && $4 == "strata" {print $6}' "$RAW") s;" \
			"checks against the generator on Strata: $generator_checks ok, $generator_failed failed"
		echo
		echo "| query | MariaDB | Strata | Strata/MariaDB | MariaDB runs | Strata runs | answer vs MariaDB |"
		echo "|---|---:|---:|---:|---|---|---|"
		local q m s
		for q in "${QLIST[@]}"; do
			m=$(awk -F'\t' -v q="$q" '$1 == "tpch" && $3 == q && $4 == "mariadb" && $5 > 0 && $6 != "error" {print $6}' "$RAW" | median)
			s=$(awk -F'\t' -v q="$q" '$1 == "tpch" && $3 == q && $4 == "strata" && $5 > 0 && $6 != "error" {print $6}' "$RAW" | median)
			echo "| Q$q | $m | $s | $(awk -v s="$s" -v m="$m" 'BEGIN {if (m > 0 && s != "-") printf "%.2f", s / m; else print "-"}') |" \
				"$(awk -F'\t' -v q="$q" '$1 == "tpch" && $3 == q && $4 == "mariadb" && $5 > 0 {printf "%s ", $6}' "$RAW")|" \
				"$(awk -F'\t' -v q="$q" '$1 == "tpch" && $3 == q && $4 == "strata" && $5 > 0 {printf "%s ", $6}' "$RAW")|" \
				"${CHECK[$q]} |"
		done
	}
	REPORT_PARTS+=("$(tpch_table)")
fi

REPORT=$(
	echo "Analytics (olap.sh), Strata vs MariaDB $(mariadbd --version | grep -o '[0-9]*\.[0-9]*\.[0-9]*-MariaDB' | head -1); commit $COMMIT; $(date -u +%Y-%m-%d); $(nproc) cores; MariaDB buffer pool $MARIADB_BUFFER_POOL, Strata --cache $STRATA_CACHE"
	[[ -n $NOTE ]] && echo && echo "$NOTE"
	for part in "${REPORT_PARTS[@]}"; do
		echo
		echo "$part"
	done
)
echo
echo "$REPORT"
mkdir -p "$RESULTS_DIR"
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
echo "$REPORT" >"$RESULTS_DIR/$stamp-olap.md"
cp "$RAW" "$RESULTS_DIR/$stamp-olap.tsv"
log "wrote $RESULTS_DIR/$stamp-olap.md"
