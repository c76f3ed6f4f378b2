package exec

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"sync"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// rowLayout is how a table's rows are stored: the handle column (when the
// integer primary key is the handle) is not in the row value.
type rowLayout struct {
	table   *catalog.TableInfo
	ids     []int64
	fts     []*ptypes.FieldType
	kinds   []types.Kind // types.KindForFieldType of fts
	offsets []int
	width   int
	handle  int // offset of the handle column or -1
	// first is the row offset of the first stored column when the stored
	// columns are adjacent in the row (offsets[i] == first+i), else -1.
	first    int
	unsigned bool
	// origin holds, per stored column, the value of rows written before the
	// column existed (nil when every column is NULL-filled).
	origin []types.Datum

	// pruned caches the layouts that decode a subset of the columns
	// (prunedLayout), by the mask of their column offsets.
	prunedMu sync.RWMutex
	pruned   map[uint64]*rowLayout

	// digest, for a pruned layout, names the columns it decodes to a
	// snapshot refresh (kv.ReadDigest); nil for the full layout.
	digest kv.ReadDigest
}

// digestSeed seeds the hashes of rowDigest.
var digestSeed = maphash.MakeSeed()

// rowDigest is the kv.ReadDigest of a statement that uses only the stored
// columns ids of a table's rows.
type rowDigest struct{ ids []int64 }

func (d *rowDigest) Sum(value []byte) uint64 { return codec.SumColumns(digestSeed, value, d.ids) }

func (d *rowDigest) Same(other kv.ReadDigest) bool {
	o, ok := other.(*rowDigest)
	return ok && slices.Equal(d.ids, o.ids)
}

// maxPrunedLayouts bounds how many column subsets a table's layout caches.
const maxPrunedLayouts = 64

// prunedLayout returns a layout that decodes only the stored columns whose
// offsets needed marks (plan.Scan.Needed); the rows it fills hold zero
// Datums (NULL) in the other positions. The handle column, filled from the
// key, is always set. It returns l itself when nothing can be left out.
func (l *rowLayout) prunedLayout(needed []bool) *rowLayout {
	if needed == nil || len(needed) != l.width || l.width > 64 {
		return l
	}
	var mask uint64
	for i, b := range needed {
		if b {
			mask |= 1 << i
		}
	}
	l.prunedMu.RLock()
	p, ok := l.pruned[mask]
	l.prunedMu.RUnlock()
	if ok {
		return p
	}
	p = &rowLayout{table: l.table, width: l.width, handle: l.handle, unsigned: l.unsigned, first: -1}
	for i, off := range l.offsets {
		if !needed[off] {
			continue
		}
		p.ids = append(p.ids, l.ids[i])
		p.fts = append(p.fts, l.fts[i])
		p.kinds = append(p.kinds, l.kinds[i])
		p.offsets = append(p.offsets, off)
		if l.origin != nil {
			if p.origin == nil {
				p.origin = make([]types.Datum, 0, len(l.offsets))
			}
			p.origin = append(p.origin, l.origin[i])
		}
	}
	if len(p.offsets) == len(l.offsets) {
		p = l
	} else {
		p.digest = &rowDigest{ids: p.ids}
		if len(p.offsets) > 0 && p.offsets[len(p.offsets)-1]-p.offsets[0] == len(p.offsets)-1 {
			p.first = p.offsets[0] // adjacent columns: decoded in place
		}
	}
	l.prunedMu.Lock()
	if l.pruned == nil {
		l.pruned = make(map[uint64]*rowLayout)
	}
	if len(l.pruned) < maxPrunedLayouts {
		l.pruned[mask] = p
	}
	l.prunedMu.Unlock()
	return p
}

// layouts caches the layout of each table ID for the TableInfo it was built
// from (TableInfos are immutable; a DDL makes a new one, which replaces the
// entry), so the cache holds one entry per table.
var layouts sync.Map // table ID -> *rowLayout

func layoutOf(t *catalog.TableInfo) *rowLayout {
	if l, ok := layouts.Load(t.ID); ok && l.(*rowLayout).table == t {
		return l.(*rowLayout)
	}
	l := &rowLayout{table: t, width: len(t.Columns), handle: -1}
	if t.PKIsHandle {
		l.handle = t.HandleOffset
		l.unsigned = mysql.HasUnsignedFlag(t.Columns[t.HandleOffset].Type.GetFlag())
	}
	for _, c := range t.Columns {
		if c.Offset == l.handle {
			continue
		}
		l.ids = append(l.ids, c.ID)
		l.fts = append(l.fts, c.Type)
		l.kinds = append(l.kinds, types.KindForFieldType(c.Type))
		l.offsets = append(l.offsets, c.Offset)
	}
	l.first = 0
	if len(l.offsets) > 0 {
		l.first = l.offsets[0]
	}
	for i, off := range l.offsets {
		if off != l.first+i {
			l.first = -1
		}
	}
	for i, off := range l.offsets {
		c := t.Columns[off]
		if c.OriginDefault == nil {
			continue
		}
		v, err := types.Convert(types.NewString(*c.OriginDefault), c.Type)
		if err != nil {
			continue
		}
		if l.origin == nil {
			l.origin = make([]types.Datum, len(l.offsets))
		}
		l.origin[i] = v
	}
	layouts.Store(t.ID, l)
	return l
}

// encode builds the row value of a full table row.
func (l *rowLayout) encode(buf []byte, row []types.Datum) ([]byte, error) {
	if l.first >= 0 {
		// The stored columns are adjacent in the row: encode them in place.
		return codec.EncodeRow(buf, l.ids, row[l.first:l.first+len(l.offsets)])
	}
	vals := make([]types.Datum, len(l.offsets))
	for i, off := range l.offsets {
		vals[i] = row[off]
	}
	return codec.EncodeRow(buf, l.ids, vals)
}

// decode fills a full row (width+extra datums) from a row value.
func (l *rowLayout) decode(handle int64, value []byte, extra int) ([]types.Datum, error) {
	return l.decodeInto(make([]types.Datum, l.width+extra), handle, value, extra)
}

// decodeInto is decode into row, which must have width+extra zero values.
func (l *rowLayout) decodeInto(row []types.Datum, handle int64, value []byte, extra int) ([]types.Datum, error) {
	if l.first >= 0 {
		// The stored columns are adjacent in the row (the handle, if any,
		// is the first or last column): decode in place.
		vals := row[l.first : l.first+len(l.offsets)]
		copy(vals, l.origin)
		if err := codec.DecodeRowKinds(value, l.ids, l.fts, l.kinds, vals); err != nil {
			return nil, err
		}
	} else {
		var small [8]types.Datum
		var vals []types.Datum
		if len(l.offsets) <= len(small) {
			vals = small[:len(l.offsets)]
		} else {
			vals = make([]types.Datum, len(l.offsets))
		}
		copy(vals, l.origin)
		if err := codec.DecodeRowKinds(value, l.ids, l.fts, l.kinds, vals); err != nil {
			return nil, err
		}
		for i, off := range l.offsets {
			row[off] = vals[i]
		}
	}
	if l.handle >= 0 {
		if l.unsigned {
			row[l.handle] = types.NewUint(uint64(handle))
		} else {
			row[l.handle] = types.NewInt(handle)
		}
	}
	if extra > 0 {
		row[l.width] = types.NewInt(handle)
	}
	return row, nil
}

// scanExec reads the rows of one table along its access path.
type scanExec struct {
	// pointKeys are the keys of a points lookup (uniquePoints).
	pointKeys [][]byte
	// limitHinted: the first batch, sized by the plan's LimitHint, is read.
	limitHinted bool

	p      *plan.Scan
	layout *rowLayout
	extra  int
	slab   []types.Datum // zeroed datums rows are carved from

	started bool
	done    bool
	// range scans
	ranges [][2][]byte
	iter   kv.Iterator
	// cursor, when set instead of iter, reads the current range
	// (kv.FuncScanner): rows, or an index's handles, are decoded from the
	// engine's buffers as the scan reads them. visits counts its batches.
	cursor kv.ScanCursor
	visits int
	// The batch a Visit fills (decodeVisited, visitedHandle): its rows and
	// the arena their strings are copied into, or its handles; its limit.
	vrows    [][]types.Datum
	varena   []byte
	vhandles []int64
	vlimit   int
	visitRow func(key, value []byte) error
	// rowsHint, when > 0, bounds the rows the ranges left can hold (a
	// primary-key range holds at most hi-lo+1): allocations are sized by
	// it. 0 means unknown.
	rowsHint int
	// exact is set by computeRanges when every bound of a primary-key
	// range was exact (handleBound): the scan then returns exactly the rows
	// that satisfy its plan.Filter.ByRange conjuncts.
	exact bool
	// index lookups
	index bool
	// lockHandles are the handles of the rows of the batch being read, in
	// row order, in a locking scan: lock takes the keys to lock from them
	// (a row carries its handle only when the primary key is the handle or
	// the plan asks WithHandle).
	lockHandles []int64
}

func newScanExec(p *plan.Scan) *scanExec {
	s := &scanExec{p: p, layout: layoutOf(p.Table).prunedLayout(p.Needed), index: p.Access == plan.IndexLookup}
	if p.WithHandle {
		s.extra = 1
	}
	return s
}

func (s *scanExec) handleType() *ptypes.FieldType {
	if s.p.Table.PKIsHandle {
		return s.p.Table.Columns[s.p.Table.HandleOffset].Type
	}
	return ptypes.NewFieldType(mysql.TypeLonglong)
}

func (s *scanExec) Next(c *Context) ([][]types.Datum, error) {
	if s.done {
		return nil, nil
	}
	switch s.p.Access {
	case plan.PointGet, plan.BatchPointGet:
		s.done = true
		return s.pointGets(c)
	}
	if !s.started {
		s.started = true
		if err := s.computeRanges(c); err != nil {
			return nil, err
		}
		if s.pointKeys != nil {
			return s.uniquePoints(c)
		}
	}
	for {
		if s.cursor != nil {
			batch, err := s.visitBatch(c)
			if err != nil {
				return nil, err
			}
			if len(batch) > 0 {
				return batch, nil
			}
			continue
		}
		if s.iter == nil {
			if len(s.ranges) == 0 {
				s.done = true
				return nil, nil
			}
			r := s.ranges[0]
			s.ranges = s.ranges[1:]
			if fs, ok := c.Txn.(kv.FuncScanner); ok {
				cur, err := fs.ScanFunc(c.Ctx, r[0], r[1], s.p.Desc)
				if err != nil {
					return nil, err
				}
				if cur != nil {
					s.cursor, s.visits = cur, 0
					continue
				}
			}
			var it kv.Iterator
			var err error
			if si, ok := c.Txn.(kv.SizedIterer); ok && s.rowsHint > 0 && !s.index {
				it, err = si.IterSized(c.Ctx, r[0], r[1], s.p.Desc, s.rowsHint)
			} else {
				it, err = c.Txn.Iter(c.Ctx, r[0], r[1], s.p.Desc)
			}
			if err != nil {
				return nil, err
			}
			s.iter = it
		}
		batch, err := s.readBatch(c)
		if err != nil {
			return nil, err
		}
		if len(batch) > 0 {
			return batch, nil
		}
	}
}

// slabRows is how many rows to allocate for at once.
func (s *scanExec) slabRows() int {
	if s.rowsHint > 0 {
		return min(s.rowsHint, BatchSize)
	}
	return 64
}

// readBatch reads up to BatchSize rows from the current iterator, closing
// it when exhausted.
func (s *scanExec) readBatch(c *Context) ([][]types.Datum, error) {
	var rows [][]types.Datum
	if !s.index {
		rows = make([][]types.Datum, 0, s.slabRows())
	}
	var handles []int64
	want := BatchSize
	if s.p.LimitHint > 0 && !s.limitHinted {
		// The first batch: what the LIMIT above takes.
		s.limitHinted, want = true, min(s.p.LimitHint, BatchSize)
	}
	if n := s.skipLockedBatch(); n > 0 {
		want = n
	}
	for s.iter.Valid() && len(rows)+len(handles) < want {
		if s.index {
			h, err := tablecodec.IndexEntryHandle(s.iter.Key(), s.iter.Value())
			if err != nil {
				return nil, err
			}
			handles = append(handles, h)
		} else {
			row, err := s.decodeRecord(s.iter.Key(), s.iter.Value())
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
		if err := s.iter.Next(c.Ctx); err != nil {
			return nil, err
		}
	}
	if !s.iter.Valid() {
		s.iter.Close()
		s.iter = nil
	}
	return s.finishBatch(c, rows, handles)
}

// finishBatch completes a batch read: an index scan's handles are read as
// rows, and a table scan's rows are locked when the plan asks for it.
func (s *scanExec) finishBatch(c *Context, rows [][]types.Datum, handles []int64) ([][]types.Datum, error) {
	if s.index {
		return s.fetch(c, handles)
	}
	return s.lock(c, rows)
}

// decodeRecord decodes a table record into a row carved from the scan's
// slab (the rows of a batch share one).
func (s *scanExec) decodeRecord(key, value []byte) ([]types.Datum, error) {
	_, h, err := tablecodec.DecodeRecordKey(key)
	if err != nil {
		return nil, err
	}
	w := s.layout.width + s.extra
	if len(s.slab) < w {
		s.slab = make([]types.Datum, w*s.slabRows())
	}
	if s.rowsHint > 0 {
		s.rowsHint--
	}
	row, err := s.layout.decodeInto(s.slab[:w:w], h, value, s.extra)
	s.slab = s.slab[w:]
	if err == nil && s.p.Lock {
		s.lockHandles = append(s.lockHandles, h)
	}
	return row, err
}

// firstVisitRows is how many rows the first batch of a scan through a
// cursor reads when the range's size is unknown (a LIMIT may need only a
// few); later batches read BatchSize.
const firstVisitRows = 256

// noBytes is what an empty string a cursor scan decodes points to.
var noBytes = make([]byte, 0)

// visitBatch reads the next batch of rows of the current range through
// s.cursor, decoding each row as the scan hands its value over. The value
// lives in the engine's buffers only for that call, so the strings of the
// row are copied into an arena the batch's rows share: only the columns
// the plan reads (the pruned layout), not the whole key and value.
func (s *scanExec) visitBatch(c *Context) ([][]types.Datum, error) {
	limit := BatchSize
	switch {
	case s.rowsHint > 0:
		limit = min(s.rowsHint+1, BatchSize) // one more: a full answer shows the range ends
	case s.visits == 0 && s.p.LimitHint > 0:
		limit = min(s.p.LimitHint, firstVisitRows) // what the LIMIT above takes
	case s.visits == 0:
		limit = firstVisitRows
	}
	if n := s.skipLockedBatch(); n > 0 {
		limit = min(limit, n)
	}
	s.visits++
	if s.visitRow == nil {
		// Bound once per scan, not per batch.
		if s.index {
			s.visitRow = s.visitedHandle
		} else {
			s.visitRow = s.decodeVisited
		}
	}
	s.vlimit = limit
	if !s.index {
		s.vrows = make([][]types.Datum, 0, min(s.slabRows(), limit))
	}
	done, err := s.cursor.Visit(c.Ctx, limit, s.visitRow)
	rows, handles := s.vrows, s.vhandles
	s.vrows, s.varena, s.vhandles = nil, nil, nil
	if err != nil {
		return nil, err
	}
	if done {
		s.cursor = nil
	}
	return s.finishBatch(c, rows, handles)
}

// visitedHandle collects the handle of an index entry the cursor hands
// over (its rows are then read by handle, as readBatch does).
func (s *scanExec) visitedHandle(key, value []byte) error {
	h, err := tablecodec.IndexEntryHandle(key, value)
	if err != nil {
		return err
	}
	s.vhandles = append(s.vhandles, h)
	return nil
}

// decodeVisited decodes the row of a table record the cursor hands over
// into the batch being read (s.vrows).
func (s *scanExec) decodeVisited(key, value []byte) error {
	row, err := s.decodeRecord(key, value)
	if err != nil {
		return err
	}
	need := 0
	for j, d := range row {
		if !d.IsStringLike() {
			continue
		}
		if b := d.Bytes(); len(b) > 0 {
			need += len(b)
		} else {
			row[j] = d.WithBytes(noBytes) // not into value either
		}
	}
	if need > 0 {
		if cap(s.varena)-len(s.varena) < need {
			// Sized for the rows the batch may still read, at this row's
			// size, up to 32 KiB.
			s.varena = make([]byte, 0, max(need, min(need*(s.vlimit-len(s.vrows)), 32<<10)))
		}
		for j, d := range row {
			if b := d.Bytes(); len(b) > 0 {
				n := len(s.varena)
				s.varena = append(s.varena, b...)
				row[j] = d.WithBytes(s.varena[n:len(s.varena):len(s.varena)])
			}
		}
	}
	s.vrows = append(s.vrows, row)
	return nil
}

func (s *scanExec) lock(c *Context, rows [][]types.Datum) ([][]types.Datum, error) {
	if !s.p.Lock || len(rows) == 0 {
		return rows, nil
	}
	handles := s.lockHandles
	s.lockHandles = s.lockHandles[:0]
	if len(handles) != len(rows) {
		return nil, fmt.Errorf("exec: %d rows read for locking with %d handles", len(rows), len(handles))
	}
	keys := make([][]byte, len(rows))
	for i, h := range handles {
		keys[i] = tablecodec.RecordKey(s.p.Table.ID, h)
	}
	return s.lockKeys(c, rows, keys)
}

// skipLockedBatch is the size of every batch of a SKIP LOCKED read under
// a LIMIT (0: no such bound): each batch's rows are locked before the
// LIMIT above takes its share, so a batch of BatchSize after a skipped row
// would lock rows the statement never returns, which a queue's other
// consumers would then skip.
func (s *scanExec) skipLockedBatch() int {
	if s.p.LockOpts.SkipLocked && s.p.LimitHint > 0 {
		return min(s.p.LimitHint, BatchSize)
	}
	return 0
}

// lockKeys locks keys, the record keys of rows, as the plan asks (with
// its NOWAIT, SKIP LOCKED or WAIT n), and returns the rows to keep: under
// SKIP LOCKED, those whose keys it locked.
func (s *scanExec) lockKeys(c *Context, rows [][]types.Datum, keys [][]byte) ([][]types.Datum, error) {
	opts := s.p.LockOpts
	if opts == (kv.LockOptions{}) {
		return rows, c.Txn.LockKeys(c.Ctx, keys...)
	}
	ol, ok := c.Txn.(kv.OptionLocker)
	if !ok {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support 'NOWAIT, SKIP LOCKED or WAIT with this storage'")
	}
	skipped, err := ol.LockKeysWith(c.Ctx, opts, keys...)
	var re *kv.RetryableError
	if opts.NoWait && errors.As(err, &re) && re.LockWaitTimeout {
		return nil, sqlerr.New(sqlerr.ErLockNowait, "HY000", "Statement aborted because lock(s) could not be acquired immediately and NOWAIT is set.")
	}
	if err != nil || len(skipped) == 0 {
		return rows, err
	}
	skip := make(map[string]struct{}, len(skipped))
	for _, k := range skipped {
		skip[string(k)] = struct{}{}
	}
	kept := rows[:0]
	for i, r := range rows {
		if _, ok := skip[string(keys[i])]; !ok {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// fetch reads rows by handle, preserving the order of handles.
func (s *scanExec) fetch(c *Context, handles []int64) ([][]types.Datum, error) {
	if len(handles) == 0 {
		return nil, nil
	}
	if s.layout.digest != nil {
		// A snapshot refresh need only compare the columns decoded here.
		if d, ok := c.Txn.(kv.ReadDigester); ok {
			d.SetReadDigest(s.layout.digest)
			defer d.SetReadDigest(nil)
		}
	}
	if len(handles) == 1 {
		// Point get: one Get, no maps.
		key := tablecodec.RecordKey(s.p.Table.ID, handles[0])
		v, err := c.Txn.Get(c.Ctx, key)
		if errors.Is(err, kv.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		row, err := s.layout.decode(handles[0], v, s.extra)
		if err != nil {
			return nil, err
		}
		if s.p.Lock {
			return s.lockKeys(c, [][]types.Datum{row}, [][]byte{key})
		}
		return [][]types.Datum{row}, nil
	}
	keys := make([][]byte, len(handles))
	for i, h := range handles {
		keys[i] = tablecodec.RecordKey(s.p.Table.ID, h)
	}
	vals, err := c.Txn.BatchGet(c.Ctx, keys)
	if err != nil {
		return nil, err
	}
	rows := make([][]types.Datum, 0, len(handles))
	var locked [][]byte
	for i, h := range handles {
		v, ok := vals[string(keys[i])]
		if !ok {
			continue
		}
		row, err := s.layout.decode(h, v, s.extra)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
		locked = append(locked, keys[i])
	}
	if s.p.Lock && len(locked) > 0 {
		return s.lockKeys(c, rows, locked)
	}
	return rows, nil
}

// pointGets serves PointGet and BatchPointGet: parameters straight to
// Get / BatchGet.
func (s *scanExec) pointGets(c *Context) ([][]types.Datum, error) {
	ft := s.handleType()
	if len(s.p.Handles) == 1 {
		d, err := s.p.Handles[0].Eval(c.Eval, nil)
		if err != nil {
			return nil, err
		}
		h, ok := exactHandle(d, ft)
		if !ok {
			return nil, nil
		}
		return s.fetch(c, []int64{h})
	}
	handles := make([]int64, 0, len(s.p.Handles))
	seen := make(map[int64]bool, len(s.p.Handles))
	for _, e := range s.p.Handles {
		d, err := e.Eval(c.Eval, nil)
		if err != nil {
			return nil, err
		}
		h, ok := exactHandle(d, ft)
		if !ok || seen[h] {
			continue
		}
		seen[h] = true
		handles = append(handles, h)
	}
	return s.fetch(c, handles)
}

// exactHandle converts a value to the handle it equals, if any.
func exactHandle(d types.Datum, ft *ptypes.FieldType) (int64, bool) {
	switch d.Kind() {
	case types.KindInt64:
		if mysql.HasUnsignedFlag(ft.GetFlag()) && d.Int() < 0 {
			return 0, false
		}
		return d.Int(), true
	case types.KindUint64:
		return int64(d.Uint()), mysql.HasUnsignedFlag(ft.GetFlag()) || d.Uint() <= 1<<63-1
	case types.KindNull:
		return 0, false
	}
	v, err := types.Convert(d, ft)
	if err != nil {
		return 0, false
	}
	if c, err := types.Compare(v, d); err != nil || c != 0 {
		return 0, false
	}
	if v.Kind() == types.KindUint64 {
		return int64(v.Uint()), true
	}
	return v.Int(), true
}

type errString string

func (e errString) Error() string { return string(e) }

// computeRanges turns the plan's ranges into key ranges for this execution.
func (s *scanExec) computeRanges(c *Context) error {
	t := s.p.Table
	switch s.p.Access {
	case plan.TableFullScan:
		p := tablecodec.RecordPrefix(t.ID)
		s.ranges = [][2][]byte{{p, tablecodec.PrefixEnd(p)}}
		return nil
	case plan.TableRangeScan:
		ft := s.handleType()
		s.exact = true
		for _, r := range s.p.Ranges {
			lo, hi := int64(-1<<63), int64(1<<63-1)
			loIncl, hiIncl := true, true
			empty := false
			if r.Low.Value != nil {
				d, err := r.Low.Value.Eval(c.Eval, nil)
				if err != nil {
					return err
				}
				v, incl, ok, null, exact := handleBound(d, ft, r.Low.Inclusive)
				if null {
					empty = true
				} else if ok {
					lo, loIncl = v, incl
				}
				s.exact = s.exact && exact
			}
			if r.High.Value != nil {
				d, err := r.High.Value.Eval(c.Eval, nil)
				if err != nil {
					return err
				}
				v, incl, ok, null, exact := handleBound(d, ft, r.High.Inclusive)
				if null {
					empty = true
				} else if ok {
					hi, hiIncl = v, incl
				}
				s.exact = s.exact && exact
			}
			if !loIncl {
				if lo == 1<<63-1 {
					empty = true
				}
				lo++
			}
			if empty || lo > hi || (lo == hi && !hiIncl) {
				continue
			}
			start := tablecodec.RecordKey(t.ID, lo)
			var end []byte
			if hiIncl {
				if hi == 1<<63-1 {
					end = tablecodec.PrefixEnd(tablecodec.RecordPrefix(t.ID))
				} else {
					end = tablecodec.RecordKey(t.ID, hi+1)
				}
			} else {
				end = tablecodec.RecordKey(t.ID, hi)
			}
			s.ranges = append(s.ranges, [2][]byte{start, end})
			// At most hi-lo+1 rows (hi-lo when hi is exclusive).
			if span := uint64(hi) - uint64(lo); span < BatchSize {
				s.rowsHint += int(span)
				if hiIncl {
					s.rowsHint++
				}
			} else {
				s.rowsHint += BatchSize
			}
		}
		return nil
	case plan.IndexLookup:
		points := s.p.Points
		for _, r := range s.p.Ranges {
			kr, ok, err := s.indexRange(c, r)
			if err != nil {
				return err
			}
			if ok {
				s.ranges = append(s.ranges, kr)
				// A unique key with every value exact is one entry: its
				// range is [key, PrefixEnd(key)).
				points = points && bytes.Equal(kr[1], tablecodec.PrefixEnd(kr[0]))
			}
		}
		s.ranges = disjoint(s.ranges)
		if points {
			s.pointKeys = make([][]byte, len(s.ranges))
			for i, r := range s.ranges {
				s.pointKeys[i] = r[0]
			}
			s.ranges = nil
		}
		return nil
	}
	return nil
}

// uniquePoints reads the rows of a points lookup (plan.Scan.Points): the
// unique index entries in one BatchGet, then their rows by handle (locked
// for FOR UPDATE) in another.
func (s *scanExec) uniquePoints(c *Context) ([][]types.Datum, error) {
	keys := s.pointKeys
	s.pointKeys = nil
	s.done = true
	if len(keys) == 0 {
		return nil, nil
	}
	handles := make([]int64, 0, len(keys))
	if len(keys) == 1 {
		v, err := c.Txn.Get(c.Ctx, keys[0])
		if errors.Is(err, kv.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		h, err := tablecodec.IndexEntryHandle(keys[0], v)
		if err != nil {
			return nil, err
		}
		handles = append(handles, h)
	} else {
		vals, err := c.Txn.BatchGet(c.Ctx, keys)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			v, ok := vals[string(k)]
			if !ok {
				continue
			}
			h, err := tablecodec.IndexEntryHandle(k, v)
			if err != nil {
				return nil, err
			}
			handles = append(handles, h)
		}
	}
	return s.fetch(c, handles)
}

// handleBound converts a range bound to a handle. ok=false means the bound
// cannot be expressed (scan unbounded on that side: the filter above
// decides); a lossy conversion makes the bound inclusive. exact reports
// that the bound is an integer equal to the handle v, so the key range
// selects exactly the rows the comparison with d does (integers compare
// with the integer handle exactly; a float would compare as a double).
func handleBound(d types.Datum, ft *ptypes.FieldType, incl bool) (v int64, inclusive, ok, null, exact bool) {
	if d.IsNull() {
		return 0, false, false, true, true
	}
	if d.IsStringLike() || d.Kind() == types.KindTime || d.Kind() == types.KindDuration {
		return 0, false, false, false, false
	}
	cv, err := types.Convert(d, ft)
	if err != nil {
		return 0, false, false, false, false
	}
	c, err := types.Compare(cv, d)
	if err != nil {
		return 0, false, false, false, false
	}
	if c != 0 {
		incl = true
	}
	exact = c == 0 && (d.Kind() == types.KindInt64 || d.Kind() == types.KindUint64)
	if cv.Kind() == types.KindUint64 {
		if cv.Uint() > 1<<63-1 {
			return 0, false, false, false, false
		}
		return int64(cv.Uint()), incl, true, false, exact
	}
	return cv.Int(), incl, true, false, exact
}

// indexValue converts a value for an index column; exact=false when the
// key order of the converted value cannot stand for the SQL comparison.
func indexValue(d types.Datum, ft *ptypes.FieldType) (v types.Datum, exact, usable bool) {
	switch types.KindForFieldType(ft) {
	case types.KindString, types.KindBytes:
		if !d.IsStringLike() {
			return d, false, false
		}
	case types.KindTime:
		if !d.IsStringLike() && d.Kind() != types.KindTime {
			return d, false, false
		}
	case types.KindDuration:
		if !d.IsStringLike() && d.Kind() != types.KindDuration {
			return d, false, false
		}
	default:
		if d.IsStringLike() || d.Kind() == types.KindTime || d.Kind() == types.KindDuration {
			return d, false, false
		}
	}
	cv, err := types.Convert(d, ft)
	if err != nil {
		return d, false, false
	}
	c, err := types.Compare(cv, d)
	if err != nil {
		return d, false, false
	}
	return cv, c == 0, true
}

func (s *scanExec) indexRange(c *Context, r plan.Range) ([2][]byte, bool, error) {
	t, ix := s.p.Table, s.p.Index
	prefix := tablecodec.IndexPrefix(t.ID, ix.ID)
	for i, e := range r.Eq {
		d, err := e.Eval(c.Eval, nil)
		if err != nil {
			return [2][]byte{}, false, err
		}
		if d.IsNull() {
			return [2][]byte{}, false, nil
		}
		ft := t.Columns[ix.Columns[i]].Type
		v, exact, usable := indexValue(d, ft)
		if !usable || !exact {
			// Scan everything under the exact prefix so far.
			return [2][]byte{prefix, tablecodec.PrefixEnd(prefix)}, true, nil
		}
		if prefix, err = codec.EncodeKey(prefix, types.IndexKeyValue(v, types.CollationOf(ft))); err != nil {
			return [2][]byte{}, false, err
		}
	}
	start, end := prefix, tablecodec.PrefixEnd(prefix)
	if r.Low.Value == nil && r.High.Value == nil {
		return [2][]byte{start, end}, true, nil
	}
	ft := t.Columns[ix.Columns[len(r.Eq)]].Type
	coll := types.CollationOf(ft)
	if r.Low.Value != nil {
		d, err := r.Low.Value.Eval(c.Eval, nil)
		if err != nil {
			return [2][]byte{}, false, err
		}
		if d.IsNull() {
			return [2][]byte{}, false, nil
		}
		if v, exact, usable := indexValue(d, ft); usable {
			k, err := codec.EncodeKey(append([]byte(nil), prefix...), types.IndexKeyValue(v, coll))
			if err != nil {
				return [2][]byte{}, false, err
			}
			if r.Low.Inclusive || !exact {
				start = k
			} else {
				start = tablecodec.PrefixEnd(k)
			}
		}
	} else {
		// col < x must not return NULLs; they sort first: skip them.
		k, err := codec.EncodeKey(append([]byte(nil), prefix...), types.Null)
		if err != nil {
			return [2][]byte{}, false, err
		}
		start = tablecodec.PrefixEnd(k)
	}
	if r.High.Value != nil {
		d, err := r.High.Value.Eval(c.Eval, nil)
		if err != nil {
			return [2][]byte{}, false, err
		}
		if d.IsNull() {
			return [2][]byte{}, false, nil
		}
		if v, exact, usable := indexValue(d, ft); usable {
			k, err := codec.EncodeKey(append([]byte(nil), prefix...), types.IndexKeyValue(v, coll))
			if err != nil {
				return [2][]byte{}, false, err
			}
			if r.High.Inclusive || !exact {
				end = tablecodec.PrefixEnd(k)
			} else {
				end = k
			}
		}
	}
	if string(start) >= string(end) && end != nil {
		return [2][]byte{}, false, nil
	}
	return [2][]byte{start, end}, true, nil
}

// disjoint sorts key ranges and merges overlapping ones, so that an IN list
// with repeated or overlapping values reads every entry once.
func disjoint(rs [][2][]byte) [][2][]byte {
	if len(rs) < 2 {
		return rs
	}
	sort.Slice(rs, func(i, j int) bool { return bytes.Compare(rs[i][0], rs[j][0]) < 0 })
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if last[1] == nil || bytes.Compare(r[0], last[1]) < 0 {
			if last[1] != nil && (r[1] == nil || bytes.Compare(r[1], last[1]) > 0) {
				last[1] = r[1]
			}
			continue
		}
		out = append(out, r)
	}
	return out
}
