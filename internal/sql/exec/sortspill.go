package exec

import (
	"container/heap"

	"github.com/strata-db/strata/internal/sql/types"
)

// External sort: past the quota, sortExec writes what it holds as a sorted
// run (the row, then its key values when the keys are not plain columns)
// and starts again; at the end the runs are merged, the earlier run first
// among equal keys, which keeps the sort stable.

// spillRun sorts the rows held and writes them as one run.
func (s *sortExec) spillRun(c *Context) error {
	s.sort()
	if s.err != nil {
		return s.err
	}
	f, err := c.newSpillFile()
	if err != nil {
		return err
	}
	s.runs = append(s.runs, f)
	var buf []types.Datum
	for _, e := range s.ents {
		row := s.rows[e.row]
		if s.cols == nil {
			buf = append(append(buf[:0], row...), s.vals[e.row*len(s.keys):(e.row+1)*len(s.keys)]...)
			row = buf
		}
		if err := f.write(row); err != nil {
			return err
		}
	}
	s.acct.disk += f.bytes
	s.rows, s.vals, s.ents = s.rows[:0], s.vals[:0], s.ents[:0]
	clear(s.rows[:cap(s.rows)])
	s.acct.release(c)
	return nil
}

// runKey returns key i of a row read from a run.
func (s *sortExec) runKey(row []types.Datum, i int) types.Datum {
	if s.cols != nil {
		return row[s.cols[i]]
	}
	return row[len(row)-len(s.keys)+i]
}

func (s *sortExec) cmpRunRows(a, b []types.Datum) int {
	for i := range s.keys {
		if c := s.cmpKey(i, s.runKey(a, i), s.runKey(b, i)); c != 0 {
			return c
		}
	}
	return 0
}

// runCursor is the next row of one run.
type runCursor struct {
	r   *spillReader
	row []types.Datum
	run int
}

// runMerger merges sorted runs.
type runMerger struct {
	s    *sortExec
	curs []*runCursor
	// final: rows returned to the consumer (dropping the key values and,
	// under DISTINCT, duplicates); otherwise rows are written to a run.
	final bool
	// DISTINCT over the merged rows: the first row of the current run of
	// equal sort keys and the distinct keys seen in it.
	runFirst []types.Datum
	seen     map[string]struct{}
	key      []byte
	files    []*spillFile
}

func (m *runMerger) Len() int { return len(m.curs) }
func (m *runMerger) Less(i, j int) bool {
	if c := m.s.cmpRunRows(m.curs[i].row, m.curs[j].row); c != 0 {
		return c < 0
	}
	return m.curs[i].run < m.curs[j].run
}
func (m *runMerger) Swap(i, j int) { m.curs[i], m.curs[j] = m.curs[j], m.curs[i] }
func (m *runMerger) Push(x any)    { m.curs = append(m.curs, x.(*runCursor)) }
func (m *runMerger) Pop() any {
	x := m.curs[len(m.curs)-1]
	m.curs = m.curs[:len(m.curs)-1]
	return x
}

// newRunMerger opens runs (in input order) for merging.
func (s *sortExec) newRunMerger(runs []*spillFile) (*runMerger, error) {
	m := &runMerger{s: s, files: runs}
	for i, f := range runs {
		r, err := f.reader()
		if err != nil {
			return nil, err
		}
		row, err := r.next()
		if err != nil {
			return nil, err
		}
		if row != nil {
			m.curs = append(m.curs, &runCursor{r: r, row: row, run: i})
		}
	}
	heap.Init(m)
	return m, s.err
}

// pop returns the smallest row, or nil when all runs are read.
func (m *runMerger) pop() ([]types.Datum, error) {
	if len(m.curs) == 0 {
		return nil, nil
	}
	cur := m.curs[0]
	row := cur.row
	next, err := cur.r.next()
	if err != nil {
		return nil, err
	}
	if next == nil {
		heap.Pop(m)
	} else {
		cur.row = next
		heap.Fix(m, 0)
	}
	return row, m.s.err
}

func (m *runMerger) close(c *Context) {
	for _, f := range m.files {
		f.remove(c)
	}
	m.files = nil
}

// startMerge merges runs maxMergeFanIn at a time until one merge can
// produce the output.
func (s *sortExec) startMerge(c *Context) (*runMerger, error) {
	runs := s.runs
	for len(runs) > maxMergeFanIn {
		var next []*spillFile
		for len(runs) > 0 {
			n := min(maxMergeFanIn, len(runs))
			group := runs[:n]
			runs = runs[n:]
			if n == 1 {
				next = append(next, group[0])
				continue
			}
			m, err := s.newRunMerger(group)
			if err != nil {
				return nil, err
			}
			f, err := c.newSpillFile()
			if err != nil {
				return nil, err
			}
			for {
				row, err := m.pop()
				if err != nil {
					return nil, err
				}
				if row == nil {
					break
				}
				if err := f.write(row); err != nil {
					return nil, err
				}
			}
			s.acct.disk += f.bytes
			m.close(c)
			next = append(next, f)
		}
		runs = next
	}
	s.runs = nil
	m, err := s.newRunMerger(runs)
	if err != nil {
		return nil, err
	}
	m.final = true
	return m, nil
}

// next returns the next batch of merged rows.
func (m *runMerger) next(c *Context) ([][]types.Datum, error) {
	if err := c.Ctx.Err(); err != nil {
		return nil, err
	}
	s := m.s
	var out [][]types.Datum
	for len(out) < BatchSize {
		row, err := m.pop()
		if err != nil {
			return nil, err
		}
		if row == nil {
			m.close(c)
			break
		}
		if s.distinct > 0 {
			if m.runFirst == nil || s.cmpRunRows(m.runFirst, row) != 0 {
				m.runFirst = row
				clear(m.seen)
			}
			if m.seen == nil {
				m.seen = map[string]struct{}{}
			}
			m.key = hashRow(m.key[:0], row[:s.distinct], s.dcolls)
			if _, dup := m.seen[string(m.key)]; dup {
				continue
			}
			m.seen[string(m.key)] = struct{}{}
		}
		if s.cols == nil {
			row = row[:len(row)-len(s.keys)]
		}
		out = append(out, row)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
