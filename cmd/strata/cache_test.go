package main

import (
	"strings"
	"testing"
)

func TestParseCacheSize(t *testing.T) {
	const ram = 16 << 30
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"25%", 4 << 30},
		{" 50 % ", 8 << 30},
		{".25", 4 << 30},
		{"0.5", 8 << 30},
		{"4GiB", 4 << 30},
		{"4G", 4 << 30},
		{"512MiB", 512 << 20},
		{"8MiB", 8 << 20},
		{"0.0001", minCacheSize}, // a tiny share is raised to the minimum
	} {
		got, err := parseCacheSize(c.in, ram)
		if err != nil || got != c.want {
			t.Errorf("parseCacheSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	// Unknown RAM: a share falls back to a fixed size, a size stands.
	if got, err := parseCacheSize("25%", 0); err != nil || got != fallbackCacheSize {
		t.Errorf("share of unknown RAM = %d, %v", got, err)
	}
	if got, err := parseCacheSize("1GiB", 0); err != nil || got != 1<<30 {
		t.Errorf("size with unknown RAM = %d, %v", got, err)
	}
	for _, in := range []string{"", "lots", "0%", "95%", "-5%", "1.5", "0", "1MiB", "-1G", "25%%", "x%"} {
		if got, err := parseCacheSize(in, ram); err == nil {
			t.Errorf("parseCacheSize(%q) = %d, want an error", in, got)
		} else if !strings.Contains(err.Error(), "want") && !strings.Contains(err.Error(), "share of RAM") {
			t.Errorf("parseCacheSize(%q): unclear error %q", in, err)
		}
	}
}
