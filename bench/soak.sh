#!/usr/bin/env bash
# bench/soak.sh: the long fault matrix of test/chaos: every workload x nemesis
# family x seed, each run its own directory under $RUNS, then one summary table
# (runs, verdicts, faults injected, anomalies, lost writes, longest
# unavailability) on stdout and in $RUNS/table.md. Exit 1 if any run found an
# anomaly or lost a write.
#
#   bash bench/soak.sh                          # defaults below
#   SEEDS=100 NODES=5 TIME=120s bash bench/soak.sh
#   flock /tmp/strata-bench.lock bash bench/soak.sh   # on a shared machine
#
# Settings: SEEDS (runs per workload x family, default 10), FIRST_SEED (1),
# NODES (default 5 when `strata start` has --join, else 1), TIME (60s of faults
# per run), WORKLOADS (all), FAMILIES (space-separated nemesis sets, each a
# comma-separated list; default: every family alone, then mixed), RUNS
# (runs/soak-<date>), NET (auto), STRATA_BIN.
# Families a cluster cannot run (partitions on one node, for instance) are
# skipped by the harness and said so in each run's run.log.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"

SEEDS=${SEEDS:-10}
FIRST_SEED=${FIRST_SEED:-1}
TIME=${TIME:-60s}
WORKLOADS=${WORKLOADS:-"bank register list-append set long-fork monotonic"}
FAMILIES=${FAMILIES:-"none kill kill-leader kill-pd kill-all pause pause-leader partition loss delay stall reset clock membership mixed"}
RUNS=${RUNS:-runs/soak-$(date -u +%Y%m%dT%H%M%S)}
NET=${NET:-auto}

mkdir -p "$RUNS"
BIN=${STRATA_BIN:-}
if [[ -z $BIN ]]; then
	go build -o "$RUNS/strata" ./cmd/strata
	BIN=$RUNS/strata
fi
go build -o "$RUNS/strata-chaos" ./cmd/strata-chaos
if [[ -z ${NODES:-} ]]; then
	# Read the help whole: `| grep -q` under pipefail fails when strata
	# gets SIGPIPE after grep's early exit.
	help=$("$BIN" start -h 2>&1 || true)
	if grep -q -- '-join' <<<"$help"; then NODES=5; else NODES=1; fi
fi
echo "soak: $SEEDS seeds x [$WORKLOADS] x [$FAMILIES], $NODES node(s), $TIME each, runs in $RUNS" >&2

failed=0
for w in $WORKLOADS; do
	for f in $FAMILIES; do
		for ((s = FIRST_SEED; s < FIRST_SEED + SEEDS; s++)); do
			rc=0
			"$RUNS/strata-chaos" run --bin "$BIN" --workload "$w" --nemesis "$f" --nodes "$NODES" \
				--seed "$s" --time "$TIME" --net "$NET" --runs "$RUNS" >"$RUNS/last.log" 2>&1 || rc=$?
			echo "$w $f seed $s: exit $rc" >&2
			if ((rc == 1)); then
				failed=1
				grep -E "verdict|replay|go run" "$RUNS/last.log" >&2 || true
			fi
		done
	done
done
rm -f "$RUNS/last.log"
rc=0
"$RUNS/strata-chaos" table "$RUNS"/*/ | tee "$RUNS/table.md" || rc=$?
echo "command: SEEDS=$SEEDS NODES=$NODES TIME=$TIME bash bench/soak.sh" >>"$RUNS/table.md"
if ((failed || rc)); then
	exit 1
fi
