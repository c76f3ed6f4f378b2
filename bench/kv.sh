#!/usr/bin/env bash
# bench/kv.sh: Strata's Redis-protocol key-value API against Redis and etcd on this machine.
#
# It starts every server itself (each a child process with its own data directory
# under WORK_DIR, on 127.0.0.1): Strata (a single node, --resp-addr), Redis (its
# default configuration: RDB snapshots, no AOF, so no fsync per write), a
# single-member etcd and a three-member etcd (etcd's defaults: every write fsynced).
# Then, repeated and alternating the order of the servers each repeat:
#   1. redis-benchmark -t get,set,incr,hset -c 50 against Strata and Redis;
#   2. YCSB workloads (default A and C) through `strata workload run ycsb` against
#      Strata (resp), Redis (resp), etcd with 1 member and etcd with 3 members.
# It prints a markdown report of medians and ratios, also written to
# bench/results/<UTC date-time>-kv.md with the raw per-run TSV beside it.
#
# Settings (environment variable, or the same name as a flag: --records=1000):
#   TIME=30           seconds per YCSB run
#   REPEATS=3         runs of each (benchmark, server) pair; medians are reported
#   THREADS=64        YCSB workers (strata workload --threads)
#   RECORDS=100000    YCSB records, loaded once per server before the runs
#   WORKLOADS="a c"   YCSB core workloads (a b c d f; e needs range scans, which the
#                     Redis protocol lacks)
#   REQUESTS=100000   redis-benchmark -n, per test
#   CLIENTS=50        redis-benchmark -c
#   BENCH_TESTS="get,set,incr,hset"   redis-benchmark -t
#   RANDOM_KEYS=0     redis-benchmark -r (0: off, redis-benchmark's default: every
#                     SET/GET/INCR hits one key, every HSET one hash field)
#   TARGETS="strata redis etcd1 etcd3"  (any subset; redis-benchmark runs on strata
#                     and redis only)
#   STRATA_PORT=4000 STRATA_RESP_PORT=6380 STRATA_HTTP_PORT=8080 STRATA_GRPC_PORT=20160
#   REDIS_PORT=6379   ETCD1_PORT=2379 (peer port +1)
#   ETCD3_PORT=2479   (members use client ports 2479, 2481, 2483; peers +1)
#   WORK_DIR=<mktemp -d>  KEEP_WORK=0  RESULTS_DIR=bench/results
#   STRATA_BIN=bin/strata (built from ./cmd/strata unless SKIP_BUILD=1)
#   NOTE="free text"  (added to the report)
#
# Method, and why:
#   - One client program: YCSB runs through `strata workload`, so Strata, Redis and
#     etcd see the same key choice (scrambled zipfian), the same records (10 fields
#     of 100 bytes) and the same layout: one value per record (GET/SET on the Redis
#     protocol, Get/Put on etcd, linearizable reads), an update rewrites the record.
#   - Targets from the issue: redis-benchmark GET >= 0.5x Redis and SET >= 0.3x Redis
#     (Redis acknowledges before any fsync; Strata fsyncs through Raft first);
#     YCSB A and C >= 5x a single-member etcd (both fsync every write, both serve
#     linearizable reads).
#   - Alternation: repeat r runs the servers in TARGETS order when r is odd, in
#     reverse when r is even, so drift over time hits every server alike.
#   - A server that exits mid-benchmark ends the benchmark; the report covers the
#     runs done so far and says so; the script then exits 1.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_ROOT/bench/lib.sh"

usage() { bench_usage "${BASH_SOURCE[0]}" "${1:-0}"; }

# Flags mirror the environment variables: --records=5 sets RECORDS=5.
parse_flags "TIME REPEATS THREADS RECORDS WORKLOADS REQUESTS CLIENTS BENCH_TESTS RANDOM_KEYS TARGETS STRATA_PORT STRATA_RESP_PORT STRATA_HTTP_PORT STRATA_GRPC_PORT REDIS_PORT ETCD1_PORT ETCD3_PORT WORK_DIR KEEP_WORK RESULTS_DIR STRATA_BIN SKIP_BUILD NOTE" "$@"

TIME=${TIME:-30}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-64}
RECORDS=${RECORDS:-100000}
WORKLOADS=${WORKLOADS:-a c}
REQUESTS=${REQUESTS:-100000}
CLIENTS=${CLIENTS:-50}
BENCH_TESTS=${BENCH_TESTS:-get,set,incr,hset}
RANDOM_KEYS=${RANDOM_KEYS:-0}
TARGETS=${TARGETS:-strata redis etcd1 etcd3}
STRATA_PORT=${STRATA_PORT:-4000}
STRATA_RESP_PORT=${STRATA_RESP_PORT:-6380}
STRATA_HTTP_PORT=${STRATA_HTTP_PORT:-8080}
STRATA_GRPC_PORT=${STRATA_GRPC_PORT:-20160}
REDIS_PORT=${REDIS_PORT:-6379}
ETCD1_PORT=${ETCD1_PORT:-2379}
ETCD3_PORT=${ETCD3_PORT:-2479}
KEEP_WORK=${KEEP_WORK:-0}
RESULTS_DIR=${RESULTS_DIR:-$REPO_ROOT/bench/results}
STRATA_BIN=${STRATA_BIN:-$REPO_ROOT/bin/strata}
SKIP_BUILD=${SKIP_BUILD:-0}
NOTE=${NOTE:-}

for n in TIME REPEATS THREADS RECORDS REQUESTS CLIENTS; do
	if ! [[ ${!n} =~ ^[1-9][0-9]*$ ]]; then
		echo "$n must be a positive integer, got '${!n}'" >&2
		exit 2
	fi
done
[[ $RANDOM_KEYS =~ ^[0-9]+$ ]] || {
	echo "RANDOM_KEYS must be a non-negative integer, got '$RANDOM_KEYS'" >&2
	exit 2
}
for target in $TARGETS; do
	case $target in
	strata | redis | etcd1 | etcd3) ;;
	*)
		echo "TARGETS may name strata, redis, etcd1 and etcd3, got '$target'" >&2
		exit 2
		;;
	esac
done
for w in $WORKLOADS; do
	case $w in
	a | b | c | d | f) ;;
	*)
		echo "WORKLOADS may name YCSB workloads a b c d f, got '$w'" >&2
		exit 2
		;;
	esac
done
[[ $BENCH_TESTS =~ ^[a-z,]+$ ]] || {
	echo "BENCH_TESTS is a comma-separated list of redis-benchmark tests, got '$BENCH_TESTS'" >&2
	exit 2
}

has_target() { [[ " $TARGETS " == *" $1 "* ]]; }

STRATA_PID=
REDIS_PID=
ETCD1_PID=
ETCD3_PIDS=()
CLIENT_PID=
OWN_WORK_DIR=0
if [[ -z ${WORK_DIR:-} ]]; then
	WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/strata-kv.XXXXXX")
	OWN_WORK_DIR=1
fi
mkdir -p "$WORK_DIR"

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $CLIENT_PID ]]; then
		kill "$CLIENT_PID" 2>/dev/null || true
		wait "$CLIENT_PID" 2>/dev/null || true
	fi
	local pid
	stop_pid "$STRATA_PID" 30
	stop_pid "$REDIS_PID" 30
	stop_pid "$ETCD1_PID" 30
	for pid in "${ETCD3_PIDS[@]}"; do
		stop_pid "$pid" 30
	done
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

ensure_debian_packages redis-server redis-benchmark redis-cli etcd etcdctl -- \
	redis-server redis-tools etcd-server etcd-client

# start_redis <dir> <port>: Redis with its default configuration (no config
# file), data under dir. Sets REDIS_PID.
start_redis() {
	local dir=$1 port=$2
	require_free_ports "$port" || return 1
	mkdir -p "$dir"
	log "starting Redis on 127.0.0.1:$port (default config, data $dir)"
	redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize no \
		--logfile "$dir/redis.log" &
	REDIS_PID=$!
	if ! wait_for_resp "$port" "$REDIS_PID" 30; then
		log "Redis did not start; last lines of $dir/redis.log:"
		tail -n 20 "$dir/redis.log" >&2 || true
		stop_pid "$REDIS_PID" 5
		return 1
	fi
}

# start_etcd1 <dir> <port>: a single-member etcd. Sets ETCD1_PID.
start_etcd1() {
	local dir=$1 port=$2
	require_free_ports "$port" $((port + 1)) || return 1
	log "starting etcd (1 member) on 127.0.0.1:$port (data $dir)"
	start_etcd_member "$dir/m1" m1 "$port" $((port + 1)) "m1=http://127.0.0.1:$((port + 1))" kv-bench-1
	ETCD1_PID=$MEMBER_PID
	wait_for_etcd "127.0.0.1:$port" "$dir" "$ETCD1_PID"
}

ETCD3_ENDPOINTS="127.0.0.1:$ETCD3_PORT,127.0.0.1:$((ETCD3_PORT + 2)),127.0.0.1:$((ETCD3_PORT + 4))"

if [[ $SKIP_BUILD != 1 ]]; then
	log "building $STRATA_BIN"
	(cd "$REPO_ROOT" && go build -o "$STRATA_BIN" ./cmd/strata)
fi
[[ -x $STRATA_BIN ]] || {
	log "no strata binary at $STRATA_BIN"
	exit 1
}

if has_target strata; then
	start_strata "$STRATA_BIN" "$WORK_DIR/strata" "$STRATA_PORT" "$STRATA_HTTP_PORT" "$STRATA_GRPC_PORT" "$STRATA_RESP_PORT"
	if ! wait_for_resp "$STRATA_RESP_PORT" "$STRATA_PID" 30; then
		log "Strata's Redis listener on 127.0.0.1:$STRATA_RESP_PORT does not answer PING; last lines of $WORK_DIR/strata/strata.log:"
		tail -n 20 "$WORK_DIR/strata/strata.log" >&2 || true
		exit 1
	fi
fi
if has_target redis; then
	start_redis "$WORK_DIR/redis" "$REDIS_PORT"
fi
if has_target etcd1; then
	start_etcd1 "$WORK_DIR/etcd1" "$ETCD1_PORT"
fi
if has_target etcd3; then
	start_etcd3 "$WORK_DIR/etcd3" "$ETCD3_PORT"
fi

# driver_args <target>: the strata workload flags that reach a server.
driver_args() {
	case $1 in
	strata) echo "--driver resp --addr 127.0.0.1:$STRATA_RESP_PORT" ;;
	redis) echo "--driver resp --addr 127.0.0.1:$REDIS_PORT" ;;
	etcd1) echo "--driver etcd --endpoints 127.0.0.1:$ETCD1_PORT" ;;
	etcd3) echo "--driver etcd --endpoints $ETCD3_ENDPOINTS" ;;
	esac
}

# alive <target>: the target's processes are all running.
alive() {
	local pid pids
	case $1 in
	strata) pids=$STRATA_PID ;;
	redis) pids=$REDIS_PID ;;
	etcd1) pids=$ETCD1_PID ;;
	etcd3) pids="${ETCD3_PIDS[*]}" ;;
	esac
	for pid in $pids; do
		kill -0 "$pid" 2>/dev/null || return 1
	done
}

server_log() {
	case $1 in
	strata) echo "$WORK_DIR/strata/strata.log" ;;
	redis) echo "$WORK_DIR/redis/redis.log" ;;
	etcd1) echo "$WORK_DIR/etcd1/m1/etcd.log" ;;
	etcd3) echo "$WORK_DIR/etcd3/e0/etcd.log" ;;
	esac
}

# client <log> <command...>: runs a client in the background and waits for
# it, so that a signal to this script is handled at once and cleanup can
# stop the client too.
client() {
	local out=$1 rc=0
	shift
	"$@" >"$out" 2>&1 &
	CLIENT_PID=$!
	wait "$CLIENT_PID" || rc=$?
	CLIENT_PID=
	return "$rc"
}

RAW="$WORK_DIR/runs.tsv"
printf 'kind\ttest\ttarget\trepeat\tops_per_sec\tp99_ms\terrors\n' >"$RAW"

order_for() { # <repeat> <targets...>: the targets, reversed on even repeats
	local rep=$1
	shift
	if ((rep % 2 == 0)); then
		printf '%s\n' "$@" | tac | tr '\n' ' '
	else
		echo "$*"
	fi
}

ABORTED=
check_alive() { # <target> <what>
	if ! alive "$1"; then
		ABORTED="$1 exited during $2"
		log "$ABORTED; last lines of $(server_log "$1"):"
		tail -n 20 "$(server_log "$1")" >&2 || true
		return 1
	fi
}

# 1. redis-benchmark on the servers that speak the Redis protocol.
bench_targets=()
for t in strata redis; do
	has_target "$t" && bench_targets+=("$t")
done
bench_port() { if [[ $1 == strata ]]; then echo "$STRATA_RESP_PORT"; else echo "$REDIS_PORT"; fi; }
bench_extra=()
((RANDOM_KEYS > 0)) && bench_extra=(-r "$RANDOM_KEYS")
for ((rep = 1; rep <= REPEATS; rep++)); do
	((${#bench_targets[@]})) || break
	for t in $(order_for "$rep" "${bench_targets[@]}"); do
		out="$WORK_DIR/redis-benchmark-$t-$rep.csv"
		log "redis-benchmark -t $BENCH_TESTS -c $CLIENTS -n $REQUESTS ${bench_extra[*]} on $t (repeat $rep)"
		if ! client "$out" redis-benchmark -h 127.0.0.1 -p "$(bench_port "$t")" -t "$BENCH_TESTS" \
			-c "$CLIENTS" -n "$REQUESTS" "${bench_extra[@]}" --csv; then
			log "redis-benchmark on $t failed; tail of $out:"
			tail -n 5 "$out" >&2
			printf 'redis-benchmark\tALL\t%s\t%s\tFAIL\tFAIL\tFAIL\n' "$t" "$rep" >>"$RAW"
		else
			# "SET","79617.83","0.339","0.096","0.319","0.583","0.807","2.175"
			awk -F'"' -v t="$t" -v r="$rep" '$2 != "" && $2 != "test" {
				printf "redis-benchmark\t%s\t%s\t%s\t%s\t%s\t0\n", $2, t, r, $4, $14 }' "$out" >>"$RAW"
			awk -F'"' '$2 != "" && $2 != "test" { printf "  %s %s rps, p99 %s ms\n", $2, $4, $14 }' "$out" >&2
		fi
		check_alive "$t" "redis-benchmark" || break 2
	done
done

# 2. YCSB through strata workload: load each server once (workloads a, b, c
# and f leave the record set as it is), then run.
if [[ -z $ABORTED ]]; then
	for t in $TARGETS; do
		log "loading $RECORDS YCSB records into $t"
		# shellcheck disable=SC2046
		if ! client "$WORK_DIR/load-$t.log" "$STRATA_BIN" workload init ycsb --drop $(driver_args "$t") \
			--records "$RECORDS" --threads 16 --display-every 10s; then
			log "loading $t failed; tail of $WORK_DIR/load-$t.log:"
			tail -n 5 "$WORK_DIR/load-$t.log" >&2
			check_alive "$t" "the YCSB load" || break
			ABORTED="loading the YCSB records into $t failed (see above)"
			break
		fi
		tail -n 1 "$WORK_DIR/load-$t.log" >&2
	done
fi
summary_field() { sed -n "s|.* $1=\([^ ]*\).*|\1|p" <<<"$summary"; }
read -r -a targets <<<"$TARGETS"
for w in $WORKLOADS; do
	[[ -z $ABORTED ]] || break
	for ((rep = 1; rep <= REPEATS; rep++)); do
		for t in $(order_for "$rep" "${targets[@]}"); do
			out="$WORK_DIR/ycsb-$w-$t-$rep.log"
			rc=0
			# shellcheck disable=SC2046
			client "$out" "$STRATA_BIN" workload run ycsb --workload "$w" $(driver_args "$t") \
				--records "$RECORDS" --threads "$THREADS" --display-every 10s --duration "${TIME}s" || rc=$?
			summary=$(grep '^_summary ' "$out" || true)
			if [[ -z $summary ]]; then
				log "ycsb-$w on $t (repeat $rep) FAILED (exit $rc); tail of $out:"
				tail -n 5 "$out" >&2
				printf 'ycsb\t%s\t%s\t%s\tFAIL\tFAIL\tFAIL\n' "$w" "$t" "$rep" >>"$RAW"
			else
				log "ycsb-$w on $t (repeat $rep): $(summary_field ops/sec) ops/s, p99 $(summary_field p99_ms) ms, $(summary_field errors) errors"
				printf 'ycsb\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$t" "$rep" "$(summary_field ops/sec)" \
					"$(summary_field p99_ms)" "$(summary_field errors)" >>"$RAW"
			fi
			check_alive "$t" "ycsb-$w" || break 3
		done
	done
done

# Report: medians over repeats per (kind, test, target); FAIL runs are left
# out of the medians and counted.
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
	function num(v) { return v == "" ? "-" : sprintf("%.0f", v) }
	function ms(v) { return v == "" ? "-" : sprintf("%.2f", v) }
	function ratio(a, b) { return (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("**%.2f**", a / b) }
	NR == 1 { next }
	{
		key = $1 SUBSEP $2
		if (!(key in seen)) { seen[key] = 1; order[++nkeys] = key }
		k = key SUBSEP $3
		if ($5 == "FAIL") { failed[k]++ }
		else { ops[k] = ops[k] " " $5; p99[k] = p99[k] " " $6; errs[k] += $7 }
	}
	END {
		nt = split(targets, tg, " ")
		name["strata"] = "Strata"; name["redis"] = "Redis"; name["etcd1"] = "etcd 1 member"; name["etcd3"] = "etcd 3 members"
		target["redis-benchmark", "GET"] = ">= 0.5"; target["redis-benchmark", "SET"] = ">= 0.3"
		target["ycsb", "a"] = ">= 5 (vs etcd 1)"; target["ycsb", "c"] = ">= 5 (vs etcd 1)"
		for (kind = 1; kind <= 2; kind++) {
			kn = kind == 1 ? "redis-benchmark" : "ycsb"
			hdr = ""; printed = 0
			for (i = 1; i <= nkeys; i++) {
				split(order[i], kk, SUBSEP)
				if (kk[1] != kn) continue
				if (!printed) {
					if (kn == "redis-benchmark") {
						print "### redis-benchmark: requests/s (p99 ms), median of the repeats\n"
						line = "| test |"; sep = "|---|"
						for (s = 1; s <= nt; s++) if (tg[s] == "strata" || tg[s] == "redis") { line = line " " name[tg[s]] " |"; sep = sep "---:|" }
						print line " Strata / Redis | target |"; print sep "---:|---|"
					} else {
						print "\n### YCSB through strata workload: operations/s (p99 ms), median of the repeats\n"
						line = "| workload |"; sep = "|---|"
						for (s = 1; s <= nt; s++) { line = line " " name[tg[s]] " |"; sep = sep "---:|" }
						print line " Strata / etcd 1 | Strata / etcd 3 | Strata / Redis | target |"; print sep "---:|---:|---:|---|"
					}
					printed = 1
				}
				row = "| " (kn == "ycsb" ? toupper(kk[2]) : kk[2]) " |"
				for (s = 1; s <= nt; s++) {
					if (kn == "redis-benchmark" && tg[s] != "strata" && tg[s] != "redis") continue
					k = order[i] SUBSEP tg[s]
					m[tg[s]] = median(ops[k])
					cell = num(m[tg[s]]) " (" ms(median(p99[k])) ")"
					if (errs[k] > 0) cell = cell ", " errs[k] " errors"
					if (failed[k] > 0) cell = cell ", " failed[k] " failed runs"
					row = row " " cell " |"
				}
				if (kn == "redis-benchmark") row = row " " ratio(m["strata"], m["redis"]) " |"
				else row = row " " ratio(m["strata"], m["etcd1"]) " | " ratio(m["strata"], m["etcd3"]) " | " ratio(m["strata"], m["redis"]) " |"
				row = row " " target[kn, kk[2]] " |"
				print row
				delete m
			}
		}
	}' "$RAW"
}

version_of() {
	case $1 in
	strata)
		local v
		v=$("$STRATA_BIN" version 2>/dev/null || echo "$STRATA_BIN (version unknown)")
		if [[ $SKIP_BUILD != 1 ]]; then
			v="$v, built by this run from $(cd "$REPO_ROOT" && git describe --always --dirty 2>/dev/null || echo "an unknown tree")"
		fi
		echo "$v"
		;;
	redis) redis-server --version | head -n 1 ;;
	etcd) etcd --version | head -n 1 ;;
	esac
}

stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
mkdir -p "$RESULTS_DIR"
report="$RESULTS_DIR/$stamp-kv.md"
{
	echo "# bench/kv.sh: ${TARGETS// / vs }, $stamp"
	echo
	echo "- machine: $(nproc) CPUs, $(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr)"
	has_target strata && echo "- strata: $(version_of strata); one node, every write fsynced through Raft"
	has_target redis && echo "- redis: $(version_of redis); default configuration (RDB snapshots, no AOF: no fsync per write)"
	if has_target etcd1 || has_target etcd3; then
		echo "- etcd: $(version_of etcd); default configuration (fsync per write batch), linearizable reads"
	fi
	echo "- redis-benchmark $(redis-benchmark --version | awk '{print $2}'): -t $BENCH_TESTS -c $CLIENTS -n $REQUESTS$( ((RANDOM_KEYS > 0)) && echo " -r $RANDOM_KEYS")"
	echo "- YCSB: workloads \"$WORKLOADS\", $RECORDS records of 10 x 100 bytes, $THREADS threads, ${TIME}s per run, one value per record on every server"
	echo "- repeats=$REPEATS, server order alternating each repeat; medians; all servers and clients share the machine"
	if [[ -n $NOTE ]]; then
		echo "- note: $NOTE"
	fi
	if [[ -n $ABORTED ]]; then
		echo "- **ABORTED: $ABORTED**; the tables cover the runs before it"
	fi
	echo
	summarize
} >"$report"
cp "$RAW" "${report%.md}.tsv"
cat "$report"
log "report written to $report (raw runs: ${report%.md}.tsv)"
[[ -z $ABORTED ]] || exit 1
