#!/usr/bin/env bash
# bench/bruteforce.sh: does a password-guessing client slow the others down? sysbench
# oltp_point_select against one Strata node alone, then with bench/bruteforce logging in
# to another account with a wrong password in a loop (up to 10,000 attempts, one new
# connection each, over plaintext, so that every attempt takes caching_sha2_password's
# full path: RSA decryption and PBKDF2 on the server). Both with the login failure delay
# (--login-failure-delay, default 1s) and without it (0).
#
# It prints, per delay setting, the server's CPU time while the guesser runs alone (up to
# ATTEMPTS attempts or COST_TIME seconds), then REPEATS alternating pairs of sysbench runs
# alone and next to the guesser, and the median change of throughput.
#
# Settings (environment): TABLES=2 TABLE_SIZE=10000 TIME=6 THREADS=8 ATTEMPTS=10000
#   COST_TIME=90 GUESSERS=1 (attempts in flight) REPEATS=5 DELAYS="1s 0"
#   STRATA_BIN=bin/strata (built unless SKIP_BUILD=1) PORT=4410
# Run it under the benchmark lock: flock /tmp/strata-bench.lock bash bench/bruteforce.sh
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TABLES=${TABLES:-2} TABLE_SIZE=${TABLE_SIZE:-10000} TIME=${TIME:-6} THREADS=${THREADS:-8}
ATTEMPTS=${ATTEMPTS:-10000} GUESSERS=${GUESSERS:-1} REPEATS=${REPEATS:-5}
PORT=${PORT:-4410} STRATA_BIN=${STRATA_BIN:-$REPO_ROOT/bin/strata}
WORK=$(mktemp -d)
if [[ ${SKIP_BUILD:-0} != 1 ]]; then (cd "$REPO_ROOT" && go build -o "$STRATA_BIN" ./cmd/strata); fi
(cd "$REPO_ROOT" && go build -o "$WORK/bruteforce" ./bench/bruteforce)
pid=
stop() { if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap 'stop; rm -rf "$WORK"' EXIT
start() { # login-failure-delay
	"$STRATA_BIN" start --data-dir "$WORK/data" --sql-addr 127.0.0.1:$PORT --resp-addr "" --http-addr 127.0.0.1:$((PORT + 1)) \
		--grpc-addr 127.0.0.1:$((PORT + 2)) --replicas 1 --login-failure-delay "$1" >>"$WORK/log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do mysql -h127.0.0.1 -P$PORT -uroot -e 'SELECT 1' >/dev/null 2>&1 && return; sleep 0.2; done
	echo "node did not start" >&2; tail "$WORK/log" >&2; exit 1
}
sb() {
	sysbench oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=$PORT --mysql-user=root \
		--mysql-db=sbtest --tables=$TABLES --table-size=$TABLE_SIZE --threads=$THREADS "$@"
}
qps() { awk '/queries:/ {gsub(/[(]/,"",$3); print $3}'; }
start 1s
mysql -h127.0.0.1 -P$PORT -uroot -e "CREATE DATABASE sbtest; CREATE USER victim IDENTIFIED BY 'a-long-random-password'"
sb prepare >/dev/null
cpu() { awk -v t="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / t}' "/proc/$pid/stat"; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for delay in ${DELAYS:-1s 0}; do
	stop; start "$delay" # a restart: no cached fast-path digest of victim's password
	sb --time=3 run >/dev/null
	# What the guessing costs the server: its CPU time while only the guesser runs.
	c0=$(cpu)
	g=$("$WORK/bruteforce" -addr 127.0.0.1:$PORT -user victim -n "$ATTEMPTS" -c "$GUESSERS" -for "${COST_TIME:-90}s")
	c1=$(cpu)
	n=$(sed 's/.*attempts=\([0-9]*\).*/\1/' <<<"$g")
	printf 'delay=%s guesser alone: %s server_cpu_seconds=%.2f cpu_ms_per_attempt=%.2f\n' "$delay" "$g" \
		"$(echo "$c1 - $c0" | bc -l)" "$(echo "($c1 - $c0) * 1000 / ($n + ($n == 0))" | bc -l)"
	# What it costs the other clients: point-select qps alone and next to the guesser,
	# in alternating pairs so that a noisy neighbour hits both sides.
	changes=()
	for r in $(seq "$REPEATS"); do
		a=$(sb --time=$TIME run | qps)
		"$WORK/bruteforce" -addr 127.0.0.1:$PORT -user victim -n "$ATTEMPTS" -c "$GUESSERS" -for "${TIME}s" >"$WORK/guess" &
		gp=$!
		q=$(sb --time=$TIME run | qps)
		wait "$gp"
		c=$(echo "($q - $a) * 100 / $a" | bc -l)
		changes+=("$c")
		printf 'delay=%s pair %s: alone %s qps, with guesser %s qps (%+.1f%%); %s\n' "$delay" "$r" "$a" "$q" "$c" "$(cat "$WORK/guess")"
	done
	printf 'delay=%s median change %+.1f%% over %s pairs\n' "$delay" "$(printf '%s\n' "${changes[@]}" | median)" "$REPEATS"
done
curl -s http://127.0.0.1:$((PORT + 1))/metrics | grep -E '^strata_(mysql_login_failures_total|login_delays_total)' || true
