package catalog

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/tablecodec"
)

// Table statistics (ANALYZE TABLE) are stored beside the schema, as JSON
// under the "m" prefix, but outside the schema version: collecting them
// is not a schema change, so it neither waits for leases nor re-plans
// prepared statements.
//
//	mStatVersion    bumped by every ANALYZE TABLE; engines reload the
//	                statistics when it moves (StatsVersion)
//	mStats{tblID}   TableStats of one table; a later ANALYZE replaces it,
//	                DeleteTable (DROP / TRUNCATE TABLE) removes it
var (
	keyStatsVersion = []byte("mStatVersion")
	prefixStats     = []byte("mStats")
)

// TableStats are the statistics ANALYZE TABLE collected for one table at
// one snapshot.
type TableStats struct {
	TableID int64 `json:"table_id"`
	// Version is the stats version the ANALYZE stored them under.
	Version int64 `json:"version"`
	// Snapshot is the timestamp the rows were read at; Analyzed the wall
	// clock time (Unix seconds) of the ANALYZE.
	Snapshot uint64 `json:"snapshot"`
	Analyzed int64  `json:"analyzed"`
	// Rows is the table's row count.
	Rows int64 `json:"rows"`
	// Columns by column id (a column added later has none; a dropped
	// column's entry is never looked up).
	Columns map[int64]*ColumnStats `json:"columns"`
	// Indexes by index id: per prefix of the index's columns, the number
	// of distinct prefixes (CARDINALITY of INFORMATION_SCHEMA.STATISTICS).
	Indexes map[int64][]int64 `json:"indexes,omitempty"`
}

// ColumnStats are the statistics of one column.
type ColumnStats struct {
	// NDV is the number of distinct non-NULL values (estimated by a
	// HyperLogLog sketch over every row).
	NDV int64 `json:"ndv"`
	// Nulls is the number of NULLs.
	Nulls int64 `json:"nulls"`
	// Min and Max are the least and greatest values on a linear scale
	// (numbers as they are, dates and times in seconds; plan.StatPos),
	// for columns of such types that have a non-NULL value (HasRange).
	HasRange bool    `json:"has_range,omitempty"`
	Min      float64 `json:"min,omitempty"`
	Max      float64 `json:"max,omitempty"`
}

// Column returns the statistics of column id, or nil.
func (t *TableStats) Column(id int64) *ColumnStats {
	if t == nil {
		return nil
	}
	return t.Columns[id]
}

// Stats is an immutable snapshot of every table's statistics.
type Stats struct {
	Version int64
	byTable map[int64]*TableStats
}

// Table returns the statistics of a table, or nil when it has none.
func (s *Stats) Table(id int64) *TableStats {
	if s == nil {
		return nil
	}
	return s.byTable[id]
}

func statsKey(tableID int64) []byte {
	return tablecodec.AppendInt(append([]byte(nil), prefixStats...), tableID)
}

// StatsVersionKey is the key of the statistics version counter.
func StatsVersionKey() []byte { return keyStatsVersion }

// StatsVersion reads the statistics version visible to txn (0 before any
// ANALYZE TABLE).
func StatsVersion(ctx context.Context, txn kv.Txn) (int64, error) {
	return tablecodec.ReadCounter(ctx, txn, keyStatsVersion)
}

// LoadStats reads every table's statistics visible to txn.
func LoadStats(ctx context.Context, txn kv.Txn) (*Stats, error) {
	ver, err := StatsVersion(ctx, txn)
	if err != nil {
		return nil, err
	}
	s := &Stats{Version: ver, byTable: map[int64]*TableStats{}}
	kvs, err := txn.Scan(ctx, prefixStats, tablecodec.PrefixEnd(prefixStats), 0, false)
	if err != nil {
		return nil, err
	}
	for _, e := range kvs {
		var t TableStats
		if err := json.Unmarshal(e.Value, &t); err != nil {
			return nil, fmt.Errorf("catalog: corrupt statistics entry %q: %w", e.Key, err)
		}
		s.byTable[t.TableID] = &t
	}
	return s, nil
}

// PutStats stores a table's statistics under a new statistics version,
// which it returns (and sets in t.Version).
func PutStats(ctx context.Context, txn kv.Txn, t *TableStats) (int64, error) {
	ver, err := incr(ctx, txn, keyStatsVersion, 1)
	if err != nil {
		return 0, err
	}
	t.Version = ver
	b, err := json.Marshal(t)
	if err != nil {
		return 0, err
	}
	return ver, txn.Set(statsKey(t.TableID), b)
}
