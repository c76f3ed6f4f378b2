package exec

import (
	"bytes"
	"errors"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// writer maintains a table's rows and index entries in the statement buffer.
type writer struct {
	c *Context
	t *catalog.TableInfo
	l *rowLayout
	// deferPK: the row being inserted leaves its primary key's uniqueness
	// check to the commit (canDeferDupCheck).
	deferPK bool
	gen     bool  // the table has generated columns (generated.go)
	depth   int   // foreign key cascade depth (fk.go)
	current int64 // handle of the row whose foreign key actions run
	// scratch holds the encoding of an updated row's old value, which is
	// only compared with the new one.
	scratch []byte
	// generated: completeRow allocated the handle of the row it completed.
	generated bool
}

func newWriter(c *Context, t *catalog.TableInfo) *writer {
	return &writer{c: c, t: t, l: layoutOf(t), gen: hasGenerated(t)}
}

func indexVals(ix *catalog.IndexInfo, row []types.Datum) []types.Datum {
	vals := make([]types.Datum, len(ix.Columns))
	for i, off := range ix.Columns {
		vals[i] = row[off]
		if i < len(ix.Lengths) && ix.Lengths[i] > 0 {
			vals[i] = prefixOf(vals[i], ix.Lengths[i])
		}
	}
	return vals
}

// keyVals returns the values an index entry encodes for vals (from
// indexVals, or a prefix of them): text of a column under a non-binary collation becomes its
// sort key (types.IndexKeyValue). vals itself is returned, not copied,
// when no column of ix is collated, and is never modified: callers still
// show it in 1062 messages.
func keyVals(t *catalog.TableInfo, ix *catalog.IndexInfo, vals []types.Datum) []types.Datum {
	var out []types.Datum
	for i := range vals {
		coll := types.CollationOf(t.Columns[ix.Columns[i]].Type)
		if coll == nil || vals[i].Kind() != types.KindString {
			continue
		}
		if out == nil {
			out = append([]types.Datum(nil), vals...)
		}
		out[i] = types.IndexKeyValue(vals[i], coll)
	}
	if out == nil {
		return vals
	}
	return out
}

// prefixOf cuts a string to n characters (a binary string to n bytes).
func prefixOf(d types.Datum, n int) types.Datum {
	b := d.Bytes()
	switch d.Kind() {
	case types.KindBytes:
		if len(b) > n {
			return types.NewBytes(b[:n])
		}
	case types.KindString:
		chars := 0
		for i := range string(b) {
			if chars == n {
				return types.NewStringBytes(b[:i])
			}
			chars++
		}
	}
	return d
}

func (w *writer) putRow(handle int64, row []types.Datum) error {
	v, err := w.l.encode(nil, row)
	if err != nil {
		return err
	}
	if err := w.stage(tablecodec.RecordKey(w.t.ID, handle), v, w.deferPK); err != nil {
		return err
	}
	for _, ix := range w.t.WritableIndexes() {
		k, val, err := tablecodec.IndexEntry(w.t.ID, ix.ID, ix.Unique, keyVals(w.t, ix, indexVals(ix, row)), handle)
		if err != nil {
			return err
		}
		if err := w.set(k, val); err != nil {
			return err
		}
	}
	return nil
}

// set stages a write, charging it to the statement's memory quota.
func (w *writer) set(k, v []byte) error { return w.stage(k, v, false) }

// stage is set; with insert, the commit checks that k has no value
// (StmtBuffer.Insert).
func (w *writer) stage(k, v []byte, insert bool) error {
	if err := w.c.Mem.Consume(int64(len(k) + len(v) + 64)); err != nil {
		return err
	}
	if insert {
		w.c.Writes.Insert(k, v)
	} else {
		w.c.Writes.Set(k, v)
	}
	return nil
}

func (w *writer) removeRow(handle int64, row []types.Datum) error {
	w.c.Writes.Delete(tablecodec.RecordKey(w.t.ID, handle))
	for _, ix := range w.t.DeletableIndexes() {
		if err := w.removeEntry(ix, indexVals(ix, row), handle); err != nil {
			return err
		}
	}
	return nil
}

// removeEntry deletes the entry of row handle in ix. The entry of a unique
// index is keyed by the values alone; while the index is being added, that
// key may hold another row's entry (rows that existed before the index
// are not yet checked for duplicates: the backfill finds them), and then
// it is left alone. An entry that is not there is deleted all the same:
// the delete makes a backfill that read the row before it conflict with
// this write instead of writing the entry of a row that is gone.
func (w *writer) removeEntry(ix *catalog.IndexInfo, vals []types.Datum, handle int64) error {
	k, _, err := tablecodec.IndexEntry(w.t.ID, ix.ID, ix.Unique, keyVals(w.t, ix, vals), handle)
	if err != nil {
		return err
	}
	if ix.State != catalog.StatePublic && tablecodec.DistinctIndexKey(ix.Unique, vals) {
		v, err := w.c.Writes.Get(w.c.Ctx, k)
		if err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		if err == nil {
			if h, err := tablecodec.IndexEntryHandle(k, v); err != nil || h != handle {
				return err
			}
		}
	}
	w.c.Writes.Delete(k)
	return nil
}

// getRow reads a row by handle through the statement buffer.
func (w *writer) getRow(handle int64) ([]types.Datum, error) {
	v, err := w.c.Writes.Get(w.c.Ctx, tablecodec.RecordKey(w.t.ID, handle))
	if err != nil {
		return nil, err
	}
	return w.l.decode(handle, v, 0)
}

func dupText(vals []types.Datum) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = string(v.AppendText(nil))
	}
	return strings.Join(parts, "-")
}

func (w *writer) dupErr(vals []types.Datum, key string) error {
	return sqlerr.New(sqlerr.ErDupEntry, "23000", "Duplicate entry '%s' for key '%s.%s'", dupText(vals), w.t.Name, key)
}

// conflict finds a row other than self that a new row with this handle and
// these values would collide with (primary key or unique index). dup is the
// 1062 error describing the collision and other the colliding row's handle;
// err is a storage failure.
func (w *writer) conflict(handle int64, row []types.Datum, self int64) (other int64, dup, err error) {
	if w.t.PKIsHandle && handle != self && !w.deferPK {
		_, err := w.c.Writes.Get(w.c.Ctx, tablecodec.RecordKey(w.t.ID, handle))
		if err == nil {
			return handle, w.dupErr([]types.Datum{row[w.t.HandleOffset]}, "PRIMARY"), nil
		}
		if !errors.Is(err, kv.ErrNotFound) {
			return 0, nil, err
		}
	}
	for _, ix := range w.t.WritableIndexes() {
		vals := indexVals(ix, row)
		if !tablecodec.DistinctIndexKey(ix.Unique, vals) {
			continue
		}
		k, _, err := tablecodec.IndexEntry(w.t.ID, ix.ID, true, keyVals(w.t, ix, vals), handle)
		if err != nil {
			return 0, nil, err
		}
		v, err := w.c.Writes.Get(w.c.Ctx, k)
		if errors.Is(err, kv.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		h, err := tablecodec.IndexEntryHandle(k, v)
		if err != nil {
			return 0, nil, err
		}
		if h == self {
			continue
		}
		name := ix.Name
		if ix.Primary {
			name = "PRIMARY"
		}
		if ix.State != catalog.StatePublic {
			// An index being added enforces uniqueness, but REPLACE and
			// ON DUPLICATE KEY UPDATE do not act on a key users cannot
			// see yet: the statement fails.
			return 0, nil, w.dupErr(vals, name)
		}
		return h, w.dupErr(vals, name), nil
	}
	return 0, nil, nil
}

const noHandle = int64(-1 << 63)

func (w *writer) handleOf(row []types.Datum) int64 {
	d := row[w.t.HandleOffset]
	if d.Kind() == types.KindUint64 {
		return int64(d.Uint())
	}
	return d.Int()
}

// updateRow replaces old with new for the row at handle, keeping indexes
// and uniqueness. It reports whether anything changed.
func (w *writer) updateRow(handle int64, old, new []types.Datum) (bool, error) {
	ov, err := w.l.encode(w.scratch[:0], old)
	if err != nil {
		return false, err
	}
	w.scratch = ov
	nv, err := w.l.encode(nil, new)
	if err != nil {
		return false, err
	}
	newHandle := handle
	if w.t.PKIsHandle {
		newHandle = w.handleOf(new)
	}
	if newHandle == handle && bytes.Equal(ov, nv) {
		return false, nil
	}
	if newHandle != handle {
		if err := w.removeRow(handle, old); err != nil {
			return false, err
		}
		if _, dup, err := w.conflict(newHandle, new, noHandle); err != nil || dup != nil {
			if err == nil {
				err = dup
			}
			return false, err
		}
		return true, w.putRow(newHandle, new)
	}
	for _, ix := range w.t.DeletableIndexes() {
		oldVals := indexVals(ix, old)
		ok, _, err := tablecodec.IndexEntry(w.t.ID, ix.ID, ix.Unique, keyVals(w.t, ix, oldVals), handle)
		if err != nil {
			return false, err
		}
		nk, nval, err := tablecodec.IndexEntry(w.t.ID, ix.ID, ix.Unique, keyVals(w.t, ix, indexVals(ix, new)), handle)
		if err != nil {
			return false, err
		}
		if bytes.Equal(ok, nk) {
			continue
		}
		if err := w.removeEntry(ix, oldVals, handle); err != nil {
			return false, err
		}
		if !ix.State.Writable() {
			continue
		}
		if vals := indexVals(ix, new); tablecodec.DistinctIndexKey(ix.Unique, vals) {
			if _, err := w.c.Writes.Get(w.c.Ctx, nk); err == nil {
				name := ix.Name
				if ix.Primary {
					name = "PRIMARY"
				}
				return false, w.dupErr(vals, name)
			} else if !errors.Is(err, kv.ErrNotFound) {
				return false, err
			}
		}
		if err := w.set(nk, nval); err != nil {
			return false, err
		}
	}
	return true, w.set(tablecodec.RecordKey(w.t.ID, handle), nv)
}

// touchOnUpdate sets the ON UPDATE CURRENT_TIMESTAMP columns that the
// statement does not assign, when the row changes.
func (w *writer) touchOnUpdate(old, upd []types.Datum, assigns []plan.Assign) error {
	var cols []*catalog.ColumnInfo
	for _, c := range w.t.Columns {
		if c.OnUpdateNow {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		return nil
	}
	changed := false
	for i := range old {
		if c, err := types.Compare(old[i], upd[i]); err != nil || c != 0 || old[i].IsNull() != upd[i].IsNull() {
			changed = true
			break
		}
	}
	if !changed {
		return nil
	}
next:
	for _, c := range cols {
		for _, a := range assigns {
			if a.Offset == c.Offset {
				continue next
			}
		}
		t, err := types.TimeFromGo(w.c.Eval.Now, c.Type.GetType(), c.Type.GetDecimal())
		if err != nil {
			return err
		}
		upd[c.Offset] = types.NewTime(t)
	}
	return nil
}

// DefaultValue is the value a column takes when an INSERT omits it (ok=false
// when it has none and is NOT NULL: MySQL error 1364 in strict mode).
func DefaultValue(c *Context, col *catalog.ColumnInfo) (types.Datum, bool, error) {
	switch {
	case col.DefaultNow:
		ft := col.Type
		t, err := types.TimeFromGo(c.Eval.Now, ft.GetType(), ft.GetDecimal())
		if err != nil {
			return types.Null, false, err
		}
		return types.NewTime(t), true, nil
	case col.HasDefault && !col.DefaultNull:
		v, err := types.Convert(types.NewString(col.Default), col.Type)
		return v, true, err
	case col.HasDefault, !col.NotNull, col.AutoIncrement:
		return types.Null, true, nil
	}
	return types.Null, false, nil
}

// autoRandom puts shard bits above an allocated id, below the sign bit:
// TiDB's AUTO_RANDOM. The shard comes from the transaction's start
// timestamp, so one transaction's rows share a shard (and usually a
// region, keeping one-phase commits) while consecutive transactions
// scatter over 2^bits ranges of the key space.
func autoRandom(id int64, bits int, startTS uint64) int64 {
	x := startTS * 0x9E3779B97F4A7C15 // Fibonacci hashing
	shard := int64(x >> (64 - bits))
	return shard<<(63-bits) | id&(1<<(63-bits)-1)
}

// completeRow converts a candidate row to the column types, fills AUTO_INCREMENT
// and checks NOT NULL. rowNum is 1-based for error messages.
func (w *writer) completeRow(row []types.Datum, rowNum int) error {
	w.generated = false
	for i, col := range w.t.Columns {
		if w.gen && col.IsGenerated() {
			continue
		}
		v, err := types.ConvertColumn(row[i], col.Type, col.Name, rowNum)
		if err != nil {
			return err
		}
		row[i] = v
		if col.AutoIncrement {
			if v.IsNull() || (v.Kind() == types.KindInt64 && v.Int() == 0) || (v.Kind() == types.KindUint64 && v.Uint() == 0) {
				id, err := w.c.IDs.Alloc(w.c.Ctx, w.t)
				if err != nil {
					return err
				}
				if col.AutoRandomBits > 0 {
					id = autoRandom(id, col.AutoRandomBits, w.c.Txn.StartTS())
				}
				if mysql.HasUnsignedFlag(col.Type.GetFlag()) {
					row[i] = types.NewUint(uint64(id))
				} else {
					row[i] = types.NewInt(id)
				}
				if w.c.LastInsertID == 0 {
					w.c.LastInsertID = uint64(id)
				}
				w.generated = w.t.PKIsHandle && i == w.t.HandleOffset
			} else {
				n, err := v.ToInt64()
				if err == nil {
					if col.AutoRandomBits > 0 {
						n &= 1<<(63-col.AutoRandomBits) - 1 // the allocator counts below the shard bits
					}
					if err := w.c.IDs.Rebase(w.c.Ctx, w.t, n); err != nil {
						return err
					}
					// The OK packet's insert id is the explicit value
					// when no value was generated (LAST_INSERT_ID() is
					// not changed), as in MySQL.
					if w.c.ExplicitInsertID == 0 && n > 0 {
						w.c.ExplicitInsertID = uint64(n)
					}
				}
			}
		}
		if row[i].IsNull() && col.NotNull {
			return sqlerr.New(sqlerr.ErBadNull, "23000", "Column '%s' cannot be null", col.Name)
		}
	}
	return w.generate(row)
}

// prefetchHandles reads, in one batch, the rows a multi-row INSERT
// (VALUES lists, INSERT ... SELECT, LOAD DATA) into a table clustered on
// its integer key would collide with, so that the primary key check of
// each row does not make a round trip.
func (w *writer) prefetchHandles(p *plan.Insert, rows [][]types.Datum) error {
	if !w.t.PKIsHandle || len(rows) < 2 {
		return nil
	}
	j := -1
	for i, off := range p.Targets {
		if off == w.t.HandleOffset {
			j = i
		}
	}
	if j < 0 {
		return nil
	}
	ft := w.t.Columns[w.t.HandleOffset].Type
	keys := make([][]byte, 0, len(rows))
	for _, r := range rows {
		v, err := types.Convert(r[j], ft)
		if err != nil || v.IsNull() {
			continue
		}
		var h int64
		switch v.Kind() {
		case types.KindInt64:
			h = v.Int()
		case types.KindUint64:
			h = int64(v.Uint())
		default:
			continue
		}
		keys = append(keys, tablecodec.RecordKey(w.t.ID, h))
	}
	return w.c.Writes.Prefetch(w.c.Ctx, keys)
}

// generatedReadAhead bounds how many generated handles one read ahead
// covers (prefetchGenerated).
const generatedReadAhead = 1024

// prefetchGenerated reads ahead, in one batch, the rows that the handles
// about to be generated would collide with, when the handle h just
// generated for a row of a multi-row INSERT was not read already; rows is
// the number of rows still to insert, this one included. The allocator
// hands out consecutive ids (AUTO_RANDOM keeps the shard bits of the
// transaction), so the next handles are guessed as h+1, h+2, ...: nothing
// is allocated ahead, rows are still completed and inserted one at a time
// in order, and a wrong guess (another session took some of the ids, or
// the allocator moved to a new batch) only costs reads of keys the
// statement does not use, at its own snapshot. A failed read ahead is not
// an error of the statement: each row's own check reads its key again.
func (w *writer) prefetchGenerated(h int64, rows int) {
	key := tablecodec.RecordKey(w.t.ID, h)
	if w.c.Writes.Covers(key) {
		return
	}
	k := min(rows, generatedReadAhead)
	keys := make([][]byte, k)
	keys[0] = key
	for j := 1; j < k; j++ {
		keys[j] = tablecodec.RecordKey(w.t.ID, h+int64(j))
	}
	_ = w.c.Writes.Prefetch(w.c.Ctx, keys)
}

// RunInsert executes INSERT / REPLACE.
func RunInsert(c *Context, p *plan.Insert) error {
	w := newWriter(c, p.Table)
	given := make([]bool, len(p.Table.Columns))
	for _, off := range p.Targets {
		given[off] = true
	}
	var selected [][]types.Datum
	n := len(p.Rows)
	if p.Select != nil {
		var err error
		if selected, err = Query(c, p.Select); err != nil {
			return err
		}
		n = len(selected)
		if err := w.prefetchHandles(p, selected); err != nil {
			return err
		}
	} else if len(p.Rows) > 1 && w.t.PKIsHandle {
		// A multi-row VALUES list: its key values, evaluated ahead (an
		// expression that fails here fails again, and is reported, when
		// its row is inserted; a key read ahead for nothing is harmless).
		rows := make([][]types.Datum, 0, len(p.Rows))
		for _, r := range p.Rows {
			vals := make([]types.Datum, len(r))
			for j, e := range r {
				if e != nil && p.Targets[j] == w.t.HandleOffset {
					if v, err := e.Eval(c.Eval, nil); err == nil {
						vals[j] = v
					}
				}
			}
			rows = append(rows, vals)
		}
		if err := w.prefetchHandles(p, rows); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		row := make([]types.Datum, len(p.Table.Columns))
		for j, off := range p.Targets {
			col := p.Table.Columns[off]
			if w.gen && col.IsGenerated() && (selected != nil || p.Rows[i][j] != nil) {
				if !c.NonStrict {
					return errGeneratedValue(col.Name, p.Table.Name)
				}
				if i == 0 {
					c.Eval.Warn(sqlerr.New(1906, "HY000", "The value specified for generated column '%s' in table '%s' has been ignored", col.Name, p.Table.Name))
				}
				continue
			}
			if selected != nil {
				row[off] = selected[i][j]
				continue
			}
			e := p.Rows[i][j]
			if e == nil {
				v, ok, err := DefaultValue(c, col)
				if err != nil {
					return err
				}
				if !ok {
					return sqlerr.New(sqlerr.ErNoDefaultForField, "HY000", "Field '%s' doesn't have a default value", col.Name)
				}
				row[off] = v
				continue
			}
			v, err := e.Eval(c.Eval, nil)
			if err != nil {
				return err
			}
			row[off] = v
		}
		for off, col := range p.Table.Columns {
			if given[off] {
				continue
			}
			v, ok, err := DefaultValue(c, col)
			if err != nil {
				return err
			}
			if !ok {
				return sqlerr.New(sqlerr.ErNoDefaultForField, "HY000", "Field '%s' doesn't have a default value", col.Name)
			}
			row[off] = v
		}
		if err := w.completeRow(row, i+1); err != nil {
			return err
		}
		if w.generated && n-i > 1 {
			w.prefetchGenerated(w.handleOf(row), n-i)
		}
		if err := w.insertOne(p, row); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) insertOne(p *plan.Insert, row []types.Datum) error {
	var handle int64
	if w.t.PKIsHandle {
		handle = w.handleOf(row)
		if w.deferPK = w.canDeferDupCheck(p); w.deferPK {
			// The statement's own writes are checked here; storage's
			// value, if any, by the commit.
			key := tablecodec.RecordKey(w.t.ID, handle)
			if _, del, ok := w.c.Writes.Staged(key); ok && !del {
				return w.dupErr([]types.Datum{row[w.t.HandleOffset]}, "PRIMARY")
			} else if ok {
				w.deferPK = false // the statement deleted the row: no check
			} else {
				w.c.DeferredDup = &DeferredDup{Key: key, w: w, val: row[w.t.HandleOffset]}
			}
		}
	} else {
		var err error
		if handle, err = w.c.IDs.Alloc(w.c.Ctx, w.t); err != nil {
			return err
		}
		if w.t.ShardRowIDBits > 0 {
			handle = autoRandom(handle, w.t.ShardRowIDBits, w.c.Txn.StartTS())
		}
	}
	for {
		other, dup, err := w.conflict(handle, row, noHandle)
		if err != nil {
			return err
		}
		if dup == nil {
			break
		}
		switch {
		case p.Replace:
			old, err := w.getRow(other)
			if err != nil {
				return err
			}
			if err := w.deleteRow(other, old); err != nil {
				return err
			}
			w.c.AffectedRows++
			continue
		case len(p.OnDup) > 0:
			old, err := w.getRow(other)
			if err != nil {
				return err
			}
			upd := append([]types.Datum(nil), old...)
			evalRow := append(upd[:len(upd):len(upd)], row...)
			for _, a := range p.OnDup {
				v, err := a.Expr.Eval(w.c.Eval, evalRow)
				if err != nil {
					return err
				}
				col := w.t.Columns[a.Offset]
				if v, err = types.ConvertColumn(v, col.Type, col.Name, 1); err != nil {
					return err
				}
				if v.IsNull() && col.NotNull {
					return sqlerr.New(sqlerr.ErBadNull, "23000", "Column '%s' cannot be null", col.Name)
				}
				upd[a.Offset] = v
				evalRow[a.Offset] = v
			}
			if err := w.touchOnUpdate(old, upd, p.OnDup); err != nil {
				return err
			}
			if err := w.generate(upd); err != nil {
				return err
			}
			if w.fkOn() {
				if err := w.checkParents(upd, old); err != nil {
					return err
				}
				w.current = other
				if err := w.parentChanged(old, upd); err != nil {
					return err
				}
			}
			changed, err := w.updateRow(other, old, upd)
			if err != nil {
				return err
			}
			if changed {
				w.c.AffectedRows += 2
			} else if w.c.FoundRows {
				w.c.AffectedRows++
			}
			return nil
		case p.Ignore:
			if w.c.Eval.Warnings != nil {
				*w.c.Eval.Warnings = append(*w.c.Eval.Warnings, dup)
			}
			return nil
		default:
			return dup
		}
	}
	if w.fkOn() && len(w.t.ForeignKeys) > 0 {
		if err := w.checkParents(row, nil); err != nil {
			return err
		}
	}
	w.c.AffectedRows++
	return w.putRow(handle, row)
}

// canDeferDupCheck reports whether p's row may leave its primary key's
// uniqueness check to the commit (Context.DeferDupCheck): a plain
// single-row INSERT into a table whose only unique key is its integer
// primary key. REPLACE, IGNORE and ON DUPLICATE KEY UPDATE act on the
// duplicate, so they must find it now; with several rows or a unique
// index, MySQL reports the first failing row's first failing key, which
// a check at commit could not order.
func (w *writer) canDeferDupCheck(p *plan.Insert) bool {
	if !w.c.DeferDupCheck || p.Replace || p.Ignore || len(p.OnDup) > 0 || p.Select != nil || len(p.Rows) != 1 {
		return false
	}
	if _, ok := w.c.Txn.(kv.Inserter); !ok {
		return false
	}
	for _, ix := range w.t.WritableIndexes() {
		if ix.Unique {
			return false
		}
	}
	return true
}

// update applies assigns to row handle, whose current values are old, and
// counts it when it changed. Assignment expressions are evaluated over
// evalRow (the joined row of a multi-table UPDATE), or, when evalRow is nil,
// over the row being updated, so later assignments see earlier ones as in
// MySQL.
func (w *writer) update(handle int64, old []types.Datum, assigns []plan.Assign, evalRow []types.Datum) error {
	c := w.c
	upd := append([]types.Datum(nil), old...)
	if evalRow == nil {
		evalRow = upd
	}
	for _, a := range assigns {
		col := w.t.Columns[a.Offset]
		var v types.Datum
		var err error
		if w.gen && col.IsGenerated() {
			if a.Expr != nil {
				return errGeneratedValue(col.Name, w.t.Name)
			}
			continue
		}
		if a.Expr == nil {
			var ok bool
			if v, ok, err = DefaultValue(c, col); err != nil {
				return err
			} else if !ok {
				return sqlerr.New(sqlerr.ErNoDefaultForField, "HY000", "Field '%s' doesn't have a default value", col.Name)
			}
		} else if v, err = a.Expr.Eval(c.Eval, evalRow); err != nil {
			return err
		}
		if v, err = types.ConvertColumn(v, col.Type, col.Name, 1); err != nil {
			return err
		}
		if v.IsNull() && col.NotNull {
			return sqlerr.New(sqlerr.ErBadNull, "23000", "Column '%s' cannot be null", col.Name)
		}
		upd[a.Offset] = v
	}
	if err := w.touchOnUpdate(old, upd, assigns); err != nil {
		return err
	}
	if err := w.generate(upd); err != nil {
		return err
	}
	if w.fkOn() {
		if err := w.checkParents(upd, old); err != nil {
			return err
		}
		w.current = handle
		if err := w.parentChanged(old, upd); err != nil {
			return err
		}
	}
	changed, err := w.updateRow(handle, old, upd)
	if err != nil {
		return err
	}
	if changed || c.FoundRows {
		c.AffectedRows++
	}
	return nil
}

// RunUpdate executes an UPDATE.
func RunUpdate(c *Context, p *plan.Update) error {
	rows, err := Query(c, p.Source)
	if err != nil {
		return err
	}
	if len(p.Multi) > 0 {
		return runMultiUpdate(c, p, rows)
	}
	w := newWriter(c, p.Table)
	width := len(p.Table.Columns)
	for _, r := range rows {
		handle := r[width].Int()
		old := r[:width:width]
		if err := w.update(handle, old, p.Assigns, nil); err != nil {
			return err
		}
	}
	return nil
}

// RunDelete executes a DELETE.
func RunDelete(c *Context, p *plan.Delete) error {
	rows, err := Query(c, p.Source)
	if err != nil {
		return err
	}
	if len(p.Multi) > 0 {
		for _, tg := range p.Multi {
			w := newWriter(c, tg.Table)
			seen := map[int64]bool{}
			for _, r := range rows {
				row := r[tg.Offset : tg.Offset+len(tg.Table.Columns)]
				if row[tg.Table.HandleOffset].IsNull() { // NULL-extended by an outer join
					continue
				}
				h := w.handleOf(row)
				if seen[h] {
					continue
				}
				seen[h] = true
				if err := w.deleteRow(h, row); err != nil {
					return err
				}
				c.AffectedRows++
			}
		}
		return nil
	}
	w := newWriter(c, p.Table)
	width := len(p.Table.Columns)
	for _, r := range rows {
		if err := w.deleteRow(r[width].Int(), r[:width]); err != nil {
			return err
		}
		c.AffectedRows++
	}
	return nil
}

// runMultiUpdate changes each target row at most once (its first match in
// the join), evaluating assignments over the joined row.
func runMultiUpdate(c *Context, p *plan.Update, rows [][]types.Datum) error {
	for _, tg := range p.Multi {
		w := newWriter(c, tg.Table)
		seen := map[int64]bool{}
		width := len(tg.Table.Columns)
		for _, r := range rows {
			old := r[tg.Offset : tg.Offset+width : tg.Offset+width]
			if old[tg.Table.HandleOffset].IsNull() {
				continue
			}
			h := w.handleOf(old)
			if seen[h] {
				continue
			}
			seen[h] = true
			if err := w.update(h, old, tg.Assigns, r); err != nil {
				return err
			}
		}
	}
	return nil
}
