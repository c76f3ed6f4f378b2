package sql

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/privilege"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// SPLIT TABLE and SHOW TABLE ... REGIONS, as TiDB spells them:
//
//	SPLIT TABLE t BETWEEN (lo) AND (hi) REGIONS n   n regions of even handle ranges in [lo, hi)
//	SPLIT TABLE t BY (h1), (h2), ...                a region starting at each handle
//	SPLIT TABLE t INDEX i BY (v1, ...), ...         a region starting at each index value
//	SHOW TABLE t REGIONS / SHOW TABLE t INDEX i REGIONS
//
// The regions come from the node (RegionAdmin); an engine without one
// (outside a node) refuses them.

// RegionAdmin splits regions and lists them, for SPLIT and SHOW REGIONS.
type RegionAdmin interface {
	// SplitAt splits the regions holding keys at them (keys that are a
	// region's start already are skipped) and returns how many new
	// regions there are.
	SplitAt(ctx context.Context, keys [][]byte) (int, error)
	// Regions lists the regions overlapping [start, end), in key order.
	Regions(ctx context.Context, start, end []byte) ([]RegionRow, error)
}

// RegionRow is one region as SHOW TABLE ... REGIONS shows it.
type RegionRow struct {
	ID               uint64
	StartKey, EndKey []byte
	LeaderID         uint64
	LeaderStore      uint64
	Peers            []uint64
	WrittenBytes     uint64
	ReadBytes        uint64
	ApproximateSize  uint64 // bytes
	ApproximateKeys  uint64
	SchedulingState  string
}

// maxSplitRegions bounds SPLIT ... REGIONS n (TiDB's limit).
const maxSplitRegions = 1000

func (s *Session) runSplit(ctx context.Context, n *ast.SplitRegionStmt) (*Result, error) {
	if s.e.regions == nil {
		return nil, notSupported("SPLIT TABLE outside a cluster node")
	}
	if len(n.PartitionNames) > 0 || (n.SplitSyntaxOpt != nil && n.SplitSyntaxOpt.HasPartition) {
		return nil, notSupported("SPLIT PARTITION")
	}
	schema, err := s.currentSchema(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.tableOf(schema, n.Table)
	if err != nil {
		return nil, err
	}
	if t.ViewSQL != "" {
		return nil, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "'%s' is a view, not a table", t.Name)
	}
	var idx *catalog.IndexInfo
	if n.IndexName.L != "" {
		for _, ix := range t.Indexes {
			if strings.EqualFold(ix.Name, n.IndexName.O) {
				idx = ix
			}
		}
		if idx == nil {
			return nil, sqlerr.New(sqlerr.ErKeyDoesNotExist, "42000", "Key '%s' doesn't exist in table '%s'", n.IndexName.O, t.Name)
		}
	}
	opt := n.SplitOpt
	var keys [][]byte
	switch {
	case opt == nil:
		return nil, notSupported("SPLIT without BY or BETWEEN")
	case len(opt.ValueLists) > 0:
		for _, vl := range opt.ValueLists {
			vals, err := s.splitValues(ctx, vl)
			if err != nil {
				return nil, err
			}
			k, err := splitKeyOf(t, idx, vals)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		}
	default:
		if opt.Num < 1 || opt.Num > maxSplitRegions {
			return nil, sqlerr.New(sqlerr.ErWrongArguments, "HY000",
				"Split table region num should be between 1 and %d, not %d", maxSplitRegions, opt.Num)
		}
		if idx != nil {
			return nil, notSupported("SPLIT TABLE ... INDEX ... BETWEEN (use BY)")
		}
		lo, err := s.splitHandle(ctx, opt.Lower)
		if err != nil {
			return nil, err
		}
		hi, err := s.splitHandle(ctx, opt.Upper)
		if err != nil {
			return nil, err
		}
		if lo >= hi {
			return nil, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Split table `%s` region lower value %d should less than the upper value %d", t.Name, lo, hi)
		}
		step := (hi - lo) / opt.Num
		if step < 1 {
			step = 1
		}
		for i := int64(0); i < opt.Num && lo+i*step < hi; i++ {
			keys = append(keys, tablecodec.RecordKey(t.ID, lo+i*step))
		}
	}
	n2, err := s.e.regions.SplitAt(ctx, keys)
	if err != nil {
		return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "split regions: %v", err)
	}
	res := &Result{Columns: textColumns("TOTAL_SPLIT_REGION", "SCATTER_FINISH_RATIO")}
	intColumns(res.Columns, "TOTAL_SPLIT_REGION")
	res.Rows = [][]types.Datum{{types.NewInt(int64(n2)), types.NewFloat(1)}}
	return res, nil
}

func (s *Session) splitValues(ctx context.Context, es []ast.ExprNode) ([]types.Datum, error) {
	out := make([]types.Datum, 0, len(es))
	for _, e := range es {
		v, err := s.selectValue(ctx, e)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *Session) splitHandle(ctx context.Context, es []ast.ExprNode) (int64, error) {
	if len(es) != 1 {
		return 0, sqlerr.New(sqlerr.ErWrongValueCount, "21S01", "Split table region lower value count should be 1")
	}
	v, err := s.selectValue(ctx, es[0])
	if err != nil {
		return 0, err
	}
	h, err := v.ToInt64()
	if err != nil || v.IsNull() {
		return 0, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "a split value of a table's rows is an integer handle")
	}
	return h, nil
}

func splitKeyOf(t *catalog.TableInfo, idx *catalog.IndexInfo, vals []types.Datum) ([]byte, error) {
	if idx == nil {
		if len(vals) != 1 {
			return nil, sqlerr.New(sqlerr.ErWrongValueCount, "21S01", "Split table region value count should be 1")
		}
		h, err := vals[0].ToInt64()
		if err != nil || vals[0].IsNull() {
			return nil, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "a split value of a table's rows is an integer handle")
		}
		return tablecodec.RecordKey(t.ID, h), nil
	}
	if len(vals) > len(idx.Columns) {
		return nil, sqlerr.New(sqlerr.ErWrongValueCount, "21S01", "Split index `%s` region value count should not exceed %d", idx.Name, len(idx.Columns))
	}
	return tablecodec.AppendIndexValues(tablecodec.IndexPrefix(t.ID, idx.ID), vals)
}

// showRegions answers SHOW TABLE t [INDEX i] REGIONS with TiDB's columns.
func (s *Session) showRegions(ctx context.Context, n *ast.ShowStmt) (*Result, error) {
	if s.e.regions == nil {
		return nil, notSupported("SHOW TABLE REGIONS outside a cluster node")
	}
	schema, err := s.currentSchema(ctx)
	if err != nil {
		return nil, err
	}
	t, err := s.tableOf(schema, n.Table)
	if err != nil {
		return nil, err
	}
	// Region bounds are row and index keys: the table's data.
	if err := s.checkNeeds([]need{s.tableNeed(n.Table, privilege.Select)}); err != nil {
		return nil, err
	}
	start := tablecodec.RecordPrefix(t.ID)
	if n.IndexName.L != "" {
		var idx *catalog.IndexInfo
		for _, ix := range t.Indexes {
			if strings.EqualFold(ix.Name, n.IndexName.O) {
				idx = ix
			}
		}
		if idx == nil {
			return nil, sqlerr.New(sqlerr.ErKeyDoesNotExist, "42000", "Key '%s' doesn't exist in table '%s'", n.IndexName.O, t.Name)
		}
		start = tablecodec.IndexPrefix(t.ID, idx.ID)
	}
	rows, err := s.e.regions.Regions(ctx, start, tablecodec.PrefixEnd(start))
	if err != nil {
		return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "list regions: %v", err)
	}
	res := &Result{Columns: textColumns("REGION_ID", "START_KEY", "END_KEY", "LEADER_ID", "LEADER_STORE_ID", "PEERS",
		"SCATTERING", "WRITTEN_BYTES", "READ_BYTES", "APPROXIMATE_SIZE(MB)", "APPROXIMATE_KEYS",
		"SCHEDULING_CONSTRAINTS", "SCHEDULING_STATE")}
	intColumns(res.Columns, "REGION_ID", "LEADER_ID", "LEADER_STORE_ID", "SCATTERING", "WRITTEN_BYTES", "READ_BYTES",
		"APPROXIMATE_SIZE(MB)", "APPROXIMATE_KEYS")
	for _, r := range rows {
		peers := make([]string, len(r.Peers))
		for i, p := range r.Peers {
			peers[i] = fmt.Sprint(p)
		}
		res.Rows = append(res.Rows, []types.Datum{types.NewInt(int64(r.ID)), types.NewString(FormatRegionKey(r.StartKey)),
			types.NewString(FormatRegionKey(r.EndKey)), types.NewInt(int64(r.LeaderID)), types.NewInt(int64(r.LeaderStore)),
			types.NewString(strings.Join(peers, ", ")), types.NewInt(0), types.NewInt(int64(r.WrittenBytes)),
			types.NewInt(int64(r.ReadBytes)), types.NewInt(int64(r.ApproximateSize >> 20)), types.NewInt(int64(r.ApproximateKeys)),
			types.NewString(""), types.NewString(r.SchedulingState)})
	}
	return res, nil
}

// FormatRegionKey prints a region boundary as TiDB does: t_{id}_r_{handle}
// for a row, t_{id}_i_{index}_{hex of the values} for an index entry,
// t_{id}_ for a table's start, hex otherwise.
func FormatRegionKey(k []byte) string {
	if len(k) == 0 {
		return ""
	}
	if tid, h, err := tablecodec.DecodeRecordKey(k); err == nil && bytes.Equal(k, tablecodec.RecordKey(tid, h)) {
		return fmt.Sprintf("t_%d_r_%d", tid, h)
	}
	tid, ok := tablecodec.TableIDOf(k)
	if !ok {
		return hex.EncodeToString(k)
	}
	rest := k[len(tablecodec.TablePrefix(tid)):]
	switch {
	case len(rest) == 0:
		return fmt.Sprintf("t_%d_", tid)
	case bytes.Equal(k, tablecodec.RecordPrefix(tid)):
		return fmt.Sprintf("t_%d_r", tid)
	case bytes.HasPrefix(rest, []byte("_i")) && len(rest) >= 10:
		if iid, vals, err := tablecodec.DecodeInt(rest[2:]); err == nil {
			if len(vals) == 0 {
				return fmt.Sprintf("t_%d_i_%d", tid, iid)
			}
			return fmt.Sprintf("t_%d_i_%d_%s", tid, iid, hex.EncodeToString(vals))
		}
	}
	return fmt.Sprintf("t_%d_%s", tid, hex.EncodeToString(rest))
}

// preSplit carries out CREATE TABLE's PRE_SPLIT_REGIONS = n (TiDB's): a
// table whose keys carry shard bits (AUTO_RANDOM, SHARD_ROW_ID_BITS)
// starts with 2^n regions, one per range of shards, so its first inserts
// spread at once. A split that fails leaves a warning, not an error (the
// table exists; regions split later on their own).
func (s *Session) preSplit(ctx context.Context, ct *ast.CreateTableStmt) {
	n := 0
	for _, o := range ct.Options {
		if o.Tp == ast.TableOptionPreSplitRegion {
			n = int(o.UintValue)
		}
	}
	if n == 0 || s.e.regions == nil {
		return
	}
	db := ct.Table.Schema.O
	if db == "" {
		db = s.db
	}
	t := s.e.schema.Load().Table(db, ct.Table.Name.O)
	if t == nil {
		return
	}
	bits := t.ShardRowIDBits
	for _, c := range t.Columns {
		if c.AutoRandomBits > 0 {
			bits = c.AutoRandomBits
		}
	}
	n = min(n, bits)
	if n == 0 {
		return
	}
	var keys [][]byte
	for i := int64(1); i < 1<<n; i++ {
		keys = append(keys, tablecodec.RecordKey(t.ID, i<<(63-n)))
	}
	if _, err := s.e.regions.SplitAt(ctx, keys); err != nil {
		s.warnings = append(s.warnings, sqlerr.New(sqlerr.ErUnknown, "HY000", "PRE_SPLIT_REGIONS: %v", err))
	}
}
