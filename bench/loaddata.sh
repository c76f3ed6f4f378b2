#!/usr/bin/env bash
# bench/loaddata.sh: bulk-load speed, rows/s, of LOAD DATA LOCAL INFILE against
# multi-row INSERT batches, on Strata and MariaDB side by side.
#
# Usage: flock /tmp/strata-bench.lock bash bench/loaddata.sh
#
# Settings (environment): ROWS=200000 BATCH=1000 (rows per INSERT statement)
#   WORK_DIR=<mktemp -d> KEEP_WORK=0 STRATA_BIN (default: build cmd/strata)
#   STRATA_PORT=4320 MARIADB_PORT=3326 SERVERS="strata mariadb"
#
# The table is sysbench's (id, k, c CHAR(120), pad CHAR(60), a secondary index
# on k); the file is tab-separated. Each load goes into an empty table through
# the mariadb client (--local-infile=1 for LOAD DATA; a file of INSERT
# statements, one transaction per statement, for the batches). Prints one
# line per server and method: rows, seconds, rows/s.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

ROWS=${ROWS:-200000}
BATCH=${BATCH:-1000}
SERVERS=${SERVERS:-"strata mariadb"}
STRATA_PORT=${STRATA_PORT:-4320}
MARIADB_PORT=${MARIADB_PORT:-3326}
KEEP_WORK=${KEEP_WORK:-0}
OWN_WORK_DIR=0
if [[ -z ${WORK_DIR:-} ]]; then
	WORK_DIR=$(mktemp -d -t strata-load.XXXXXX)
	OWN_WORK_DIR=1
fi
STRATA_PID=
MARIADB_PID=
cleanup() {
	local rc=$?
	[[ -n $STRATA_PID ]] && stop_pid "$STRATA_PID" 30
	[[ -n $MARIADB_PID ]] && stop_pid "$MARIADB_PID" 30
	if ((OWN_WORK_DIR)) && [[ $KEEP_WORK != 1 ]]; then
		rm -rf "$WORK_DIR"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_debian_packages mariadbd mariadb -- mariadb-server mariadb-client

log "writing $ROWS rows"
awk -v n="$ROWS" -v b="$BATCH" -v tsv="$WORK_DIR/rows.tsv" -v sqlf="$WORK_DIR/rows.sql" 'BEGIN {
	srand(1)
	for (i = 1; i <= n; i++) {
		c = ""; for (j = 0; j < 10; j++) c = c sprintf("%011d-", int(rand() * 1e11))
		pad = ""; for (j = 0; j < 5; j++) pad = pad sprintf("%011d-", int(rand() * 1e11))
		k = int(rand() * n)
		print i "\t" k "\t" c "\t" pad > tsv
		if ((i - 1) % b == 0) { if (i > 1) print ";" > sqlf; printf "INSERT INTO t VALUES " > sqlf } else printf "," > sqlf
		printf "(%d,%d,\x27%s\x27,\x27%s\x27)", i, k, c, pad > sqlf
	}
	print ";" > sqlf
}'

sql() { mariadb --protocol=tcp -h 127.0.0.1 -P "$PORT" -u root "$@"; }

run() {
	local server=$1 method=$2 start end
	sql -e "DROP DATABASE IF EXISTS ld; CREATE DATABASE ld; CREATE TABLE ld.t (id INT NOT NULL, k INT NOT NULL DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id), KEY k_1 (k))"
	start=$(date +%s.%N)
	case $method in
	load) sql --local-infile=1 ld -e "LOAD DATA LOCAL INFILE '$WORK_DIR/rows.tsv' INTO TABLE t" ;;
	insert) sql ld <"$WORK_DIR/rows.sql" ;;
	esac
	end=$(date +%s.%N)
	local got
	got=$(sql -N -e "SELECT COUNT(*) FROM ld.t")
	awk -v s="$server" -v m="$method" -v r="$got" -v a="$start" -v e="$end" \
		'BEGIN { printf "%-8s %-22s rows=%d seconds=%.2f rows/s=%.0f\n", s, m, r, e - a, r / (e - a) }'
}

for server in $SERVERS; do
	case $server in
	strata)
		bin=${STRATA_BIN:-}
		if [[ -z $bin ]]; then
			(cd "$REPO_ROOT" && go build -o "$WORK_DIR/strata" ./cmd/strata)
			bin=$WORK_DIR/strata
		fi
		start_strata "$bin" "$WORK_DIR/strata" "$STRATA_PORT" $((STRATA_PORT + 4000)) $((STRATA_PORT + 16000))
		PORT=$STRATA_PORT
		;;
	mariadb)
		start_mariadb "$WORK_DIR/mariadb" "$MARIADB_PORT" 1G
		PORT=$MARIADB_PORT
		;;
	esac
	run "$server" load
	run "$server" insert
	case $server in
	strata) stop_pid "$STRATA_PID" 30 && STRATA_PID= ;;
	mariadb) stop_pid "$MARIADB_PID" 30 && MARIADB_PID= ;;
	esac
done
