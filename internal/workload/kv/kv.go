// Package kv is the KV workload of `cockroach workload run kv`: single-key
// reads and writes of fixed-size values over a key space, one key per
// operation (batch size 1). KV95 is --read-percent 95, KV0 is all writes.
//
// Keys are "kv" + FNV64(n) for n in [0, Keys), chosen uniformly or by the
// scrambled zipfian of package gen; a write stores a fresh random value
// whether or not the key exists (SET, Put, REPLACE). The load phase writes
// every key once, so that reads find values; a read of a key that was never
// written is not an error (the key space may be sparse on purpose) but is
// counted and reported after the run.
package kv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/strata-db/strata/internal/workload"
	"github.com/strata-db/strata/internal/workload/driver"
	"github.com/strata-db/strata/internal/workload/gen"
)

// Config is a KV run.
type Config struct {
	// Keys is the size of the key space (and the number of keys loaded).
	Keys uint64
	// ReadPercent is the share of reads, 0..100.
	ReadPercent int
	// Distribution is "uniform" or "zipfian".
	Distribution string
	// ValueSize is the length of each value in bytes.
	ValueSize int
}

// Workload is a configured KV workload, shared by the workers of a run.
type Workload struct {
	cfg    Config
	schema driver.Schema
	ops    []string
	weight []float64
	reads  atomic.Int64
	misses atomic.Int64
}

// New checks cfg and builds the workload.
func New(cfg Config) (*Workload, error) {
	if cfg.Keys < 1 {
		return nil, fmt.Errorf("the key space must hold at least 1 key")
	}
	if cfg.ReadPercent < 0 || cfg.ReadPercent > 100 {
		return nil, fmt.Errorf("read percent must be between 0 and 100, got %d", cfg.ReadPercent)
	}
	if cfg.ValueSize < 1 {
		return nil, fmt.Errorf("value size must be at least 1 byte")
	}
	switch cfg.Distribution {
	case "":
		cfg.Distribution = "uniform"
	case "uniform", "zipfian":
	default:
		return nil, fmt.Errorf("unknown key distribution %q (want uniform or zipfian)", cfg.Distribution)
	}
	w := &Workload{cfg: cfg, schema: driver.Schema{
		Table: "kv", KeyColumn: "k", Columns: []string{"v"}, HashFields: []string{"v"},
		KeyPrefix: "kv", FieldLength: cfg.ValueSize,
	}}
	if cfg.ReadPercent > 0 {
		w.ops = append(w.ops, "read")
		w.weight = append(w.weight, float64(cfg.ReadPercent))
	}
	if cfg.ReadPercent < 100 {
		w.ops = append(w.ops, "write")
		w.weight = append(w.weight, float64(100-cfg.ReadPercent))
	}
	return w, nil
}

// Name is "kv" and the read percentage ("kv95").
func (w *Workload) Name() string { return fmt.Sprintf("kv%d", w.cfg.ReadPercent) }

// Schema is the kv table: key k, value v.
func (w *Workload) Schema() driver.Schema { return w.schema }

// OpNames are "read" and/or "write".
func (w *Workload) OpNames() []string { return w.ops }

// LoadCount is the key space.
func (w *Workload) LoadCount() uint64 { return w.cfg.Keys }

// LoadRecord is key i with a random value.
func (w *Workload) LoadRecord(i uint64, r *rand.Rand, fields [][]byte) string {
	gen.FillValue(r, fields[0])
	return gen.Key(w.schema.KeyPrefix, i)
}

// Notes reports reads that found no value.
func (w *Workload) Notes() []string {
	if m := w.misses.Load(); m > 0 {
		return []string{fmt.Sprintf("note: %d of %d reads found no value (load the key space with `strata workload init kv` or --init)",
			m, w.reads.Load())}
	}
	return nil
}

type worker struct {
	w     *Workload
	s     driver.Store
	r     *rand.Rand
	pick  gen.Chooser
	keys  interface{ Next(*rand.Rand) uint64 }
	value [][]byte
	write bool
	key   string
}

// NewWorker returns one goroutine's state.
func (w *Workload) NewWorker(s driver.Store, r *rand.Rand) workload.Worker {
	wk := &worker{w: w, s: s, r: r, pick: gen.NewChooser(w.weight),
		value: [][]byte{make([]byte, w.cfg.ValueSize)}}
	if w.cfg.Distribution == "zipfian" {
		z := gen.NewScrambledZipfian(w.cfg.Keys)
		wk.keys = &z
	} else {
		wk.keys = gen.NewUniform(w.cfg.Keys)
	}
	return wk
}

func (wk *worker) Next() int {
	i := wk.pick.Next(wk.r)
	wk.write = wk.w.ops[i] == "write"
	if wk.write {
		gen.FillValue(wk.r, wk.value[0])
	}
	wk.key = gen.Key(wk.w.schema.KeyPrefix, wk.keys.Next(wk.r))
	return i
}

func (wk *worker) Exec(ctx context.Context) error {
	if wk.write {
		return wk.s.Write(ctx, wk.key, wk.value)
	}
	found, err := wk.s.Read(ctx, wk.key)
	if err == nil {
		wk.w.reads.Add(1)
		if !found {
			wk.w.misses.Add(1)
		}
	}
	return err
}
