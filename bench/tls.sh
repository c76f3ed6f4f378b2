#!/usr/bin/env bash
# bench/tls.sh: sysbench oltp_point_select against one Strata node over plaintext and
# over TLS (sysbench --mysql-ssl=on; the node runs with certificates from `strata cert`,
# which sysbench 1.0 reads as cacert.pem, client-cert.pem and client-key.pem from its
# working directory), alternating,
# and optionally against a second binary over plaintext (BASE_BIN, e.g. a build of main,
# to see that the privilege checks cost the plaintext path nothing).
#
# Settings (environment): TABLES=4 TABLE_SIZE=100000 TIME=20 REPEATS=2 THREADS=8
#   STRATA_BIN=bin/strata (built unless SKIP_BUILD=1)  BASE_BIN=  PORT=4400
# Run it under the benchmark lock: flock /tmp/strata-bench.lock bash bench/tls.sh
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TABLES=${TABLES:-4} TABLE_SIZE=${TABLE_SIZE:-100000} TIME=${TIME:-20} REPEATS=${REPEATS:-2} THREADS=${THREADS:-8}
PORT=${PORT:-4400} STRATA_BIN=${STRATA_BIN:-$REPO_ROOT/bin/strata} BASE_BIN=${BASE_BIN:-}
if [[ ${SKIP_BUILD:-0} != 1 ]]; then (cd "$REPO_ROOT" && go build -o "$STRATA_BIN" ./cmd/strata); fi
WORK=$(mktemp -d)
pid=
stop() { if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap 'stop; rm -rf "$WORK"' EXIT
start() { # binary data-dir [args...]
	local bin=$1 dir=$2
	shift 2
	"$bin" start --data-dir "$dir" --sql-addr 127.0.0.1:$PORT --resp-addr "" --http-addr 127.0.0.1:$((PORT + 1)) \
		--grpc-addr 127.0.0.1:$((PORT + 2)) --replicas 1 "$@" >"$WORK/log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do mysql -h127.0.0.1 -P$PORT -uroot -e 'SELECT 1' >/dev/null 2>&1 && return; sleep 0.2; done
	echo "node did not start" >&2; cat "$WORK/log" >&2; exit 1
}
sb() { # extra args...
	sysbench oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$PORT --mysql-user=root \
		--mysql-db=sbtest --tables=$TABLES --table-size=$TABLE_SIZE --threads=$THREADS "$@"
}
run() { # label binary data-dir ssl [start args...]
	stop; start "$2" "$3" "${@:5}"
	sb --time=3 --mysql-ssl="$4" run >/dev/null # warm the version cache and the connections
	local out; out=$(sb --time=$TIME --mysql-ssl="$4" run)
	printf '%s\t%s\t%s\n' "$1" "$(awk '/queries:/ {gsub(/[(]/,"",$3); print $3}' <<<"$out")" \
		"$(awk '/avg:/ {print $2} /95th percentile:/ {print $3}' <<<"$out" | paste -sd' ')"
}
prepare() { # binary data-dir [start args...]
	start "$@"
	mysql -h127.0.0.1 -P$PORT -uroot -e 'CREATE DATABASE sbtest'
	sb prepare >/dev/null
	stop
}
"$STRATA_BIN" cert create-ca --ca-key-dir "$WORK/ca" >/dev/null
"$STRATA_BIN" cert create-node --ca-key-dir "$WORK/ca" --certs-dir "$WORK/certs" 127.0.0.1 >/dev/null
"$STRATA_BIN" cert create-client --ca-key-dir "$WORK/ca" --certs-dir "$WORK/certs" root >/dev/null
ln -s "$WORK/certs/ca.crt" "$WORK/cacert.pem"
ln -s "$WORK/certs/client.root.crt" "$WORK/client-cert.pem"
ln -s "$WORK/certs/client.root.key" "$WORK/client-key.pem"
cd "$WORK"
CERTS=(--certs-dir "$WORK/certs")
prepare "$STRATA_BIN" "$WORK/new" "${CERTS[@]}"
[[ -n $BASE_BIN ]] && prepare "$BASE_BIN" "$WORK/base"
echo -e "run\tqps\tavg_ms p95_ms"
for r in $(seq "$REPEATS"); do
	run plaintext "$STRATA_BIN" "$WORK/new" off "${CERTS[@]}"
	run tls "$STRATA_BIN" "$WORK/new" on "${CERTS[@]}"
	[[ -n $BASE_BIN ]] && run base-plaintext "$BASE_BIN" "$WORK/base" off
done
