package exec

import (
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/types"
)

// Grace hash join: past the quota, the build side's rows move to partition
// files by the hash of their join key, the probe side is written to
// partition files by the same hash, and each pair of partitions is joined
// on its own (every match of a probe row is in its partition). Probe rows
// whose key is NULL match nothing: an inner or semi join drops them, a left
// or anti join keeps them in partition 0, where they come out (a left
// join's NULL-extended).

// spillBuild moves the hash table to partition files.
func (j *joinExec) spillBuild(c *Context) error {
	if !c.canSpill() || j.depth >= maxSpillDepth {
		return c.Mem.overErr()
	}
	j.rparts = newPartitions()
	for k, rows := range j.table {
		i := j.rparts.of([]byte(k))
		for _, r := range rows {
			if err := j.rparts.write(c, i, r); err != nil {
				return err
			}
		}
	}
	j.table = map[string][][]types.Datum{}
	j.acct.release(c)
	return nil
}

// nextSpilled partitions the probe side (first call), then joins the
// partitions one after the other.
func (j *joinExec) nextSpilled(c *Context) ([][]types.Datum, error) {
	if j.lparts == nil {
		j.lparts = &partitions{seed: j.rparts.seed}
		var key []byte
		for {
			b, err := j.left.Next(c)
			if err != nil {
				return nil, err
			}
			if b == nil {
				break
			}
			for _, l := range b {
				k, ok, err := joinKey(c, key[:0], j.p.LeftKeys, l, j.colls)
				if err != nil {
					return nil, err
				}
				key = k
				i := 0
				if ok {
					i = j.lparts.of(k)
				} else if !keepsUnmatched(j.p.Type) {
					continue
				}
				if err := j.lparts.write(c, i, l); err != nil {
					return nil, err
				}
			}
		}
		j.acct.disk += j.rparts.bytes() + j.lparts.bytes()
	}
	for {
		if j.sub != nil {
			b, err := j.sub.Next(c)
			if err != nil || b != nil {
				return b, err
			}
			j.sub.acct.release(c)
			j.acct.peak = max(j.acct.peak, j.sub.acct.peak)
			j.acct.disk += j.sub.acct.disk
			j.workers = max(j.workers, j.sub.workers)
			j.sub = nil
		}
		if j.part >= spillPartitions {
			return nil, nil
		}
		i := j.part
		j.part++
		lf, rf := j.lparts.files[i], j.rparts.files[i]
		if lf == nil || (rf == nil && !keepsUnmatched(j.p.Type)) {
			if lf != nil {
				lf.remove(c)
			}
			if rf != nil {
				rf.remove(c)
			}
			continue
		}
		var right Executor = &valuesExec{}
		if rf != nil {
			right = &spillScan{file: rf}
		}
		j.sub = &joinExec{left: &spillScan{file: lf}, right: right, p: j.p, rightWidth: j.rightWidth, colls: j.colls, depth: j.depth + 1}
	}
}

// keepsUnmatched: the join outputs left rows that match no right row.
func keepsUnmatched(t plan.JoinType) bool { return t == plan.LeftJoin || t == plan.AntiJoin }

// Nested loop past the quota: the inner (right) rows move to a spill file,
// and each batch of outer (left) rows is joined with one read of the file
// (a block nested loop). Rows then come out by batch of left rows, and in
// it by right row.

// nlSpill is the state of a nested loop over spilled inner rows.
type nlSpill struct {
	file     *spillFile
	batch    [][]types.Datum // the current left rows
	matched  []bool
	r        *spillReader
	right    []types.Datum // the current right row
	li       int           // next left row to pair with right
	tail     int           // LEFT JOIN: next left row to check for no match (-1: not yet)
	pairs    int
	leftDone bool
}

// spillInner moves the nested loop's inner rows to a spill file.
func (j *joinExec) spillInner(c *Context) error {
	if !c.canSpill() || j.p.Type.LeftOnly() {
		// (The planner gives a semi or anti join keys: its rows are
		// hashed, never in a nested loop's list.)
		return c.Mem.overErr()
	}
	f, err := c.newSpillFile()
	if err != nil {
		return err
	}
	for _, r := range j.all {
		if err := f.write(r); err != nil {
			return err
		}
	}
	j.all = nil
	j.acct.release(c)
	j.nl = &nlSpill{file: f}
	return nil
}

// nextNL returns the next batch of a nested loop over spilled inner rows.
func (j *joinExec) nextNL(c *Context) ([][]types.Datum, error) {
	n := j.nl
	var out [][]types.Datum
	var cat rowConcat
	for len(out) < BatchSize {
		if n.batch == nil {
			if n.leftDone {
				break
			}
			if err := c.Ctx.Err(); err != nil {
				return nil, err
			}
			b, err := j.left.Next(c)
			if err != nil {
				return nil, err
			}
			if b == nil {
				n.leftDone = true
				j.acct.disk += n.file.bytes
				n.file.remove(c)
				break
			}
			if n.r, err = n.file.reader(); err != nil {
				return nil, err
			}
			n.batch, n.matched, n.li, n.tail = b, make([]bool, len(b)), len(b), -1
		}
		if n.tail >= 0 {
			for ; n.tail < len(n.batch) && len(out) < BatchSize; n.tail++ {
				if !n.matched[n.tail] {
					out = append(out, cat.concat(n.batch[n.tail], nil, j.rightWidth))
				}
			}
			if n.tail >= len(n.batch) {
				n.batch = nil
			}
			continue
		}
		if n.li >= len(n.batch) {
			row, err := n.r.next()
			if err != nil {
				return nil, err
			}
			if row == nil {
				if j.p.Type == plan.LeftJoin {
					n.tail = 0
				} else {
					n.batch = nil
				}
				continue
			}
			n.right, n.li = row, 0
		}
		for n.li < len(n.batch) && len(out) < BatchSize {
			if n.pairs++; n.pairs&4095 == 0 {
				if err := c.Ctx.Err(); err != nil {
					return nil, err
				}
			}
			row := cat.concat(n.batch[n.li], n.right, j.rightWidth)
			n.li++
			if j.p.Cond != nil {
				ok, err := truth(c, j.p.Cond, row)
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
			}
			n.matched[n.li-1] = true
			out = append(out, row)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
