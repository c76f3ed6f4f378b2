package exec

// Spilling to disk.
//
// Operators that hold rows (hash aggregation, hash join, nested loop,
// sort, DISTINCT, set operations, window functions, recursive CTEs, a
// result being spooled) charge them to the statement's MemTracker. When a charge takes the
// statement past its quota and spilling is allowed (Context.NoSpill false,
// tidb_enable_tmp_storage_on_oom), the operator moves rows to temporary
// files instead of failing:
//
//   - sort writes its rows as a sorted run and starts the next one; at the
//     end the runs are merged (mergeRuns), at most maxMergeFanIn at a time;
//   - hash aggregation keeps the groups it holds and writes the input rows
//     of groups it does not hold to one of spillPartitions files by the
//     hash of their group key; each file is then aggregated on its own
//     (a group's rows all land in one file);
//   - hash join moves its build side to partition files by the hash of
//     the join key, writes the probe side to files partitioned alike, and
//     joins partition by partition;
//   - DISTINCT (and UNION, a DISTINCT over UNION ALL) writes rows whose
//     key it does not hold to partition files and deduplicates each file on
//     its own;
//   - EXCEPT and INTERSECT partition both inputs' rows of keys not held
//     (setopspill.go); a nested loop moves its inner rows to one file
//     (joinspill.go); window functions sort by window externally and
//     compute partitions larger than the quota from a file
//     (windowspill.go); a recursive CTE moves its earlier rounds to a file
//     (cte.go); QuerySpooled moves a result to a file (Spool).
//
// A partition that still does not fit is partitioned again with another
// hash seed, at most maxSpillDepth times; past that (one join key or one
// run holding more than the quota) the statement fails with 8175 as it
// would without spilling.
//
// Rows are written with the memcomparable key codec (codec.EncodeKey),
// which records every value's kind, so a row reads back exactly as it was
// written. Files live in Context.TmpDir (the node's data directory's tmp
// subdirectory, emptied when the node starts) or os.TempDir; each is
// removed when its operator has read it, and Context.Close removes any
// left when a statement ends early (an error, a LIMIT).

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

const (
	// spillPartitions is how many files a hash operator spreads its
	// spilled rows over.
	spillPartitions = 16
	// maxSpillDepth bounds how many times a partition is partitioned
	// again.
	maxSpillDepth = 4
	// maxMergeFanIn is the most sorted runs merged at once.
	maxMergeFanIn = 64
	// minSortRun is the fewest rows a sort writes as one run: below it
	// the sort keeps collecting past the quota, so that a statement whose
	// other operators hold the quota does not write a file per row.
	minSortRun = 256
	// minSpillHeld is the least an operator holds before it spills
	// (memAcct.grow).
	minSpillHeld = 64 << 10
)

// spillCounters count, for the whole process, the temporary files
// statements created and the bytes written to them (SpillStats).
var spillCounters struct {
	files, bytes atomic.Int64
}

// SpillStats returns how many temporary files statements past their
// memory quota have created since the process started, and how many bytes
// they wrote to them (counted when a file is removed).
func SpillStats() (files, bytes int64) {
	return spillCounters.files.Load(), spillCounters.bytes.Load()
}

// tmpFiles are the temporary files of one statement.
type tmpFiles struct {
	used    atomic.Bool // a file or closer was registered
	mu      sync.Mutex
	files   map[*os.File]struct{}
	closers []func()
}

// Close ends what the statement's operators left running (parallel
// workers) and removes its temporary files that are still there. The
// session calls it when a statement ends.
func (c *Context) Close() {
	if !c.tmp.used.Load() {
		return
	}
	c.tmp.mu.Lock()
	closers := c.tmp.closers
	c.tmp.closers = nil
	c.tmp.mu.Unlock()
	for _, f := range closers {
		f()
	}
	c.tmp.mu.Lock()
	defer c.tmp.mu.Unlock()
	for f := range c.tmp.files {
		f.Close()
		os.Remove(f.Name())
	}
	c.tmp.files = nil
}

// canSpill reports whether operators may spill past the quota.
func (c *Context) canSpill() bool { return !c.NoSpill }

// spillFile is a temporary file of rows.
type spillFile struct {
	f     *os.File
	w     *bufio.Writer
	rows  int64
	bytes int64
	buf   []byte
}

func spillErr(err error) error {
	return sqlerr.New(sqlerr.ErUnknown, "HY000", "cannot write a temporary file for a statement over its memory quota: %v", err)
}

// newSpillFile creates a temporary file for the statement.
func (c *Context) newSpillFile() (*spillFile, error) {
	dir := c.TmpDir
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, spillErr(err)
	}
	f, err := os.CreateTemp(dir, "strata-spill-*")
	if err != nil {
		return nil, spillErr(err)
	}
	spillCounters.files.Add(1)
	c.tmp.used.Store(true)
	c.tmp.mu.Lock()
	if c.tmp.files == nil {
		c.tmp.files = map[*os.File]struct{}{}
	}
	c.tmp.files[f] = struct{}{}
	c.tmp.mu.Unlock()
	return &spillFile{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// write appends a row.
func (s *spillFile) write(row []types.Datum) error {
	b := binary.AppendUvarint(s.buf[:0], uint64(len(row)))
	b, err := codec.EncodeKey(b, row...)
	if err != nil {
		return err
	}
	var n [binary.MaxVarintLen64]byte
	hdr := binary.PutUvarint(n[:], uint64(len(b)))
	if _, err := s.w.Write(n[:hdr]); err != nil {
		return spillErr(err)
	}
	if _, err := s.w.Write(b); err != nil {
		return spillErr(err)
	}
	s.buf = b
	s.rows++
	s.bytes += int64(hdr + len(b))
	return nil
}

// remove deletes the file.
func (s *spillFile) remove(c *Context) {
	spillCounters.bytes.Add(s.bytes)
	c.tmp.mu.Lock()
	delete(c.tmp.files, s.f)
	c.tmp.mu.Unlock()
	s.f.Close()
	os.Remove(s.f.Name())
}

// spillReader reads a spillFile's rows back in the order written.
type spillReader struct {
	file *spillFile
	r    *bufio.Reader
}

// reader flushes the file and returns a reader from its start.
func (s *spillFile) reader() (*spillReader, error) {
	if err := s.w.Flush(); err != nil {
		return nil, spillErr(err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, spillErr(err)
	}
	return &spillReader{file: s, r: bufio.NewReaderSize(s.f, 64<<10)}, nil
}

// readerAt flushes the file and returns a reader from its start that
// reads at offsets of its own (io.SectionReader), so that several read
// the file at once.
func (s *spillFile) readerAt() (*spillReader, error) {
	if err := s.w.Flush(); err != nil {
		return nil, spillErr(err)
	}
	return &spillReader{file: s, r: bufio.NewReaderSize(io.NewSectionReader(s.f, 0, s.bytes), 16<<10)}, nil
}

// next returns the next row, or nil at the end.
// batch reads up to BatchSize rows (nil when none is left); end reports
// that the file is read to its end.
func (r *spillReader) batch() (out [][]types.Datum, end bool, err error) {
	for len(out) < BatchSize {
		row, err := r.next()
		if err != nil {
			return nil, false, err
		}
		if row == nil {
			return out, true, nil
		}
		out = append(out, row)
	}
	return out, false, nil
}

func (r *spillReader) next() ([]types.Datum, error) {
	n, err := binary.ReadUvarint(r.r)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, spillErr(err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		return nil, spillErr(err)
	}
	cols, rest := binary.Uvarint(b)
	if rest <= 0 {
		return nil, spillErr(codec.ErrCorrupt)
	}
	row, _, err := codec.DecodeKey(b[rest:], int(cols))
	if err != nil {
		return nil, spillErr(err)
	}
	if row == nil {
		row = []types.Datum{}
	}
	return row, nil
}

// spillScan is an Executor over a spilled file; it removes the file once
// read to the end.
type spillScan struct {
	file *spillFile
	r    *spillReader
	done bool
}

func (s *spillScan) Next(c *Context) ([][]types.Datum, error) {
	if s.done {
		return nil, nil
	}
	if s.r == nil {
		r, err := s.file.reader()
		if err != nil {
			return nil, err
		}
		s.r = r
	}
	if err := c.Ctx.Err(); err != nil {
		return nil, err
	}
	out, end, err := s.r.batch()
	if err != nil {
		return nil, err
	}
	if end {
		s.done = true
		s.file.remove(c)
	}
	return out, nil
}

// partitions is a set of spill files rows are spread over by key hash.
type partitions struct {
	seed  maphash.Seed
	files [spillPartitions]*spillFile
}

func newPartitions() *partitions { return &partitions{seed: maphash.MakeSeed()} }

// of returns the partition of a key.
func (p *partitions) of(key []byte) int {
	return int(maphash.Bytes(p.seed, key) % spillPartitions)
}

// write appends row to partition i.
func (p *partitions) write(c *Context, i int, row []types.Datum) error {
	if p.files[i] == nil {
		f, err := c.newSpillFile()
		if err != nil {
			return err
		}
		p.files[i] = f
	}
	return p.files[i].write(row)
}

// bytes is the size of everything written.
func (p *partitions) bytes() int64 {
	var n int64
	for _, f := range p.files {
		if f != nil {
			n += f.bytes
		}
	}
	return n
}

// memAcct is what one operator holds of the statement's quota, and how
// much it spilled (EXPLAIN ANALYZE shows both).
type memAcct struct {
	held, peak int64
	disk       int64 // bytes written to temporary files
}

// grow charges n bytes; over is true when the statement is now past its
// quota (the charge stays: the caller spills and calls release, or fails).
// When the operator may spill, it is over only once it holds minSpillHeld
// itself: an operator whose consumer (or producer) holds nearly the whole
// quota keeps going a little past it rather than spilling a handful of
// rows at a time, which would take a spilled partition's recursion to its
// depth limit without making it smaller.
func (a *memAcct) grow(c *Context, n int64) (over bool) {
	a.held += n
	if a.held > a.peak {
		a.peak = a.held
	}
	if c.Mem.charge(n) {
		return false
	}
	return !c.canSpill() || a.held >= minSpillHeld
}

// release gives back everything the operator holds.
func (a *memAcct) release(c *Context) {
	c.Mem.Release(a.held)
	a.held = 0
}

// memStater is an executor that reports its memory and disk use.
type memStater interface {
	memStats() (peak, disk int64)
}

func (a *memAcct) memStats() (peak, disk int64) { return a.peak, a.disk }

// Spool holds the rows of a query's result past what the statement's
// quota holds, in a temporary file, for the caller to read after the
// statement has ended (the MySQL front end sends a result while reading
// it). The caller must Close it.
type Spool struct {
	file *spillFile
	r    *spillReader
	n    int64
}

// QuerySpooled is Query for a caller that reads a large result as a
// stream: once the rows take the statement past its quota (and it may
// spill), they all move to a Spool, so that the operators still running
// have the quota, and the rest follow there. rows are those held in
// memory (none when spooled).
func QuerySpooled(c *Context, p plan.Plan) (rows [][]types.Datum, sp *Spool, err error) {
	e, err := Build(p)
	if err != nil {
		return nil, nil, err
	}
	var acct memAcct
	defer func() {
		if err != nil && sp != nil {
			sp.file.remove(c)
			sp = nil
		}
	}()
	for {
		if err := c.Ctx.Err(); err != nil {
			return nil, sp, err
		}
		batch, err := e.Next(c)
		if err != nil {
			return nil, sp, err
		}
		if batch == nil {
			break
		}
		if sp != nil {
			for _, r := range batch {
				if err := sp.file.write(r); err != nil {
					return nil, sp, err
				}
			}
			continue
		}
		for _, r := range batch {
			// Fewer than minSortRun rows stay in memory past the quota,
			// as a sort's run does: a statement whose operators hold the
			// quota still answers a small result from memory.
			if acct.grow(c, RowSize(r)) && sp == nil && (!c.canSpill() || len(rows) >= minSortRun) {
				if !c.canSpill() {
					return nil, nil, c.Mem.overErr()
				}
				f, err := c.newSpillFile()
				if err != nil {
					return nil, nil, err
				}
				sp = &Spool{file: f}
				for _, r := range rows {
					if err := f.write(r); err != nil {
						return nil, sp, err
					}
				}
				rows = nil
				acct.release(c)
			}
			if sp != nil {
				if err := sp.file.write(r); err != nil {
					return nil, sp, err
				}
				continue
			}
			rows = append(rows, r)
		}
	}
	if sp == nil {
		return rows, nil, nil
	}
	// The file outlives the statement: Close removes it.
	c.tmp.mu.Lock()
	delete(c.tmp.files, sp.file.f)
	c.tmp.mu.Unlock()
	r, err := sp.file.reader()
	if err != nil {
		sp.Close()
		return nil, nil, err
	}
	sp.r, sp.n = r, sp.file.rows
	return nil, sp, nil
}

// Len is the number of rows in the spool.
func (s *Spool) Len() int64 {
	if s == nil {
		return 0
	}
	return s.n
}

// Next returns the next batch of rows, nil at the end.
func (s *Spool) Next() ([][]types.Datum, error) {
	if s == nil || s.r == nil {
		return nil, nil
	}
	out, _, err := s.r.batch()
	return out, err
}

// Close removes the spool's file.
func (s *Spool) Close() {
	if s == nil || s.file == nil {
		return
	}
	spillCounters.bytes.Add(s.file.bytes)
	s.file.f.Close()
	os.Remove(s.file.f.Name())
	s.file, s.r = nil, nil
}
