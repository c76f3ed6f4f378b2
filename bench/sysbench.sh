#!/usr/bin/env bash
# bench/sysbench.sh: sysbench OLTP comparison of Strata against MariaDB on this machine.
#
# It starts both servers itself (each as a child process with its own data directory
# under WORK_DIR), prepares identical sbtest tables in both, runs every workload
# against each server in alternation, and prints a markdown table of medians that is
# also written to bench/results/<UTC date-time>.md together with the raw per-run TSV.
#
# Settings (environment variable, or the same name as a flag: --table-size=1000):
#   TABLES=4  TABLE_SIZE=100000  TIME=30  REPEATS=3  THREADS="8" (space-separated list)
#   WORKLOADS="oltp_point_select oltp_read_only oltp_read_write oltp_update_index
#              oltp_update_non_index oltp_delete oltp_insert"
#   TARGETS="mariadb strata"   (either alone is allowed, e.g. TARGETS=mariadb)
#   MARIADB_PORT=3307  STRATA_PORT=4000  STRATA_HTTP_PORT=8080  STRATA_GRPC_PORT=20160
#   MARIADB_BUFFER_POOL=1G  WORK_DIR=<mktemp -d>  KEEP_WORK=0  RESULTS_DIR=bench/results
#   STRATA_BIN=bin/strata (built from ./cmd/strata unless SKIP_BUILD=1)
#   NOTE="free text"           (added to the report, e.g. what else ran on the machine)
#
# Method, and why:
#   - sysbench defaults otherwise: server-side prepared statements (db-ps-mode=auto),
#     the default random distribution, default ignored errors (deadlock, lock wait).
#   - Alternation: repeat r runs MariaDB then Strata when r is odd and Strata then
#     MariaDB when r is even, so drift over time (page cache, thermal) hits both.
#   - Data comparability: oltp_delete deletes rows without re-inserting them and
#     oltp_insert appends rows, each at its server's own rate, so after either one the
#     two servers hold different data. The script therefore re-prepares a server's
#     tables (drop, create, load, index; not timed) before any run that follows a run
#     of those two on that server, and the default order puts them last, so the other
#     workloads share one preparation and every timed run starts from TABLES x
#     TABLE_SIZE rows. oltp_read_write deletes and re-inserts the same ids and the
#     update workloads change values only, so they leave the row set as it was.
#   - Latency: p95 and p99 are computed from the run's sysbench --histogram output;
#     see bench/sysbench_run.awk. Medians are taken over the REPEATS runs.
#   - Memory: VmRSS of each server's PID is sampled every second while sysbench runs
#     against it; the table shows the peak, in MiB.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

usage() { bench_usage "${BASH_SOURCE[0]}" "${1:-0}"; }

# Flags mirror the environment variables: --table-size=5 sets TABLE_SIZE=5.
parse_flags "TABLES TABLE_SIZE TIME REPEATS THREADS WORKLOADS TARGETS MARIADB_PORT STRATA_PORT STRATA_HTTP_PORT STRATA_GRPC_PORT MARIADB_BUFFER_POOL WORK_DIR KEEP_WORK RESULTS_DIR STRATA_BIN SKIP_BUILD NOTE" "$@"

TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-100000}
TIME=${TIME:-30}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-8}
WORKLOADS=${WORKLOADS:-oltp_point_select oltp_read_only oltp_read_write oltp_update_index oltp_update_non_index oltp_delete oltp_insert}
TARGETS=${TARGETS:-mariadb strata}
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

for n in TABLES TABLE_SIZE TIME REPEATS; do
	if ! [[ ${!n} =~ ^[1-9][0-9]*$ ]]; then
		echo "$n must be a positive integer, got '${!n}'" >&2
		exit 2
	fi
done
for t in $THREADS; do
	[[ $t =~ ^[1-9][0-9]*$ ]] || {
		echo "THREADS must list positive integers, got '$THREADS'" >&2
		exit 2
	}
done
for target in $TARGETS; do
	[[ $target == mariadb || $target == strata ]] || {
		echo "TARGETS may name mariadb and strata, got '$target'" >&2
		exit 2
	}
done
read -r -a workload_list <<<"$WORKLOADS"

# Workloads after which a server's tables no longer hold TABLES x TABLE_SIZE rows.
changes_row_set() { [[ $1 == oltp_delete || $1 == oltp_insert ]]; }

has_target() { [[ " $TARGETS " == *" $1 "* ]]; }

MARIADB_PID=
STRATA_PID=
SAMPLER_PID=
SYSBENCH_PID=
OWN_WORK_DIR=0
if [[ -z ${WORK_DIR:-} ]]; then
	WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/strata-sysbench.XXXXXX")
	OWN_WORK_DIR=1
fi
mkdir -p "$WORK_DIR"

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local child
	for child in $SYSBENCH_PID $SAMPLER_PID; do
		kill "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	done
	stop_pid "$STRATA_PID" 30
	stop_pid "$MARIADB_PID" 60
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

ensure_debian_packages sysbench mariadb -- sysbench mariadb-client
if has_target mariadb; then
	ensure_debian_packages mariadbd mariadb-install-db -- mariadb-server
fi

declare -A PORT_OF=([mariadb]=$MARIADB_PORT [strata]=$STRATA_PORT)

if has_target strata; then
	if [[ $SKIP_BUILD != 1 ]]; then
		log "building $STRATA_BIN"
		(cd "$REPO_ROOT" && go build -o "$STRATA_BIN" ./cmd/strata)
	fi
	start_strata "$STRATA_BIN" "$WORK_DIR/strata" "$STRATA_PORT" "$STRATA_HTTP_PORT" "$STRATA_GRPC_PORT"
fi
if has_target mariadb; then
	start_mariadb "$WORK_DIR/mariadb" "$MARIADB_PORT" "$MARIADB_BUFFER_POOL"
fi

pid_of() {
	case $1 in
	mariadb) echo "$MARIADB_PID" ;;
	strata) echo "$STRATA_PID" ;;
	esac
}

# sysbench_cmd runs sysbench in the background and waits for it, so that a
# signal to this script is handled at once (bash runs traps only between
# foreground commands) and cleanup can stop sysbench too.
sysbench_cmd() { # <server> <workload> <threads> <command> [extra args]
	local server=$1 workload=$2 threads=$3 cmd=$4
	shift 4
	sysbench "$workload" --db-driver=mysql --mysql-host=127.0.0.1 \
		--mysql-port="${PORT_OF[$server]}" --mysql-user=root --mysql-password= \
		--mysql-db=sbtest --tables="$TABLES" --table-size="$TABLE_SIZE" \
		--threads="$threads" "$@" "$cmd" &
	SYSBENCH_PID=$!
	local rc=0
	wait "$SYSBENCH_PID" || rc=$?
	SYSBENCH_PID=
	return "$rc"
}

prepare_threads=$((TABLES < 4 ? TABLES : 4))
declare -A TABLES_DIRTY=()
prepare_tables() { # <server>
	local server=$1 started=$SECONDS
	mariadb --protocol=tcp -h 127.0.0.1 -P "${PORT_OF[$server]}" -u root \
		-e 'DROP DATABASE IF EXISTS sbtest; CREATE DATABASE sbtest'
	if ! sysbench_cmd "$server" oltp_common "$prepare_threads" prepare \
		>"$WORK_DIR/prepare-$server.log" 2>&1; then
		tail -n 20 "$WORK_DIR/prepare-$server.log" >&2
		log "$server: prepare failed"
		exit 1
	fi
	TABLES_DIRTY[$server]=0
	log "$server: prepared $TABLES tables of $TABLE_SIZE rows in $((SECONDS - started))s"
}
for server in $TARGETS; do
	prepare_tables "$server"
done

# sample_rss <pid> <file>: appends VmRSS (KiB) of pid once a second until killed.
sample_rss() {
	local pid=$1 out=$2 kib
	while true; do
		kib=$(rss_kib "$pid")
		[[ -n $kib ]] && echo "$kib" >>"$out"
		sleep 1
	done
}

RAW="$WORK_DIR/runs.tsv"
printf 'server\tworkload\tthreads\trepeat\tqps\ttps\tp95_ms\tp99_ms\treported_p99_ms\terrors\tevents\tpeak_rss_kib\n' >"$RAW"

run_one() { # <server> <workload> <threads> <repeat>
	local server=$1 workload=$2 threads=$3 rep=$4
	local out="$WORK_DIR/run-$workload-$threads-$rep-$server.log"
	local rss="$WORK_DIR/rss-$workload-$threads-$rep-$server.txt" line peak
	: >"$rss"
	sample_rss "$(pid_of "$server")" "$rss" &
	SAMPLER_PID=$!
	local rc=0
	sysbench_cmd "$server" "$workload" "$threads" run --time="$TIME" --events=0 \
		--percentile=99 --histogram=on >"$out" 2>&1 || rc=$?
	kill "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" 2>/dev/null || true
	SAMPLER_PID=
	peak=$(sort -n "$rss" | tail -n 1)
	if ((rc != 0)) || ! line=$(awk -f "$REPO_ROOT/bench/sysbench_run.awk" "$out"); then
		log "$server $workload threads=$threads repeat=$rep FAILED (exit $rc); tail of $out:"
		tail -n 5 "$out" >&2
		printf '%s\t%s\t%s\t%s\tFAIL\tFAIL\tFAIL\tFAIL\tFAIL\tFAIL\tFAIL\t%s\n' \
			"$server" "$workload" "$threads" "$rep" "${peak:-0}" >>"$RAW"
		return 0
	fi
	local p99 reported
	p99=$(cut -f4 <<<"$line")
	reported=$(cut -f5 <<<"$line")
	# sysbench's own p99 covers a subset of the events and is never above the
	# histogram's (see bench/sysbench_run.awk); above it means a parsing error.
	if ! awk -v a="$p99" -v b="$reported" 'BEGIN { exit !(b <= a + 0.0051) }'; then
		log "warning: histogram p99 $p99 ms is below sysbench's reported $reported ms: parsing error?"
	fi
	log "$server $workload threads=$threads repeat=$rep: $(cut -f1,2,3,4 <<<"$line" | awk -F'\t' '{printf "qps=%s tps=%s p95=%sms p99=%sms", $1, $2, $3, $4}') rss=$((${peak:-0} / 1024))MiB"
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$server" "$workload" "$threads" "$rep" "$line" "${peak:-0}" >>"$RAW"
}

server_log() {
	case $1 in
	mariadb) echo "$WORK_DIR/mariadb/error.log" ;;
	strata) echo "$WORK_DIR/strata/strata.log" ;;
	esac
}

# A server that exits mid-benchmark ends the benchmark: the report is still
# written, for the runs done so far, and says so; the script then exits 1.
SERVER_LOST=
for workload in "${workload_list[@]}"; do
	for threads in $THREADS; do
		for ((rep = 1; rep <= REPEATS; rep++)); do
			order=$TARGETS
			if ((rep % 2 == 0)); then
				order=$(tr ' ' '\n' <<<"$TARGETS" | tac | tr '\n' ' ')
			fi
			for server in $order; do
				if [[ ${TABLES_DIRTY[$server]} == 1 ]]; then
					prepare_tables "$server"
				fi
				run_one "$server" "$workload" "$threads" "$rep"
				if ! kill -0 "$(pid_of "$server")" 2>/dev/null; then
					SERVER_LOST="$server exited during $workload threads=$threads repeat=$rep"
					log "$SERVER_LOST; last lines of $(server_log "$server"):"
					tail -n 20 "$(server_log "$server")" >&2 || true
					break 4
				fi
				if changes_row_set "$workload"; then
					TABLES_DIRTY[$server]=1
				fi
			done
		done
	done
done

# Summary: medians over repeats per (workload, threads, server); FAIL runs are
# excluded from medians and counted in the "failed" column.
summarize() {
	awk -F'\t' -v targets="$TARGETS" '
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
	function fmt(v, d) { return v == "" ? "-" : sprintf("%." d "f", v) }
	NR == 1 { next }
	{
		key = $2 SUBSEP $3
		if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key }
		k = key SUBSEP $1
		if ($5 == "FAIL") { failed[k]++; }
		else {
			qps[k] = qps[k] " " $5; tps[k] = tps[k] " " $6
			p95[k] = p95[k] " " $7; p99[k] = p99[k] " " $8
			errs[k] += $10
		}
		if ($12 + 0 > rss[k] + 0) rss[k] = $12
	}
	END {
		ns = split(targets, srv, " ")
		hdr = "| workload | threads |"
		sep = "|---|---:|"
		for (s = 1; s <= ns; s++) {
			hdr = hdr sprintf(" %s QPS | %s TPS | %s p95 ms | %s p99 ms | %s peak RSS MiB | %s errors/failed runs |", srv[s], srv[s], srv[s], srv[s], srv[s], srv[s])
			sep = sep "---:|---:|---:|---:|---:|---:|"
		}
		both = (ns == 2 && srv[1] != srv[2])
		if (both) { hdr = hdr " TPS ratio strata/mariadb |"; sep = sep "---:|" }
		print hdr; print sep
		for (i = 1; i <= nkeys; i++) {
			split(order[i], kk, SUBSEP)
			row = "| " kk[1] " | " kk[2] " |"
			for (s = 1; s <= ns; s++) {
				k = order[i] SUBSEP srv[s]
				mt[srv[s]] = median(tps[k])
				row = row sprintf(" %s | %s | %s | %s | %s | %d/%d |", fmt(median(qps[k]), 0), fmt(mt[srv[s]], 0), fmt(median(p95[k]), 2), fmt(median(p99[k]), 2), fmt(rss[k] / 1024, 0), errs[k], failed[k])
			}
			if (both) {
				ratio = (mt["mariadb"] != "" && mt["strata"] != "" && mt["mariadb"] > 0) ? sprintf("%.2f", mt["strata"] / mt["mariadb"]) : "-"
				row = row " " ratio " |"
			}
			print row
		}
	}' "$RAW"
}

version_of() {
	case $1 in
	mariadb) mariadb --protocol=tcp -h 127.0.0.1 -P "$MARIADB_PORT" -u root -N -e 'SELECT VERSION()' 2>/dev/null || echo unknown ;;
	strata)
		local v
		v=$("$STRATA_BIN" version 2>/dev/null || echo "$STRATA_BIN (version unknown)")
		if [[ $SKIP_BUILD != 1 ]]; then
			v="$v, built by this run from $(cd "$REPO_ROOT" && git describe --always --dirty 2>/dev/null || echo "an unknown tree")"
		fi
		echo "$v"
		;;
	esac
}

stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
mkdir -p "$RESULTS_DIR"
report="$RESULTS_DIR/$stamp.md"
{
	echo "# sysbench: ${TARGETS// / vs }, $stamp"
	echo
	echo "- machine: $(nproc) CPUs, $(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr)"
	echo "- $(sysbench --version)"
	for server in $TARGETS; do
		echo "- $server: $(version_of "$server")"
	done
	echo "- tables=$TABLES table_size=$TABLE_SIZE time=${TIME}s repeats=$REPEATS threads=\"$THREADS\""
	echo "- MariaDB: innodb_flush_log_at_trx_commit=1, no binlog, buffer pool $MARIADB_BUFFER_POOL"
	echo "- medians over repeats; p95/p99 from sysbench's latency histogram; peak RSS = max VmRSS sampled each second during the runs; tables re-prepared before any run that follows oltp_delete or oltp_insert on the same server"
	echo "- errors: transactions sysbench rolled back and retried on its default ignored errors (1213 deadlock, 1205 lock wait timeout, 1020 record changed), summed over the repeats; failed runs: runs that aborted"
	if [[ -n $NOTE ]]; then
		echo "- note: $NOTE"
	fi
	if [[ -n $SERVER_LOST ]]; then
		echo "- **ABORTED: $SERVER_LOST**; the table covers the runs before it"
	fi
	echo
	summarize
} >"$report"
cp "$RAW" "${report%.md}.tsv"
cat "$report"
log "report written to $report (raw runs: ${report%.md}.tsv)"
[[ -z $SERVER_LOST ]] || exit 1
