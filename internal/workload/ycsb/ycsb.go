// Package ycsb is the YCSB core workload (Cooper et al., "Benchmarking Cloud
// Serving Systems with YCSB", SoCC 2010; the CoreWorkload of
// brianfrankcooper/YCSB and its workloads/workload[a-f] files), written for
// Strata from those definitions.
//
// Records are "user" + FNV64(n) (YCSB's hashed insert order) with Fields
// fields ("field0".."field9" / FIELD0..FIELD9) of FieldLength random
// characters. The six workloads:
//
//	a  update heavy    50% read, 50% update               zipfian
//	b  read mostly     95% read,  5% update               zipfian
//	c  read only      100% read                           zipfian
//	d  read latest     95% read,  5% insert               latest
//	e  short ranges    95% scan,  5% insert               zipfian, scans of 1..100 records (uniform)
//	f  read-modify-write 50% read, 50% read-modify-write   zipfian
//
// As in YCSB: reads read every field (readallfields=true); an update writes
// one field (writeallfields=false, unless WriteAllFields), except on stores
// that keep a record as one value, which rewrite it whole; inserts take the
// next record number from a shared counter and readers only pick numbers
// whose insert has been acknowledged; the zipfian chooser is the scrambled
// zipfian (theta 0.99) over the loaded records plus twice the expected
// inserts, redrawn when it lands on a record not yet inserted. Unlike YCSB,
// the uniform chooser covers inserted records as well as loaded ones.
//
// Inserts number their records from Records on, in every run (YCSB's
// insertstart): run d and e on a freshly loaded table (init --drop), or their
// inserts collide with the previous run's (a duplicate-key error on sql; an
// overwrite on resp and etcd).
//
// A read or read-modify-write of a record that is not there, and a scan
// that returns nothing, fail (YCSB's NOT_FOUND), so a run against
// half-loaded data shows errors instead of flattering throughput.
package ycsb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/strata-db/strata/internal/workload"
	"github.com/strata-db/strata/internal/workload/driver"
	"github.com/strata-db/strata/internal/workload/gen"
)

// Mix is one core workload: the proportions of its operations and its
// default request distribution.
type Mix struct {
	Read, Update, Insert, Scan, ReadModifyWrite float64
	Distribution                                string
	MaxScanLength                               int
}

// Workloads are YCSB's core workloads A to F.
var Workloads = map[string]Mix{
	"a": {Read: 0.5, Update: 0.5, Distribution: "zipfian"},
	"b": {Read: 0.95, Update: 0.05, Distribution: "zipfian"},
	"c": {Read: 1, Distribution: "zipfian"},
	"d": {Read: 0.95, Insert: 0.05, Distribution: "latest"},
	"e": {Scan: 0.95, Insert: 0.05, Distribution: "zipfian", MaxScanLength: 100},
	"f": {Read: 0.5, ReadModifyWrite: 0.5, Distribution: "zipfian"},
}

// Distributions are the request distributions.
var Distributions = []string{"uniform", "zipfian", "latest"}

// Config is a YCSB run.
type Config struct {
	// Workload is "a".."f".
	Workload string
	// Records is the number of records loaded (recordcount).
	Records uint64
	// Operations is the number of operations the run is expected to do
	// (operationcount; 0 when the run is bounded by time): it sizes the
	// zipfian key space for inserts.
	Operations uint64
	// Fields and FieldLength shape a record (fieldcount, fieldlength).
	Fields, FieldLength int
	// Distribution overrides the workload's request distribution.
	Distribution string
	// MaxScanLength overrides the workload's longest scan (default 1000,
	// 100 for workload e).
	MaxScanLength int
	// WriteAllFields makes updates write every field (writeallfields).
	WriteAllFields bool
}

// Operation types, in report order.
const (
	opRead = iota
	opUpdate
	opInsert
	opScan
	opRMW
	numOps
)

var opNames = [numOps]string{"read", "update", "insert", "scan", "rmw"}

// Workload is a configured YCSB workload. It is shared by the workers of a
// run; the insert counter is its only mutable state.
type Workload struct {
	cfg        Config
	mix        Mix
	dist       string
	scanMax    int
	schema     driver.Schema
	ops        []int // op codes with a positive proportion, in report order
	weights    []float64
	counter    *gen.Counter
	zipfItems  uint64
	latestBase gen.Zipfian
}

// New checks cfg and builds the workload.
func New(cfg Config) (*Workload, error) {
	cfg.Workload = strings.ToLower(cfg.Workload)
	mix, ok := Workloads[cfg.Workload]
	if !ok {
		return nil, fmt.Errorf("unknown YCSB workload %q (want a, b, c, d, e or f)", cfg.Workload)
	}
	if cfg.Records < 1 {
		return nil, fmt.Errorf("records must be at least 1")
	}
	if cfg.Fields < 1 || cfg.FieldLength < 1 {
		return nil, fmt.Errorf("fields and field length must be at least 1 (got %d and %d)", cfg.Fields, cfg.FieldLength)
	}
	dist := mix.Distribution
	if cfg.Distribution != "" {
		dist = cfg.Distribution
	}
	if !slices.Contains(Distributions, dist) {
		return nil, fmt.Errorf("unknown request distribution %q (want uniform, zipfian or latest)", dist)
	}
	scanMax := 1000
	if mix.MaxScanLength > 0 {
		scanMax = mix.MaxScanLength
	}
	if cfg.MaxScanLength < 0 {
		return nil, fmt.Errorf("max scan length must be positive")
	}
	if cfg.MaxScanLength > 0 {
		scanMax = cfg.MaxScanLength
	}
	w := &Workload{cfg: cfg, mix: mix, dist: dist, scanMax: scanMax}
	w.schema = driver.Schema{Table: "usertable", KeyColumn: "YCSB_KEY", KeyPrefix: "user", FieldLength: cfg.FieldLength}
	for i := 0; i < cfg.Fields; i++ {
		w.schema.Columns = append(w.schema.Columns, fmt.Sprintf("FIELD%d", i))
		w.schema.HashFields = append(w.schema.HashFields, fmt.Sprintf("field%d", i))
	}
	for op, p := range []float64{mix.Read, mix.Update, mix.Insert, mix.Scan, mix.ReadModifyWrite} {
		if p > 0 {
			w.ops = append(w.ops, op)
			w.weights = append(w.weights, p)
		}
	}
	w.counter = gen.NewCounter(cfg.Records)
	// YCSB sizes the zipfian space for the inserts it expects, twice over,
	// so that new records can become popular too.
	w.zipfItems = cfg.Records + uint64(float64(cfg.Operations)*mix.Insert*2)
	if dist == "latest" {
		w.latestBase = gen.NewZipfian(cfg.Records, gen.ZipfianTheta)
	}
	return w, nil
}

// Mix is the workload's operation mix.
func (w *Workload) Mix() Mix { return w.mix }

// Distribution is the request distribution in use.
func (w *Workload) Distribution() string { return w.dist }

// Name is "ycsb-" and the workload letter.
func (w *Workload) Name() string { return "ycsb-" + w.cfg.Workload }

// Schema is the usertable.
func (w *Workload) Schema() driver.Schema { return w.schema }

// NeedsScans says whether the workload scans ranges (workload e).
func (w *Workload) NeedsScans() bool { return w.mix.Scan > 0 }

// OpNames are the operation types with a positive proportion.
func (w *Workload) OpNames() []string {
	names := make([]string, len(w.ops))
	for i, op := range w.ops {
		names[i] = opNames[op]
	}
	return names
}

// LoadCount is the record count.
func (w *Workload) LoadCount() uint64 { return w.cfg.Records }

// LoadRecord is record i with random fields.
func (w *Workload) LoadRecord(i uint64, r *rand.Rand, fields [][]byte) string {
	for _, f := range fields {
		gen.FillValue(r, f)
	}
	return gen.Key(w.schema.KeyPrefix, i)
}

type keyChooser interface{ Next(*rand.Rand) uint64 }

// worker is one goroutine's state.
type worker struct {
	w      *Workload
	s      driver.Store
	r      *rand.Rand
	opPick gen.Chooser
	keys   keyChooser
	whole  bool // updates write every field
	fields [][]byte

	op      int // opRead..; the staged operation
	keynum  uint64
	field   int
	scanLen int
}

type zipfianKeys struct {
	z       gen.ScrambledZipfian
	counter *gen.Counter
}

func (k *zipfianKeys) Next(r *rand.Rand) uint64 {
	for {
		n := k.z.Next(r)
		if int64(n) <= k.counter.Last() {
			return n
		}
	}
}

type uniformKeys struct{ counter *gen.Counter }

func (k uniformKeys) Next(r *rand.Rand) uint64 {
	return r.Uint64N(uint64(k.counter.Last()) + 1)
}

// NewWorker returns a worker with its own key chooser and buffers.
func (w *Workload) NewWorker(s driver.Store, r *rand.Rand) workload.Worker {
	return w.newWorker(s, r, s.WholeRecordUpdates())
}

// newWorker is NewWorker for a store that does (whole) or does not rewrite
// whole records on update.
func (w *Workload) newWorker(s driver.Store, r *rand.Rand, whole bool) *worker {
	wk := &worker{w: w, s: s, r: r, opPick: gen.NewChooser(w.weights),
		whole: w.cfg.WriteAllFields || whole}
	switch w.dist {
	case "zipfian":
		wk.keys = &zipfianKeys{z: gen.NewScrambledZipfian(w.zipfItems), counter: w.counter}
	case "latest":
		wk.keys = gen.NewLatest(w.counter, w.latestBase)
	default:
		wk.keys = uniformKeys{counter: w.counter}
	}
	wk.fields = make([][]byte, w.cfg.Fields)
	for i := range wk.fields {
		wk.fields[i] = make([]byte, w.cfg.FieldLength)
	}
	return wk
}

func (wk *worker) Next() int {
	i := wk.opPick.Next(wk.r)
	wk.op = wk.w.ops[i]
	switch wk.op {
	case opInsert:
		wk.keynum = wk.w.counter.Next()
		for _, f := range wk.fields {
			gen.FillValue(wk.r, f)
		}
		return i
	case opScan:
		wk.scanLen = 1 + wk.r.IntN(wk.w.scanMax)
	case opUpdate, opRMW:
		wk.field = wk.r.IntN(len(wk.fields))
		if wk.whole {
			for _, f := range wk.fields {
				gen.FillValue(wk.r, f)
			}
		} else {
			gen.FillValue(wk.r, wk.fields[wk.field])
		}
	}
	wk.keynum = wk.keys.Next(wk.r)
	return i
}

func (wk *worker) update(ctx context.Context, key string) error {
	field := wk.field
	if wk.w.cfg.WriteAllFields {
		field = -1
	}
	return wk.s.Update(ctx, key, field, wk.fields)
}

func (wk *worker) read(ctx context.Context, key string) error {
	found, err := wk.s.Read(ctx, key)
	if err == nil && !found {
		err = fmt.Errorf("record %s not found", key)
	}
	return err
}

func (wk *worker) Exec(ctx context.Context) error {
	key := gen.Key(wk.w.schema.KeyPrefix, wk.keynum)
	switch wk.op {
	case opRead:
		return wk.read(ctx, key)
	case opUpdate:
		return wk.update(ctx, key)
	case opInsert:
		// Acknowledged even when it fails, or readers would wait forever
		// for it; a later read of it then fails, as in YCSB.
		defer wk.w.counter.Acknowledge(wk.keynum)
		return wk.s.Insert(ctx, key, wk.fields)
	case opScan:
		n, err := wk.s.Scan(ctx, key, wk.scanLen)
		if err == nil && n == 0 {
			err = fmt.Errorf("scan from %s returned no record", key)
		}
		return err
	case opRMW:
		if err := wk.read(ctx, key); err != nil {
			return err
		}
		return wk.update(ctx, key)
	}
	panic("unreachable")
}
