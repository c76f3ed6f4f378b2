package exec

import (
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/types"
)

// Grace hash join: past the quota, the build side's rows move to partition
// files by the hash of their join key, the probe side is written to
// partition files by the same hash, and each pair of partitions is joined
// on its own (every match of a probe row is in its partition). Probe rows
// whose key is NULL match nothing: an inner join drops them, a left join
// keeps them in partition 0, where they come out NULL-extended.

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
				} else if j.p.Type != plan.LeftJoin {
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
		if lf == nil || (rf == nil && j.p.Type != plan.LeftJoin) {
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
