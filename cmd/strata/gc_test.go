package main

import (
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// gcTestSetup sets GOGC=100 for the test, restores the process's collector
// settings when it ends, and returns a logger that discards.
func gcTestSetup(t *testing.T) *slog.Logger {
	oldPercent, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func TestConfigureGC(t *testing.T) {
	t.Setenv("GOGC", "") // registers a restore of the real value...
	t.Setenv("GOMEMLIMIT", "")
	logger := gcTestSetup(t)

	// With the environment variables set, the flags change nothing.
	if err := configureGC(logger, 700, 123<<20); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set in the environment, yet --gogc changed the percent to %d", got)
	}

	for _, bad := range []int{0, -2} {
		if err := configureGC(logger, bad, 0); err == nil {
			t.Errorf("--gogc %d accepted", bad)
		}
	}
}

func TestConfigureGCFlags(t *testing.T) {
	// unsetenv: the flags apply only where GOGC and GOMEMLIMIT are unset.
	unsetenv(t, "GOGC")
	unsetenv(t, "GOMEMLIMIT")
	logger := gcTestSetup(t)

	if err := configureGC(logger, 700, 123<<20); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 700 {
		t.Errorf("--gogc 700 set %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Errorf("--memory-limit 123 MiB set %d", got)
	}

	if err := configureGC(logger, defaultGOGC, 0); err != nil {
		t.Fatal(err)
	}
	ram := physicalMemory()
	if runtime.GOOS == "linux" && ram <= 0 {
		t.Fatalf("physicalMemory() = %d on Linux", ram)
	}
	if got := debug.SetMemoryLimit(-1); ram > 0 && got != defaultMemoryLimit(ram) {
		t.Errorf("default memory limit %d, want defaultMemoryLimit(%d) = %d", got, ram, defaultMemoryLimit(ram))
	}
	for _, c := range []struct{ ram, want int64 }{
		{2 << 30, 1 << 30},   // half of RAM
		{6 << 30, 2 << 30},   // twice the statement quota
		{64 << 30, 16 << 30}, // a quarter of RAM
	} {
		if got := defaultMemoryLimit(c.ram); got != c.want {
			t.Errorf("defaultMemoryLimit(%d GiB) = %d, want %d", c.ram>>30, got, c.want)
		}
	}
}

// unsetenv removes key from the environment for the test and restores it
// afterwards.
func unsetenv(t *testing.T, key string) {
	t.Setenv(key, "") // restores the old value (or absence) at cleanup
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}
