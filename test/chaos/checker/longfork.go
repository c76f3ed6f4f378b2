package checker

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/strata-db/strata/test/chaos/history"
)

// Long fork: writers insert single keys, each key once, in their own
// transactions; readers read a group of keys in one transaction and report
// which are present. Under snapshot isolation every two reads of a group
// saw writes in a consistent order: one's set of present keys contains the
// other's. Two reads that each saw a write the other did not are a long
// fork (Jepsen's long-fork workload; parallel snapshot isolation allows it,
// snapshot isolation does not).
//
// Operations: f "insert" with value the key; f "read" with value
// LongForkRead.
type LongForkRead struct {
	Keys    []int64 `json:"keys"`
	Present []int64 `json:"present"`
}

// CheckLongFork checks every pair of ok reads of the same group.
func CheckLongFork(ops []history.Op) *Result {
	res := newResult("long-fork")
	inserted := map[int64]string{}
	type read struct {
		op      history.Op
		present map[int64]bool
	}
	groups := map[string][]read{}
	for _, p := range history.Pairs(ops) {
		res.Counts[p.Invoke.F+" "+p.Complete.Type]++
		switch p.Invoke.F {
		case "insert":
			var k int64
			if json.Unmarshal(p.Invoke.Value, &k) == nil {
				inserted[k] = p.Complete.Type
			}
		case "read":
			if p.Complete.Type != history.OK {
				continue
			}
			var r LongForkRead
			if err := json.Unmarshal(p.Complete.Value, &r); err != nil {
				res.add("malformed", true, "index %d: %v", p.Complete.Index, err)
				continue
			}
			keys := append([]int64(nil), r.Keys...)
			sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
			g := fmt.Sprint(keys)
			rd := read{p.Complete, map[int64]bool{}}
			for _, k := range r.Present {
				rd.present[k] = true
			}
			groups[g] = append(groups[g], rd)
		}
	}
	for _, reads := range groups {
		for _, r := range reads {
			for k := range r.present {
				switch inserted[k] {
				case "":
					res.add("unexpected", true, "index %d read key %d, which was never inserted", r.op.Index, k)
				case history.Fail:
					res.add("G1a", true, "index %d read key %d, whose insert failed", r.op.Index, k)
				}
			}
		}
		for i := 0; i < len(reads); i++ {
			for j := i + 1; j < len(reads); j++ {
				a, b := reads[i], reads[j]
				aOnly, bOnly := int64(-1), int64(-1)
				for k := range a.present {
					if !b.present[k] {
						aOnly = k
						break
					}
				}
				for k := range b.present {
					if !a.present[k] {
						bOnly = k
						break
					}
				}
				if aOnly >= 0 && bOnly >= 0 {
					res.add("long-fork", true, "read index %d (node %s) saw key %d but not %d; read index %d (node %s) saw %d but not %d",
						a.op.Index, a.op.Node, aOnly, bOnly, b.op.Index, b.op.Node, bOnly, aOnly)
				}
			}
			res.Counts["reads checked"]++
		}
	}
	if res.Counts["reads checked"] == 0 && res.Verdict == Valid {
		res.Verdict = Unknown
		res.note("no read succeeded: nothing to check")
	}
	return res
}
