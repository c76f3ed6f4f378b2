package main

import (
	"bufio"
	"fmt"
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

// defaultMemoryLimit is the Go heap's soft limit without --memory-limit: a
// quarter of the machine's RAM, at most 1 GiB. The node's other large
// memory lives outside the Go heap (the KV engine's block cache, --cache,
// filled only as blocks are read; the Raft engine's 32 MiB; version cache
// 256 MiB; memtables up to 256 MiB), so with the cap a node stays under
// 2 GiB resident under sysbench: at GOGC=400 without it, peak RSS reached
// 1.77 GiB in oltp_insert. Larger machines raise it with --memory-limit.
func defaultMemoryLimit(ram int64) int64 {
	if ram <= 0 {
		return 0
	}
	return min(ram/4, 1<<30)
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
