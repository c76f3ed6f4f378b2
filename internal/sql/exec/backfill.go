package exec

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// BackfillEntries reads up to limit rows of t whose record keys are in
// [start, end) (start nil: the table's first row; end nil: its last) at
// c.Txn's snapshot and calls add with each row's entry in each index of
// ixs: its key, its value, and whether it is a unique index's entry keyed
// by its values alone (tablecodec.DistinctIndexKey), with the row's
// handle and the index values for a duplicate's message. It returns the
// key the next batch starts from, the number of rows read, and done when
// the range's last row was read. The key and value belong to add.
func BackfillEntries(c *Context, t *catalog.TableInfo, ixs []*catalog.IndexInfo, start, end []byte, limit int,
	add func(ix *catalog.IndexInfo, key, value []byte, distinct bool, handle int64, vals []types.Datum) error) (next []byte, rows int, done bool, err error) {
	w := newWriter(c, t)
	prefix := tablecodec.RecordPrefix(t.ID)
	if start == nil {
		start = prefix
	}
	if end == nil {
		end = tablecodec.PrefixEnd(prefix)
	}
	kvs, err := c.Txn.Scan(c.Ctx, start, end, limit, false)
	if err != nil {
		return nil, 0, false, err
	}
	for _, e := range kvs {
		_, h, err := tablecodec.DecodeRecordKey(e.Key)
		if err != nil {
			return nil, 0, false, err
		}
		row, err := w.l.decode(h, e.Value, 0)
		if err != nil {
			return nil, 0, false, err
		}
		for _, ix := range ixs {
			vals := indexVals(ix, row)
			k, v, err := tablecodec.IndexEntry(t.ID, ix.ID, ix.Unique, keyVals(t, ix, vals), h)
			if err != nil {
				return nil, 0, false, err
			}
			if err := add(ix, k, v, tablecodec.DistinctIndexKey(ix.Unique, vals), h, vals); err != nil {
				return nil, 0, false, err
			}
		}
	}
	if len(kvs) < limit || len(kvs) == 0 {
		return nil, len(kvs), true, nil
	}
	last := kvs[len(kvs)-1].Key
	return append(append(make([]byte, 0, len(last)+1), last...), 0), len(kvs), false, nil
}

// BackfillBatch writes, in c.Txn, the entries of the indexes ixs (being
// added, in backfill) for up to limit rows of t in [start, end), read by
// BackfillEntries (which says what it returns).
//
// Rows written while every engine was at least write-only carry their
// own entries; the backfill writes every row's entry again, harmlessly. A
// row that a writer changes after this batch's snapshot makes the batch
// conflict with that writer on the entry both write (the writer deletes
// the old entry the batch writes), so one of them starts over and a stale
// entry is never left behind.
//
// A unique index's entry whose key already points to another row is a
// duplicate: the batch fails with 1062 naming the values.
func BackfillBatch(c *Context, t *catalog.TableInfo, ixs []*catalog.IndexInfo, start, end []byte, limit int) (next []byte, rows int, done bool, err error) {
	type uniqueEntry struct {
		handle int64
		value  []byte
		ix     *catalog.IndexInfo
		vals   []types.Datum
	}
	unique := map[string]uniqueEntry{}
	var uniqueKeys [][]byte
	next, rows, done, err = BackfillEntries(c, t, ixs, start, end, limit,
		func(ix *catalog.IndexInfo, k, v []byte, distinct bool, h int64, vals []types.Datum) error {
			if !distinct {
				return c.Txn.Set(k, v)
			}
			if other, ok := unique[string(k)]; ok && other.handle != h {
				return newWriter(c, t).dupErr(vals, ix.Name)
			}
			unique[string(k)] = uniqueEntry{handle: h, value: v, ix: ix, vals: vals}
			uniqueKeys = append(uniqueKeys, k)
			return nil
		})
	if err != nil || len(uniqueKeys) == 0 {
		return next, rows, done, err
	}
	found, err := c.Txn.BatchGet(c.Ctx, uniqueKeys)
	if err != nil {
		return nil, 0, false, err
	}
	for _, k := range uniqueKeys {
		u := unique[string(k)]
		if v, ok := found[string(k)]; ok {
			h, err := tablecodec.IndexEntryHandle(k, v)
			if err != nil {
				return nil, 0, false, err
			}
			if h != u.handle {
				return nil, 0, false, newWriter(c, t).dupErr(u.vals, u.ix.Name)
			}
			continue // written by a writer already
		}
		if err := c.Txn.Set(k, u.value); err != nil {
			return nil, 0, false, err
		}
	}
	return next, rows, done, nil
}

// IndexProblem is an inconsistency between a table's rows and one of its
// indexes.
type IndexProblem struct {
	Index  string
	Handle int64
	// Missing: the row has no entry. Otherwise the entry has no row, or
	// a row whose values differ.
	Missing bool
	Values  string
}

func (p IndexProblem) String() string {
	if p.Missing {
		return fmt.Sprintf("index %s has no entry for row %d (values %s)", p.Index, p.Handle, p.Values)
	}
	return fmt.Sprintf("index %s has an entry for row %d (values %s) that matches no row", p.Index, p.Handle, p.Values)
}

// CheckIndexes compares each index of ixs with the rows of t at c.Txn's
// snapshot: every row must have its entry and every entry must be a row's.
// It returns the inconsistencies found, at most max (0: no limit). One
// index at a time, the rows' expected entries are sorted in memory
// (charged to c.Mem) and merged with the index's entries as they are read.
func CheckIndexes(c *Context, t *catalog.TableInfo, ixs []*catalog.IndexInfo, max int) ([]IndexProblem, error) {
	var problems []IndexProblem
	for _, ix := range ixs {
		found, err := checkIndex(c, t, ix)
		if err != nil {
			return nil, err
		}
		problems = append(problems, found...)
		if max > 0 && len(problems) >= max {
			return problems[:max], nil
		}
	}
	return problems, nil
}

type expectedEntry struct {
	key, value []byte
	handle     int64
	vals       []types.Datum
}

func checkIndex(c *Context, t *catalog.TableInfo, ix *catalog.IndexInfo) ([]IndexProblem, error) {
	w := newWriter(c, t)
	var want []expectedEntry
	prefix := tablecodec.RecordPrefix(t.ID)
	it, err := c.Txn.Iter(c.Ctx, prefix, tablecodec.PrefixEnd(prefix), false)
	if err != nil {
		return nil, err
	}
	for it.Valid() {
		_, h, err := tablecodec.DecodeRecordKey(it.Key())
		if err != nil {
			it.Close()
			return nil, err
		}
		row, err := w.l.decode(h, it.Value(), 0)
		if err != nil {
			it.Close()
			return nil, err
		}
		vals := indexVals(ix, row)
		k, v, err := tablecodec.IndexEntry(t.ID, ix.ID, ix.Unique, keyVals(t, ix, vals), h)
		if err != nil {
			it.Close()
			return nil, err
		}
		if err := c.Mem.Consume(int64(len(k) + len(v) + 64)); err != nil {
			it.Close()
			return nil, err
		}
		want = append(want, expectedEntry{key: k, value: v, handle: h, vals: vals})
		if err := it.Next(c.Ctx); err != nil {
			it.Close()
			return nil, err
		}
	}
	it.Close()
	sort.Slice(want, func(a, b int) bool { return bytes.Compare(want[a].key, want[b].key) < 0 })

	var found []IndexProblem
	missing := func(e expectedEntry) {
		found = append(found, IndexProblem{Index: ix.Name, Handle: e.handle, Missing: true, Values: dupText(e.vals)})
	}
	p := tablecodec.IndexPrefix(t.ID, ix.ID)
	if it, err = c.Txn.Iter(c.Ctx, p, tablecodec.PrefixEnd(p), false); err != nil {
		return nil, err
	}
	defer it.Close()
	i := 0
	for it.Valid() {
		k := it.Key()
		for i < len(want) && bytes.Compare(want[i].key, k) < 0 {
			missing(want[i])
			i++
		}
		if i < len(want) && bytes.Equal(want[i].key, k) && bytes.Equal(want[i].value, it.Value()) {
			i++
		} else {
			if i < len(want) && bytes.Equal(want[i].key, k) {
				missing(want[i]) // the key points elsewhere: the row's entry is missing too
				i++
			}
			h, _ := tablecodec.IndexEntryHandle(k, it.Value())
			text := fmt.Sprintf("%x", k[len(p):])
			if vals, _, err := codec.DecodeKey(k[len(p):], len(ix.Columns)); err == nil {
				text = dupText(vals)
			}
			found = append(found, IndexProblem{Index: ix.Name, Handle: h, Values: text})
		}
		if err := it.Next(c.Ctx); err != nil {
			return nil, err
		}
	}
	for ; i < len(want); i++ {
		missing(want[i])
	}
	sort.SliceStable(found, func(a, b int) bool { return found[a].Handle < found[b].Handle })
	return found, nil
}
