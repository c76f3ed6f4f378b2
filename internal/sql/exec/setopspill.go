package exec

import (
	"hash/maphash"

	"github.com/strata-db/strata/internal/sql/types"
)

// EXCEPT and INTERSECT past the quota. The right input's rows are counted
// by key (the whole row's hash key); once the counts take the statement
// past its quota, the keys held stay in memory and the right rows of other
// keys go to partition files by the hash of their key. Left rows whose key
// is held are answered at once; the others go to partition files alike,
// and each pair of partitions is then answered on its own (every row of a
// key is in one partition). The keys EXCEPT and INTERSECT have returned
// (to return each once) are charged too: past the quota, left rows of
// keys neither held nor returned go to disk the same way.

// buildRight counts the right input's rows by key.
func (s *setOpExec) buildRight(c *Context) error {
	if !s.convInit && !s.raw {
		s.conversions()
	}
	s.seen = map[string]int{}
	var key []byte
	for {
		batch, err := s.next(c, true)
		if err != nil {
			return err
		}
		if batch == nil {
			return nil
		}
		for _, r := range batch {
			key = hashRow(key[:0], r, s.colls)
			if n, ok := s.seen[string(key)]; ok {
				s.seen[string(key)] = n + 1
				continue
			}
			if s.rparts != nil {
				if err := s.rparts.write(c, s.rparts.of(key), r); err != nil {
					return err
				}
				continue
			}
			s.seen[string(key)] = 1
			if s.acct.grow(c, int64(len(key))+48) {
				if !c.canSpill() || s.depth >= maxSpillDepth {
					return c.Mem.overErr()
				}
				s.rparts = newPartitions()
			}
		}
	}
}

// spillSeed is the hash seed of the partitions: the right side's when it
// spilled.
func (s *setOpExec) spillSeed() maphash.Seed {
	if s.rparts != nil {
		return s.rparts.seed
	}
	return maphash.MakeSeed()
}

// spillLeft writes a left row whose key is not held to its partition.
func (s *setOpExec) spillLeft(c *Context, key []byte, r []types.Datum) error {
	if s.lparts == nil {
		s.lparts = &partitions{seed: s.spillSeed()}
	}
	return s.lparts.write(c, s.lparts.of(key), r)
}

// nextSpilled answers the spilled partitions one after the other.
func (s *setOpExec) nextSpilled(c *Context) ([][]types.Datum, error) {
	if s.lparts == nil && s.rparts == nil {
		s.release(c)
		return nil, nil
	}
	if s.part == 0 && s.sub == nil {
		// The keys held are answered: let them go.
		s.release(c)
		if s.lparts != nil {
			s.acct.disk += s.lparts.bytes()
		}
		if s.rparts != nil {
			s.acct.disk += s.rparts.bytes()
		}
	}
	for {
		if s.sub != nil {
			b, err := s.sub.Next(c)
			if err != nil || b != nil {
				return b, err
			}
			s.acct.peak = max(s.acct.peak, s.sub.acct.peak)
			s.acct.disk += s.sub.acct.disk
			s.sub = nil
		}
		if s.part >= spillPartitions {
			return nil, nil
		}
		i := s.part
		s.part++
		var lf, rf *spillFile
		if s.lparts != nil {
			lf = s.lparts.files[i]
		}
		if s.rparts != nil {
			rf = s.rparts.files[i]
		}
		if lf == nil {
			// No left row: nothing to return.
			if rf != nil {
				rf.remove(c)
			}
			continue
		}
		var right Executor = &valuesExec{}
		if rf != nil {
			right = &spillScan{file: rf}
		}
		s.sub = &setOpExec{left: &spillScan{file: lf}, right: right, p: s.p, raw: true, colls: s.colls, depth: s.depth + 1}
	}
}

// release gives back the memory of the keys held.
func (s *setOpExec) release(c *Context) {
	s.seen, s.emitted = nil, nil
	s.acct.release(c)
}
