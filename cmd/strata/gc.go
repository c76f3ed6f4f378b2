package main

import (
	"bufio"
	"fmt"
	"github.com/strata-db/strata/internal/sql/exec"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// defaultGOGC is the Go collector's heap growth target for a node, in
// percent. A node's live Go heap is small (tens of MiB: the block caches
// and the version cache live outside it) while a busy node allocates over
// a GiB per second, so at Go's default of 100 the collector ran ~50 times a
// second and took ~20% of the CPU in a profile of sysbench oltp_read_only.
// At 400 it runs a fifth as often for a few hundred MiB more heap; the
// memory limit brings the collector back as the heap nears it.
const defaultGOGC = 400

// configureGC applies --gogc and --memory-limit, except where the GOGC or
// GOMEMLIMIT environment variables (which the Go runtime reads itself) are
// set: the environment wins, as for every Go program. memoryLimit 0 means
// defaultMemoryLimit, negative means no limit.
func configureGC(logger *slog.Logger, gogc int, memoryLimit int64) error {
	if gogc == 0 || gogc < -1 {
		return fmt.Errorf("bad --gogc %d: want a percentage above 0, or -1 to collect only at the memory limit", gogc)
	}
	gcPercent := os.Getenv("GOGC")
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gogc)
		gcPercent = strconv.Itoa(gogc)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		limit := memoryLimit
		if limit == 0 {
			limit = defaultMemoryLimit(physicalMemory())
		}
		if limit <= 0 {
			limit = math.MaxInt64
		}
		debug.SetMemoryLimit(limit)
	}
	logger.Debug("go collector", "gogc", gcPercent, "memory-limit", debug.SetMemoryLimit(-1))
	return nil
}

// defaultMemoryLimit is the Go heap's soft limit without --memory-limit:
// a quarter of the machine's RAM, but at least twice a statement's memory
// quota (exec.DefaultMemQuota, 1 GiB) and at most half of RAM. The node's
// other large memory lives outside the Go heap (the KV engine's block
// cache, --cache, filled only as blocks are read; the Raft engine's
// 32 MiB; version cache 256 MiB; memtables up to 256 MiB). The limit was
// a quarter of RAM capped at 1 GiB, which kept a node under 2 GiB
// resident under sysbench (GOGC=400 lets the heap grow to five times
// what is live), but a statement may hold up to its quota: a join or
// aggregation holding a few hundred MB pushed the heap past the limit and
// the collector ran all the time (TPC-H Q13 at scale factor 1, a 600 MB
// hash table, took 23 s against MariaDB's 5.5; at SF 0.1 with the limit
// below its 134 MB heap, 1.3 s instead of 0.3).
func defaultMemoryLimit(ram int64) int64 {
	if ram <= 0 {
		return 0
	}
	return min(max(ram/4, 2*exec.DefaultMemQuota), ram/2)
}

// physicalMemory is the machine's RAM in bytes (MemTotal of /proc/meminfo),
// 0 where unknown.
func physicalMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
