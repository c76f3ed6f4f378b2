#!/usr/bin/env bash
# bench/ab.sh: A/B comparison of two Strata builds on the same sysbench tables.
#
# Usage: bench/ab.sh OLD NEW
#   OLD, NEW: a strata binary, or a git revision to build (e.g. HEAD~1, main)
#
# Settings (environment): WORKLOADS="oltp_update_index oltp_insert" PAIRS=3 THREADS=8
#   TIME=15 TABLES=4 TABLE_SIZE=100000 SETTLE=45 WORK_DIR=<mktemp -d> KEEP_WORK=0
#   PORT=4010 HTTP_PORT=8090 GRPC_PORT=20170
#
# Method, and why:
#   - The tables are prepared once, by OLD, then OLD runs idle for SETTLE seconds so its
#     flushes and compactions finish; that data directory is copied afresh for every run
#     of either build. Both builds therefore start from the same LSM shape. A build that
#     prepares its own tables gets a shape of its own, and that alone moved
#     oltp_update_index by 10-15% between two builds with the same write path (measured
#     2026-11-25). NEW must read the data directory OLD writes.
#   - Each copy is followed by sync, so its writeback does not land in the timed run.
#   - Within a pair the builds alternate (OLD then NEW); the summary is, per workload,
#     the median over pairs of NEW's TPS / OLD's TPS, with every pair's ratio listed.
#   - Never run two benchmarks at once on these machines.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

if (($# != 2)); then
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit 2
fi

WORKLOADS=${WORKLOADS:-"oltp_update_index oltp_insert"}
PAIRS=${PAIRS:-3}
THREADS=${THREADS:-8}
TIME=${TIME:-15}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-100000}
SETTLE=${SETTLE:-45}
PORT=${PORT:-4010}
HTTP_PORT=${HTTP_PORT:-8090}
GRPC_PORT=${GRPC_PORT:-20170}
KEEP_WORK=${KEEP_WORK:-0}
OWN_WORK_DIR=0
if [[ -z ${WORK_DIR:-} ]]; then
	WORK_DIR=$(mktemp -d -t strata-ab.XXXXXX)
	OWN_WORK_DIR=1
fi
STRATA_PID=

cleanup() {
	local rc=$?
	[[ -n $STRATA_PID ]] && stop_pid "$STRATA_PID" 30
	if ((OWN_WORK_DIR)) && [[ $KEEP_WORK != 1 ]]; then
		rm -rf "$WORK_DIR"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_debian_packages sysbench mariadb -- sysbench mariadb-client

# build_of prints the path of a binary for $1: the file itself, or a build of
# the git revision $1 (in a temporary worktree).
build_of() {
	local spec=$1 name=$2
	if [[ -f $spec ]]; then
		realpath "$spec"
		return
	fi
	local wt="$WORK_DIR/src-$name"
	git -C "$REPO_ROOT" worktree add --detach -q "$wt" "$spec" >&2
	(cd "$wt" && go build -o "$WORK_DIR/strata-$name" ./cmd/strata) >&2
	git -C "$REPO_ROOT" worktree remove --force "$wt" >&2
	echo "$WORK_DIR/strata-$name"
}

sb() {
	sysbench "$1" --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" \
		--mysql-user=root --mysql-password= --mysql-db=sbtest --tables="$TABLES" \
		--table-size="$TABLE_SIZE" --threads="$2" --time="$TIME" --report-interval=0 "${@:3}"
}

OLD=$(build_of "$1" old)
NEW=$(build_of "$2" new)
log "old: $OLD"
log "new: $NEW"

log "preparing $TABLES x $TABLE_SIZE rows with the old build"
start_strata "$OLD" "$WORK_DIR/pristine" "$PORT" "$HTTP_PORT" "$GRPC_PORT"
mysql -h 127.0.0.1 -P "$PORT" -u root -e 'CREATE DATABASE sbtest'
sb oltp_read_write 4 prepare >/dev/null
log "letting it settle for ${SETTLE}s"
sleep "$SETTLE"
stop_pid "$STRATA_PID" 60
STRATA_PID=

declare -A TPS
for ((p = 1; p <= PAIRS; p++)); do
	for w in $WORKLOADS; do
		for side in old new; do
			bin=$OLD
			[[ $side == new ]] && bin=$NEW
			rm -rf "$WORK_DIR/run"
			mkdir -p "$WORK_DIR/run"
			cp -a "$WORK_DIR/pristine/data" "$WORK_DIR/run/data"
			sync
			start_strata "$bin" "$WORK_DIR/run" "$PORT" "$HTTP_PORT" "$GRPC_PORT"
			out=$(sb "$w" "$THREADS" run)
			stop_pid "$STRATA_PID" 60
			STRATA_PID=
			tps=$(awk '/transactions:/ {gsub(/[()]/, "", $3); print $3}' <<<"$out")
			p95=$(awk '/95th percentile:/ {print $3}' <<<"$out")
			TPS[$w,$side,$p]=$tps
			printf '%d\t%s\t%s\t%s TPS\tp95 %s ms\n' "$p" "$w" "$side" "$tps" "$p95"
		done
	done
done

echo
printf '| workload | new/old per pair | median |\n|---|---|---:|\n'
for w in $WORKLOADS; do
	ratios=()
	for ((p = 1; p <= PAIRS; p++)); do
		ratios+=("$(awk -v a="${TPS[$w,new,$p]}" -v b="${TPS[$w,old,$p]}" 'BEGIN {printf "%.3f", a / b}')")
	done
	median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
	printf '| %s | %s | %s |\n' "$w" "${ratios[*]}" "$median"
done
