package sql

import (
	"context"
	"log/slog"
	"sync"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
)

// Automatic ANALYZE (TiDB's auto analyze): an engine counts the rows its
// committed INSERT, UPDATE and DELETE statements changed in each table
// that has statistics, and once they pass half of the rows the statistics
// counted (and 1,000), its schema poll analyzes the table again in the
// background. Tables without statistics are never analyzed automatically,
// so their plans stay those of the rank rules until someone runs ANALYZE
// TABLE. The counts are the engine's own (another node's changes count on
// that node) and live in memory: a restart starts them again at zero.

const (
	autoAnalyzeRatio  = 0.5
	autoAnalyzeMinMod = 1000
)

// modCounts are an engine's changed rows per table since its last ANALYZE.
type modCounts struct {
	mu      sync.Mutex
	n       map[int64]int64
	running bool // an automatic ANALYZE is under way
}

// noteMods records, for the transaction, rows a statement changed in the
// tables it wrote that have statistics.
func (s *Session) noteMods(tables []int64, rows uint64) {
	if rows == 0 || len(tables) == 0 {
		return
	}
	st := s.e.stats.Load()
	for _, id := range tables {
		if st.Table(id) == nil {
			continue
		}
		if s.x.mods == nil {
			s.x.mods = map[int64]int64{}
		}
		s.x.mods[id] += int64(rows)
	}
}

// commitMods adds a committed transaction's changed rows to the engine's.
func (s *Session) commitMods(committed bool) {
	if len(s.x.mods) == 0 {
		return
	}
	if committed {
		m := &s.e.mods
		m.mu.Lock()
		if m.n == nil {
			m.n = map[int64]int64{}
		}
		for id, n := range s.x.mods {
			m.n[id] += n
		}
		m.mu.Unlock()
	}
	clear(s.x.mods)
}

// autoAnalyze starts, when none is running, the ANALYZE of a table whose
// changed rows passed the threshold (Tick calls it).
func (e *Engine) autoAnalyze(ctx context.Context) {
	m := &e.mods
	m.mu.Lock()
	if m.running || len(m.n) == 0 {
		m.mu.Unlock()
		return
	}
	st, schema := e.stats.Load(), e.schema.Load()
	var table *catalog.TableInfo
	for id, n := range m.n {
		ts := st.Table(id)
		if ts == nil {
			delete(m.n, id)
			continue
		}
		if float64(n) >= autoAnalyzeRatio*float64(max(ts.Rows, autoAnalyzeMinMod)) {
			if table = schema.TableByID(id); table != nil {
				delete(m.n, id)
				break
			}
		}
	}
	if table == nil {
		m.mu.Unlock()
		return
	}
	m.running = true
	m.mu.Unlock()
	db := schema.DBByID(table.DBID)
	if db == nil {
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
		return
	}
	e.loops.Add(1)
	go func() {
		defer e.loops.Done()
		defer func() {
			m.mu.Lock()
			m.running = false
			m.mu.Unlock()
		}()
		s := e.NewSession("root", "localhost")
		defer s.Close()
		if err := s.UseDB(db.Name); err != nil {
			return
		}
		if err := s.analyzeTable(ctx, db.Name, table); err != nil {
			if ctx.Err() == nil {
				slog.Warn("sql: automatic ANALYZE failed", "table", db.Name+"."+table.Name, "err", err)
			}
			return
		}
		if err := e.readOnly(ctx, func(txn kv.Txn) error { return e.refreshStats(ctx, txn) }); err != nil && ctx.Err() == nil {
			slog.Warn("sql: loading statistics after automatic ANALYZE", "err", err)
		}
	}()
}
