// Package catalog owns the SQL schema: databases, tables, columns and
// indexes, stored as JSON under the "m" prefix of the transactional key space.
//
// Keys:
//
//	mVersion            schema version, bumped by every step of a DDL job
//	mNextID             last allocated database/table/index id
//	mDB{dbID}           DBInfo
//	mTable{dbID}{tblID} TableInfo
//	mAutoID{tblID}      high-water mark of the table's AUTO_INCREMENT / row-id allocator
//	mGC{jobID}          a key range of dropped data still to be destroyed (GCJob)
//	mDDLJob{jobID}      a DDL job waiting or running (Job; ddljob.go)
//	mDDLHistory{jobID}  a finished DDL job
//	mDDLOwner           the engine that runs DDL jobs, and its lease (Owner)
//	mDDLEngine{id}      an SQL engine's schema version lease (EngineLease)
//	mDDLReorg{job}{n}   a share of a job's index backfill (ReorgRange)
//	mStatVersion        statistics version, bumped by every ANALYZE TABLE (stats.go)
//	mStats{tblID}       TableStats of a table (stats.go)
//
// Contract: every change goes through a kv.Txn the caller commits, so each
// step of a DDL job (one schema version) is atomic. Readers load an
// immutable *Schema snapshot (Load) and
// reuse it while the version key is unchanged (Version is one Get); the
// Schema and everything reachable from it must not be modified.
package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/tablecodec"
)

var (
	keyVersion   = []byte("mVersion")
	keyNextID    = []byte("mNextID")
	prefixDB     = []byte("mDB")
	prefixTable  = []byte("mTable")
	prefixAutoID = []byte("mAutoID")
	prefixGC     = []byte("mGC")
)

// DBInfo describes a database.
type DBInfo struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	// Charset and Collate are the database's defaults for new tables
	// (empty: the server's).
	Charset string `json:"charset,omitempty"`
	Collate string `json:"collate,omitempty"`
}

// ColumnInfo describes a column. Offset is its position in the table's rows.
type ColumnInfo struct {
	ID            int64             `json:"id"`
	Name          string            `json:"name"`
	Offset        int               `json:"offset"`
	Type          *ptypes.FieldType `json:"type"`
	NotNull       bool              `json:"not_null"`
	AutoIncrement bool              `json:"auto_increment,omitempty"`
	// AutoRandomBits > 0 makes an AUTO_INCREMENT column TiDB's
	// AUTO_RANDOM(n): generated values carry n shard bits below the sign
	// bit, so consecutive inserts spread over the key space instead of
	// all landing in the last region.
	AutoRandomBits int `json:"auto_random_bits,omitempty"`
	// HasDefault is set when the column has an explicit DEFAULT clause.
	// DefaultNull means DEFAULT NULL; otherwise Default holds the literal
	// text, or DefaultNow marks DEFAULT CURRENT_TIMESTAMP.
	HasDefault  bool   `json:"has_default,omitempty"`
	DefaultNull bool   `json:"default_null,omitempty"`
	Default     string `json:"default,omitempty"`
	DefaultNow  bool   `json:"default_now,omitempty"`
	OnUpdateNow bool   `json:"on_update_now,omitempty"`
	// OriginDefault is the value rows written before the column was added
	// (ALTER TABLE ADD COLUMN) read for it; nil reads NULL.
	OriginDefault *string `json:"origin_default,omitempty"`
	Comment       string  `json:"comment,omitempty"`
	// GeneratedExpr is the expression of a generated column (as SQL
	// text); GeneratedStored tells STORED from VIRTUAL. Both kinds are
	// computed when a row is written and kept in the row.
	GeneratedExpr   string `json:"generated_expr,omitempty"`
	GeneratedStored bool   `json:"generated_stored,omitempty"`
}

// IsGenerated reports whether c is a generated column.
func (c *ColumnInfo) IsGenerated() bool { return c.GeneratedExpr != "" }

// ForeignKeyInfo is a FOREIGN KEY constraint of a table (the child): its
// Columns (offsets) reference RefColumns (names) of RefDB.RefTable (the
// parent). The parent is named, not identified, so that a dump can create
// a child before its parent (foreign_key_checks=0); RENAME TABLE updates
// the names. OnDelete and OnUpdate are RESTRICT, CASCADE, SET NULL or NO
// ACTION.
type ForeignKeyInfo struct {
	Name       string   `json:"name"`
	Columns    []int    `json:"columns"`
	RefDB      string   `json:"ref_db"`
	RefTable   string   `json:"ref_table"`
	RefColumns []string `json:"ref_columns"`
	OnDelete   string   `json:"on_delete,omitempty"`
	OnUpdate   string   `json:"on_update,omitempty"`
}

// IndexInfo describes an index. Columns are column offsets. The primary key
// of a table whose handle is its integer primary key is not stored as an
// index (Primary with PKIsHandle).
type IndexInfo struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Columns []int  `json:"columns"`
	Unique  bool   `json:"unique"`
	Primary bool   `json:"primary"`
	// Lengths holds, per column, the prefix length in characters of a
	// prefix index part (0: the whole value). Prefix indexes enforce
	// uniqueness but are never used as access paths.
	Lengths []int `json:"lengths,omitempty"`
	// State is StatePublic for the indexes of TableInfo.Indexes; an index
	// being added or dropped (TableInfo.Changing) is in another state.
	State SchemaState `json:"state,omitempty"`
}

// IsPrefix reports whether some part of the index is a column prefix.
func (ix *IndexInfo) IsPrefix() bool {
	for _, l := range ix.Lengths {
		if l > 0 {
			return true
		}
	}
	return false
}

// TableInfo describes a table.
type TableInfo struct {
	ID      int64         `json:"id"`
	DBID    int64         `json:"db_id"`
	Name    string        `json:"name"`
	Columns []*ColumnInfo `json:"columns"`
	Indexes []*IndexInfo  `json:"indexes"`
	// PKIsHandle: the table has a single-column integer primary key whose
	// value is the row handle (clustered). Otherwise rows get a hidden
	// handle from the table's id allocator.
	PKIsHandle bool `json:"pk_is_handle"`
	// ShardRowIDBits (SHARD_ROW_ID_BITS, for a table without an integer
	// primary key) puts that many shard bits above its hidden row
	// handles, as AUTO_RANDOM does for a key.
	ShardRowIDBits int `json:"shard_row_id_bits,omitempty"`
	// HandleOffset is the offset of the handle column when PKIsHandle.
	HandleOffset int    `json:"handle_offset"`
	NextColumnID int64  `json:"next_column_id"`
	NextIndexID  int64  `json:"next_index_id"`
	Comment      string `json:"comment,omitempty"`
	// ViewSQL is the SELECT of a view (a table with no rows of its own);
	// ViewColumns renames its output columns when set.
	ViewSQL     string   `json:"view_sql,omitempty"`
	ViewColumns []string `json:"view_columns,omitempty"`
	// Changing holds the indexes an online schema change is adding or
	// dropping (ddl_owner.go in package sql), each in its State. Reads
	// never use them; writers maintain them as their state says
	// (WritableIndexes, DeletableIndexes).
	Changing []*IndexInfo `json:"changing,omitempty"`
	// Revision is the schema version that last changed the table's
	// definition: a transaction that began under an older version knows
	// the table as it was before (see the commit check in package sql).
	Revision int64 `json:"revision,omitempty"`
	// WriteBarrier: writers wait instead of writing the table, while a
	// DDL job waits for every engine to stop writing it under the
	// definition the job is about to change (ddl_owner.go in package sql).
	WriteBarrier bool `json:"write_barrier,omitempty"`
	// Charset and Collate are the table's defaults (empty: utf8mb4_bin,
	// the collation of tables created before they were recorded).
	Charset     string            `json:"charset,omitempty"`
	Collate     string            `json:"collate,omitempty"`
	ForeignKeys []*ForeignKeyInfo `json:"foreign_keys,omitempty"`
	// Temporary marks a session's temporary table, never stored in the
	// catalog.
	Temporary bool `json:"temporary,omitempty"`
	// Collations is CollationsInForce for tables whose recorded
	// collations are in force, 0 for tables stored before (see
	// CollationsInForce).
	Collations int `json:"collations,omitempty"`
}

// WritableIndexes returns the indexes whose entries a row write adds:
// the public ones and those being added that are write-only or in
// backfill. It is Indexes itself when no schema change is in progress.
func (t *TableInfo) WritableIndexes() []*IndexInfo {
	if len(t.Changing) == 0 {
		return t.Indexes
	}
	out := append([]*IndexInfo(nil), t.Indexes...)
	for _, ix := range t.Changing {
		if ix.State.Writable() {
			out = append(out, ix)
		}
	}
	return out
}

// DeletableIndexes returns the indexes whose entries a row delete removes:
// WritableIndexes and the delete-only ones.
func (t *TableInfo) DeletableIndexes() []*IndexInfo {
	if len(t.Changing) == 0 {
		return t.Indexes
	}
	out := append([]*IndexInfo(nil), t.Indexes...)
	for _, ix := range t.Changing {
		if ix.State != StateAbsent {
			out = append(out, ix)
		}
	}
	return out
}

// IsView reports whether t is a view.
func (t *TableInfo) IsView() bool { return t.ViewSQL != "" }

// AutoIncrementOffset returns the offset of the AUTO_INCREMENT column or -1.
func (t *TableInfo) AutoIncrementOffset() int {
	for _, c := range t.Columns {
		if c.AutoIncrement {
			return c.Offset
		}
	}
	return -1
}

// Column finds a column by case-insensitive name.
func (t *TableInfo) Column(name string) *ColumnInfo {
	for _, c := range t.Columns {
		if strings.EqualFold(c.Name, name) {
			return c
		}
	}
	return nil
}

// Index finds an index by case-insensitive name.
func (t *TableInfo) Index(name string) *IndexInfo {
	for _, ix := range t.Indexes {
		if strings.EqualFold(ix.Name, name) {
			return ix
		}
	}
	return nil
}

// PrimaryIndex returns the primary key index, or nil when the table has no
// primary key or its primary key is the handle.
func (t *TableInfo) PrimaryIndex() *IndexInfo {
	for _, ix := range t.Indexes {
		if ix.Primary {
			return ix
		}
	}
	return nil
}

// Clone returns a deep copy suitable for modification by DDL.
func (t *TableInfo) Clone() *TableInfo {
	b, err := json.Marshal(t)
	if err != nil {
		panic(err)
	}
	var out TableInfo
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return &out
}

// Schema is an immutable snapshot of the catalog at one version.
type Schema struct {
	Version int64
	dbs     map[string]*DBInfo              // lower-case name
	tables  map[int64]map[string]*TableInfo // dbID -> lower-case name
	byID    map[int64]*TableInfo
}

// TableByID returns a table by id, or nil.
func (s *Schema) TableByID(id int64) *TableInfo { return s.byID[id] }

// DB returns a database by case-insensitive name.
func (s *Schema) DB(name string) *DBInfo { return s.dbs[strings.ToLower(name)] }

// DBByID returns a database by id.
func (s *Schema) DBByID(id int64) *DBInfo {
	for _, d := range s.dbs {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// WithTables returns a copy of s in which the given tables (of existing
// databases) hide any stored table of the same name: a session's
// temporary tables. The copy shares everything else with s.
func (s *Schema) WithTables(extra []*TableInfo) *Schema {
	if len(extra) == 0 {
		return s
	}
	out := &Schema{Version: s.Version, dbs: s.dbs, tables: make(map[int64]map[string]*TableInfo, len(s.tables)), byID: s.byID}
	for id, m := range s.tables {
		out.tables[id] = m
	}
	for _, t := range extra {
		m := out.tables[t.DBID]
		if m == nil {
			continue
		}
		cp := make(map[string]*TableInfo, len(m)+1)
		for k, v := range m {
			cp[k] = v
		}
		cp[strings.ToLower(t.Name)] = t
		out.tables[t.DBID] = cp
	}
	return out
}

// Table returns a table by database and table name (case-insensitive).
func (s *Schema) Table(db, table string) *TableInfo {
	d := s.DB(db)
	if d == nil {
		return nil
	}
	return s.tables[d.ID][strings.ToLower(table)]
}

// DBNames returns the database names sorted.
func (s *Schema) DBNames() []string {
	out := make([]string, 0, len(s.dbs))
	for _, d := range s.dbs {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}

// Tables returns the tables of a database sorted by name.
func (s *Schema) Tables(db string) []*TableInfo {
	d := s.DB(db)
	if d == nil {
		return nil
	}
	out := make([]*TableInfo, 0, len(s.tables[d.ID]))
	for _, t := range s.tables[d.ID] {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Version reads the schema version visible to txn (0 before any DDL).
func Version(ctx context.Context, txn kv.Txn) (int64, error) {
	return tablecodec.ReadCounter(ctx, txn, keyVersion)
}

// VersionKey is the key of the schema version counter and NextIDKey that
// of the id counter, which every DDL job's submission moves: an engine
// watches both (tablecodec.ReadCounters) to learn of schema changes and
// of jobs queued on other engines.
func VersionKey() []byte { return keyVersion }

// NextIDKey: see VersionKey.
func NextIDKey() []byte { return keyNextID }

// Load reads the whole catalog visible to txn.
func Load(ctx context.Context, txn kv.Txn) (*Schema, error) {
	ver, err := Version(ctx, txn)
	if err != nil {
		return nil, err
	}
	s := &Schema{Version: ver, dbs: map[string]*DBInfo{}, tables: map[int64]map[string]*TableInfo{}, byID: map[int64]*TableInfo{}}
	dbs, err := txn.Scan(ctx, prefixDB, tablecodec.PrefixEnd(prefixDB), 0, false)
	if err != nil {
		return nil, err
	}
	for _, e := range dbs {
		var d DBInfo
		if err := json.Unmarshal(e.Value, &d); err != nil {
			return nil, fmt.Errorf("catalog: corrupt database entry %q: %w", e.Key, err)
		}
		s.dbs[strings.ToLower(d.Name)] = &d
		s.tables[d.ID] = map[string]*TableInfo{}
	}
	tbls, err := txn.Scan(ctx, prefixTable, tablecodec.PrefixEnd(prefixTable), 0, false)
	if err != nil {
		return nil, err
	}
	for _, e := range tbls {
		var t TableInfo
		if err := json.Unmarshal(e.Value, &t); err != nil {
			return nil, fmt.Errorf("catalog: corrupt table entry %q: %w", e.Key, err)
		}
		t.keepBinary()
		if m := s.tables[t.DBID]; m != nil {
			m[strings.ToLower(t.Name)] = &t
			s.byID[t.ID] = &t
		}
	}
	return s, nil
}

// BumpVersion increments the schema version in txn (DDL jobs use
// NextVersion, which returns it).
func BumpVersion(ctx context.Context, txn kv.Txn) error {
	v, err := Version(ctx, txn)
	if err != nil {
		return err
	}
	return txn.Set(keyVersion, []byte(strconv.FormatInt(v+1, 10)))
}

// AllocID returns a fresh database/table/index id.
func AllocID(ctx context.Context, txn kv.Txn) (int64, error) {
	return incr(ctx, txn, keyNextID, 1)
}

func incr(ctx context.Context, txn kv.Txn, key []byte, n int64) (int64, error) {
	var cur int64
	v, err := txn.Get(ctx, key)
	switch {
	case errors.Is(err, kv.ErrNotFound):
	case err != nil:
		return 0, err
	default:
		if cur, err = strconv.ParseInt(string(v), 10, 64); err != nil {
			return 0, fmt.Errorf("catalog: corrupt counter %q: %w", key, err)
		}
	}
	cur += n
	return cur, txn.Set(key, []byte(strconv.FormatInt(cur, 10)))
}

func dbKey(id int64) []byte { return tablecodec.AppendInt(append([]byte(nil), prefixDB...), id) }

func tableKey(dbID, tableID int64) []byte {
	k := tablecodec.AppendInt(append([]byte(nil), prefixTable...), dbID)
	return tablecodec.AppendInt(k, tableID)
}

func autoIDKey(tableID int64) []byte {
	return tablecodec.AppendInt(append([]byte(nil), prefixAutoID...), tableID)
}

// PutDB stores a database entry.
func PutDB(txn kv.Txn, d *DBInfo) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return txn.Set(dbKey(d.ID), b)
}

// DeleteDB removes a database entry (its tables must be dropped by the caller).
func DeleteDB(txn kv.Txn, d *DBInfo) error { return txn.Delete(dbKey(d.ID)) }

// IsTableKey reports whether key is the key of a table entry.
func IsTableKey(key []byte) bool { return bytes.HasPrefix(key, prefixTable) }

// PutTable stores a table entry.
func PutTable(txn kv.Txn, t *TableInfo) error {
	t.Collations = CollationsInForce
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return txn.Set(tableKey(t.DBID, t.ID), b)
}

// DeleteTableEntry removes a table entry only (RENAME TABLE keeps the
// table's id allocator).
func DeleteTableEntry(txn kv.Txn, t *TableInfo) error { return txn.Delete(tableKey(t.DBID, t.ID)) }

// WithoutTable returns a copy of s without table db.name.
func (s *Schema) WithoutTable(db, name string) *Schema {
	d := s.DB(db)
	if d == nil {
		return s
	}
	out := &Schema{Version: s.Version, dbs: s.dbs, tables: make(map[int64]map[string]*TableInfo, len(s.tables)), byID: s.byID}
	for id, m := range s.tables {
		out.tables[id] = m
	}
	cp := map[string]*TableInfo{}
	for k, v := range s.tables[d.ID] {
		if k != strings.ToLower(name) {
			cp[k] = v
		}
	}
	out.tables[d.ID] = cp
	return out
}

// DeleteTable removes a table entry, its id allocator and its statistics.
func DeleteTable(txn kv.Txn, t *TableInfo) error {
	if err := txn.Delete(tableKey(t.DBID, t.ID)); err != nil {
		return err
	}
	if err := txn.Delete(statsKey(t.ID)); err != nil {
		return err
	}
	return txn.Delete(autoIDKey(t.ID))
}

// AllocAutoIDs reserves n ids of a table's allocator and returns the last
// one reserved: the caller owns (last-n, last]. It is meant to run in a short
// transaction of its own, so ids are never reused even if the user
// transaction rolls back.
func AllocAutoIDs(ctx context.Context, txn kv.Txn, tableID, n int64) (int64, error) {
	return incr(ctx, txn, autoIDKey(tableID), n)
}

// RebaseAutoID raises the allocator's high-water mark to at least v.
func RebaseAutoID(ctx context.Context, txn kv.Txn, tableID, v int64) error {
	k := autoIDKey(tableID)
	cur, err := incr(ctx, txn, k, 0)
	if err != nil {
		return err
	}
	if v > cur {
		return txn.Set(k, []byte(strconv.FormatInt(v, 10)))
	}
	return nil
}

// IsIntegerType reports whether ft is an integer column type (candidate for
// a clustered integer primary key).
func IsIntegerType(ft *ptypes.FieldType) bool {
	switch ft.GetType() {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		return true
	}
	return false
}

// GCJob is a key range whose data belongs to a dropped table or index. DDL
// records the job in its own transaction, so the range is reclaimed even if
// the node stops before deleting it.
//
// The range is destroyed outside MVCC (every version at once) only when no
// transaction can read it any more: once the GC safe point reaches
// NotBefore, a timestamp at which the drop was already committed. The
// first cleanup that sees the job records NotBefore (its own start
// timestamp: the job was visible to it); zero means not seen yet.
type GCJob struct {
	ID        int64  `json:"id"`
	Start     []byte `json:"start"`
	End       []byte `json:"end"`
	NotBefore uint64 `json:"not_before,omitempty"`
}

func gcKey(id int64) []byte { return tablecodec.AppendInt(append([]byte(nil), prefixGC...), id) }

// AddGCJob records that [start, end) is to be deleted.
func AddGCJob(ctx context.Context, txn kv.Txn, start, end []byte) error {
	id, err := AllocID(ctx, txn)
	if err != nil {
		return err
	}
	return PutGCJob(txn, &GCJob{ID: id, Start: start, End: end})
}

// GCJobs lists the pending jobs.
func GCJobs(ctx context.Context, txn kv.Txn) ([]*GCJob, error) {
	kvs, err := txn.Scan(ctx, prefixGC, tablecodec.PrefixEnd(prefixGC), 0, false)
	if err != nil {
		return nil, err
	}
	out := make([]*GCJob, 0, len(kvs))
	for _, e := range kvs {
		var j GCJob
		if err := json.Unmarshal(e.Value, &j); err != nil {
			return nil, fmt.Errorf("catalog: corrupt gc job %q: %w", e.Key, err)
		}
		out = append(out, &j)
	}
	return out, nil
}

// PutGCJob stores a job again after the caller changed it (NotBefore).
func PutGCJob(txn kv.Txn, j *GCJob) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return txn.Set(gcKey(j.ID), b)
}

// FinishGCJob removes a completed job.
func FinishGCJob(txn kv.Txn, id int64) error { return txn.Delete(gcKey(id)) }
