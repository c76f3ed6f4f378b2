package kv

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestReadPercentMix(t *testing.T) {
	for _, pct := range []int{0, 50, 95, 100} {
		w, err := New(Config{Keys: 1000, ReadPercent: pct, ValueSize: 8})
		if err != nil {
			t.Fatal(err)
		}
		wk := w.NewWorker(nil, rand.New(rand.NewPCG(1, uint64(pct)))).(*worker)
		const draws = 50_000
		reads := 0
		for i := 0; i < draws; i++ {
			op := wk.Next()
			if w.OpNames()[op] == "read" {
				reads++
				if wk.write {
					t.Fatal("read op staged as a write")
				}
			}
			if !strings.HasPrefix(wk.key, "kv") {
				t.Fatalf("key %q", wk.key)
			}
		}
		p := float64(pct) / 100
		if got, sd := float64(reads)/draws, math.Sqrt(p*(1-p)/draws); math.Abs(got-p) > 5*sd+1e-9 {
			t.Errorf("read-percent %d: %.4f reads", pct, got)
		}
		if w.Name() != "kv"+map[int]string{0: "0", 50: "50", 95: "95", 100: "100"}[pct] {
			t.Errorf("name %s", w.Name())
		}
	}
}

func TestZipfianKeysAreSkewed(t *testing.T) {
	for _, c := range []struct {
		dist     string
		minShare float64
		maxShare float64
	}{{"uniform", 0, 0.02}, {"zipfian", 0.03, 1}} {
		w, _ := New(Config{Keys: 1000, ReadPercent: 100, ValueSize: 8, Distribution: c.dist})
		wk := w.NewWorker(nil, rand.New(rand.NewPCG(2, 3))).(*worker)
		counts := map[string]int{}
		const draws = 100_000
		top := 0
		for i := 0; i < draws; i++ {
			wk.Next()
			counts[wk.key]++
			top = max(top, counts[wk.key])
		}
		if share := float64(top) / draws; share < c.minShare || share > c.maxShare {
			t.Errorf("%s: hottest key has %.4f of the draws", c.dist, share)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Keys: 0, ValueSize: 1}, "at least 1 key"},
		{Config{Keys: 1, ValueSize: 1, ReadPercent: 101}, "between 0 and 100"},
		{Config{Keys: 1, ValueSize: 0}, "value size"},
		{Config{Keys: 1, ValueSize: 1, Distribution: "latest"}, `unknown key distribution "latest"`},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
