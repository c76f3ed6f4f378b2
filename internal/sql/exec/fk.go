package exec

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// Foreign keys are enforced as InnoDB does, row by row as the statement
// writes: a child row's key must match a parent row (1452), and a parent
// row that children reference may not go away or change its key (1451)
// unless the constraint says CASCADE (the children are deleted or
// updated too) or SET NULL. Context.FKChecks false (foreign_key_checks=0)
// turns every check and action off, as a dump restore needs.

// maxCascadeDepth is InnoDB's limit on nested cascades.
const maxCascadeDepth = 15

// ParentKey is how a parent's rows are found by the referenced columns:
// the clustered handle, or an index whose first columns they are.
type ParentKey struct {
	Handle bool
	Index  *catalog.IndexInfo
	Cols   []int // parent column offsets, in the order of the referencing columns
}

// FindParentKey finds the key of parent that serves a foreign key
// referencing cols (names), or nil when there is none (MySQL error 1822).
func FindParentKey(parent *catalog.TableInfo, cols []string) *ParentKey {
	offs := make([]int, len(cols))
	for i, name := range cols {
		c := parent.Column(name)
		if c == nil {
			return nil
		}
		offs[i] = c.Offset
	}
	if parent.PKIsHandle && len(offs) == 1 && offs[0] == parent.HandleOffset {
		return &ParentKey{Handle: true, Cols: offs}
	}
	for _, ix := range parent.Indexes {
		if len(ix.Columns) < len(offs) || ix.IsPrefix() {
			continue
		}
		ok := true
		for i, o := range offs {
			ok = ok && ix.Columns[i] == o
		}
		if ok {
			return &ParentKey{Index: ix, Cols: offs}
		}
	}
	return nil
}

// fkRef is a foreign key of child referencing some parent table.
type fkRef struct {
	childDB string
	child   *catalog.TableInfo
	fk      *catalog.ForeignKeyInfo
}

// fkIndex lists, per parent table, the foreign keys that reference it.
type fkIndex struct {
	schema *catalog.Schema
	any    bool
	refs   map[string][]fkRef // lower(db.table) of the parent
}

var lastFKIndex atomic.Pointer[fkIndex]

func fkIndexOf(s *catalog.Schema) *fkIndex {
	if x := lastFKIndex.Load(); x != nil && x.schema == s {
		return x
	}
	x := &fkIndex{schema: s, refs: map[string][]fkRef{}}
	for _, db := range s.DBNames() {
		for _, t := range s.Tables(db) {
			for _, fk := range t.ForeignKeys {
				x.any = true
				k := strings.ToLower(fk.RefDB + "." + fk.RefTable)
				x.refs[k] = append(x.refs[k], fkRef{childDB: db, child: t, fk: fk})
			}
		}
	}
	lastFKIndex.Store(x)
	return x
}

// fkOn reports whether foreign keys need looking at for writes to t.
func (w *writer) fkOn() bool {
	if !w.c.FKChecks || w.c.Schema == nil {
		return false
	}
	return len(w.t.ForeignKeys) > 0 || fkIndexOf(w.c.Schema).any
}

func (w *writer) dbName() string {
	if w.c.Schema != nil {
		if d := w.c.Schema.DBByID(w.t.DBID); d != nil {
			return d.Name
		}
	}
	return ""
}

func fkText(db string, child *catalog.TableInfo, fk *catalog.ForeignKeyInfo) string {
	cols := make([]string, len(fk.Columns))
	for i, off := range fk.Columns {
		cols[i] = "`" + child.Columns[off].Name + "`"
	}
	refs := make([]string, len(fk.RefColumns))
	for i, c := range fk.RefColumns {
		refs[i] = "`" + c + "`"
	}
	text := fmt.Sprintf("`%s`.`%s`, CONSTRAINT `%s` FOREIGN KEY (%s) REFERENCES `%s` (%s)", db, child.Name, fk.Name, strings.Join(cols, ", "), fk.RefTable, strings.Join(refs, ", "))
	if fk.OnDelete != "" {
		text += " ON DELETE " + fk.OnDelete
	}
	if fk.OnUpdate != "" {
		text += " ON UPDATE " + fk.OnUpdate
	}
	return text
}

func errNoParent(db string, child *catalog.TableInfo, fk *catalog.ForeignKeyInfo) error {
	return sqlerr.New(1452, "23000", "Cannot add or update a child row: a foreign key constraint fails (%s)", fkText(db, child, fk))
}

func errHasChildren(db string, child *catalog.TableInfo, fk *catalog.ForeignKeyInfo) error {
	return sqlerr.New(1451, "23000", "Cannot delete or update a parent row: a foreign key constraint fails (%s)", fkText(db, child, fk))
}

// checkParents verifies that every foreign key of the row has its parent.
// old, when not nil, is the row's previous values: keys it does not change
// are not checked again.
func (w *writer) checkParents(row, old []types.Datum) error {
	for _, fk := range w.t.ForeignKeys {
		vals := make([]types.Datum, len(fk.Columns))
		null, same := false, old != nil
		for i, off := range fk.Columns {
			vals[i] = row[off]
			null = null || row[off].IsNull()
			if same {
				c, err := types.Compare(row[off], old[off])
				same = err == nil && c == 0 && row[off].IsNull() == old[off].IsNull()
			}
		}
		if null || same {
			continue
		}
		parent := w.c.Schema.Table(fk.RefDB, fk.RefTable)
		if parent == nil {
			return errNoParent(w.dbName(), w.t, fk)
		}
		pk := FindParentKey(parent, fk.RefColumns)
		if pk == nil {
			return errNoParent(w.dbName(), w.t, fk)
		}
		found, err := w.c.keyExists(parent, pk, vals)
		if err != nil {
			return err
		}
		if !found {
			return errNoParent(w.dbName(), w.t, fk)
		}
	}
	return nil
}

// keyExists reports whether t has a row whose key columns pk.Cols equal vals,
// as the statement sees it (its own writes included).
func (c *Context) keyExists(t *catalog.TableInfo, pk *ParentKey, vals []types.Datum) (bool, error) {
	conv := make([]types.Datum, len(vals))
	for i, v := range vals {
		cv, err := types.Convert(v, t.Columns[pk.Cols[i]].Type)
		if err != nil {
			return false, nil
		}
		conv[i] = cv
	}
	if pk.Handle {
		h, ok := exactHandle(conv[0], t.Columns[t.HandleOffset].Type)
		if !ok {
			return false, nil
		}
		_, err := c.Writes.Get(c.Ctx, tablecodec.RecordKey(t.ID, h))
		if errors.Is(err, kv.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	handles, err := c.indexHandles(t, pk.Index, conv, 1)
	return len(handles) > 0, err
}

// indexHandles returns up to limit handles of rows of t whose index ix
// starts with vals (limit <= 0: all), skipping entries the statement
// deleted.
func (c *Context) indexHandles(t *catalog.TableInfo, ix *catalog.IndexInfo, vals []types.Datum, limit int) ([]int64, error) {
	prefix, err := codec.EncodeKey(tablecodec.IndexPrefix(t.ID, ix.ID), vals...)
	if err != nil {
		return nil, err
	}
	if ix.Unique && len(vals) == len(ix.Columns) {
		v, err := c.Writes.Get(c.Ctx, prefix)
		if errors.Is(err, kv.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		h, err := tablecodec.IndexEntryHandle(prefix, v)
		if err != nil {
			return nil, err
		}
		return []int64{h}, nil
	}
	it, err := c.Txn.Iter(c.Ctx, prefix, tablecodec.PrefixEnd(prefix), false)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []int64
	for it.Valid() && (limit <= 0 || len(out) < limit) {
		if _, del, ok := c.Writes.Staged(it.Key()); !(ok && del) {
			h, err := tablecodec.IndexEntryHandle(it.Key(), it.Value())
			if err != nil {
				return nil, err
			}
			out = append(out, h)
		}
		if err := it.Next(c.Ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// children returns the handles of child rows whose foreign key fk matches
// the parent values vals.
func (c *Context) children(ref fkRef, vals []types.Datum) ([]int64, error) {
	conv := make([]types.Datum, len(vals))
	for i, v := range vals {
		cv, err := types.Convert(v, ref.child.Columns[ref.fk.Columns[i]].Type)
		if err != nil {
			return nil, nil
		}
		conv[i] = cv
	}
	t := ref.child
	if t.PKIsHandle && len(ref.fk.Columns) == 1 && ref.fk.Columns[0] == t.HandleOffset {
		h, ok := exactHandle(conv[0], t.Columns[t.HandleOffset].Type)
		if !ok {
			return nil, nil
		}
		_, err := c.Writes.Get(c.Ctx, tablecodec.RecordKey(t.ID, h))
		if errors.Is(err, kv.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []int64{h}, nil
	}
	for _, ix := range t.Indexes {
		if len(ix.Columns) < len(ref.fk.Columns) || ix.IsPrefix() {
			continue
		}
		ok := true
		for i, off := range ref.fk.Columns {
			ok = ok && ix.Columns[i] == off
		}
		if ok {
			return c.indexHandles(t, ix, conv, 0)
		}
	}
	// The index made for the foreign key is still being added online
	// (not public yet): the rows are read instead.
	return c.scanChildren(t, ref.fk.Columns, conv)
}

// scanChildren returns the handles of the rows of t whose columns cols
// equal vals, reading every row.
func (c *Context) scanChildren(t *catalog.TableInfo, cols []int, vals []types.Datum) ([]int64, error) {
	l := layoutOf(t)
	prefix := tablecodec.RecordPrefix(t.ID)
	it, err := c.Txn.Iter(c.Ctx, prefix, tablecodec.PrefixEnd(prefix), false)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []int64
	for it.Valid() {
		if _, del, ok := c.Writes.Staged(it.Key()); !(ok && del) {
			_, h, err := tablecodec.DecodeRecordKey(it.Key())
			if err != nil {
				return nil, err
			}
			row, err := l.decode(h, it.Value(), 0)
			if err != nil {
				return nil, err
			}
			match := true
			for i, off := range cols {
				if cmp, err := types.Compare(row[off], vals[i]); err != nil || cmp != 0 || row[off].IsNull() {
					match = false
					break
				}
			}
			if match {
				out = append(out, h)
			}
		}
		if err := it.Next(c.Ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parentChanged applies the foreign keys that reference t when its row old
// is deleted (upd nil) or updated to upd.
func (w *writer) parentChanged(old, upd []types.Datum) error {
	x := fkIndexOf(w.c.Schema)
	refs := x.refs[strings.ToLower(w.dbName()+"."+w.t.Name)]
	for _, ref := range refs {
		pk := FindParentKey(w.t, ref.fk.RefColumns)
		if pk == nil {
			continue
		}
		vals := make([]types.Datum, len(pk.Cols))
		null, same := false, upd != nil
		for i, off := range pk.Cols {
			vals[i] = old[off]
			null = null || old[off].IsNull()
			if same {
				c, err := types.Compare(old[off], upd[off])
				same = err == nil && c == 0
			}
		}
		if null || same {
			continue
		}
		handles, err := w.c.children(ref, vals)
		if err != nil {
			return err
		}
		if len(handles) == 0 {
			continue
		}
		action := ref.fk.OnDelete
		if upd != nil {
			action = ref.fk.OnUpdate
		}
		if w.depth >= maxCascadeDepth {
			return sqlerr.New(3008, "HY000", "Foreign key cascade delete/update exceeds max depth of %d.", maxCascadeDepth)
		}
		cw := newWriter(w.c, ref.child)
		cw.depth = w.depth + 1
		for _, h := range handles {
			if ref.child == w.t && h == w.current {
				continue // a row referencing itself
			}
			crow, err := cw.getRow(h)
			if errors.Is(err, kv.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			switch action {
			case "CASCADE":
				if upd == nil {
					if err := cw.deleteRow(h, crow); err != nil {
						return err
					}
					continue
				}
				nrow := append([]types.Datum(nil), crow...)
				for i, off := range ref.fk.Columns {
					nrow[off] = upd[pk.Cols[i]]
				}
				if err := cw.cascadeUpdate(h, crow, nrow); err != nil {
					return err
				}
			case "SET NULL":
				nrow := append([]types.Datum(nil), crow...)
				for _, off := range ref.fk.Columns {
					nrow[off] = types.Null
				}
				if err := cw.cascadeUpdate(h, crow, nrow); err != nil {
					return err
				}
			default:
				return errHasChildren(ref.childDB, ref.child, ref.fk)
			}
		}
	}
	return nil
}

// deleteRow removes a row and applies the foreign keys referencing it.
func (w *writer) deleteRow(handle int64, row []types.Datum) error {
	if w.fkOn() {
		w.current = handle
		if err := w.parentChanged(row, nil); err != nil {
			return err
		}
	}
	return w.removeRow(handle, row)
}

// cascadeUpdate changes a child row on behalf of its parent's foreign key
// action.
func (w *writer) cascadeUpdate(handle int64, old, upd []types.Datum) error {
	for i, col := range w.t.Columns {
		v, err := types.ConvertColumn(upd[i], col.Type, col.Name, 1)
		if err != nil {
			return err
		}
		if v.IsNull() && col.NotNull {
			return sqlerr.New(sqlerr.ErBadNull, "23000", "Column '%s' cannot be null", col.Name)
		}
		upd[i] = v
	}
	if err := w.generate(upd); err != nil {
		return err
	}
	w.current = handle
	if err := w.parentChanged(old, upd); err != nil {
		return err
	}
	_, err := w.updateRow(handle, old, upd)
	return err
}

// CheckForeignKeyRows verifies that every existing row of child satisfies
// fk (ALTER TABLE ... ADD FOREIGN KEY with foreign_key_checks on).
func CheckForeignKeyRows(c *Context, child *catalog.TableInfo, fk *catalog.ForeignKeyInfo) error {
	w := newWriter(c, child)
	c.FKChecks = true
	prefix := tablecodec.RecordPrefix(child.ID)
	it, err := c.Txn.Iter(c.Ctx, prefix, tablecodec.PrefixEnd(prefix), false)
	if err != nil {
		return err
	}
	defer it.Close()
	saved := child.ForeignKeys
	w.t = &catalog.TableInfo{}
	*w.t = *child
	w.t.ForeignKeys = []*catalog.ForeignKeyInfo{fk}
	defer func() { child.ForeignKeys = saved }()
	for it.Valid() {
		_, h, err := tablecodec.DecodeRecordKey(it.Key())
		if err != nil {
			return err
		}
		row, err := w.l.decode(h, it.Value(), 0)
		if err != nil {
			return err
		}
		if err := w.checkParents(row, nil); err != nil {
			db := ""
			if d := c.Schema.DBByID(child.DBID); d != nil {
				db = d.Name
			}
			return sqlerr.New(1452, "23000", "Cannot add or update a child row: a foreign key constraint fails (%s)", fkText(db, child, fk))
		}
		if err := it.Next(c.Ctx); err != nil {
			return err
		}
	}
	return nil
}
