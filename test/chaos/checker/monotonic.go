package checker

import (
	"encoding/json"
	"sort"

	"github.com/strata-db/strata/test/chaos/history"
)

// Monotonic reads: counters that only grow (f "incr", ok value the counter's
// new value) and reads of them (f "read"), each on one key, value
// MonotonicOp. Two properties, both promised by snapshot isolation with
// timestamps from one oracle:
//   - per process, a later read of a key never shows a smaller value than an
//     earlier one (monotonic reads);
//   - across processes, an operation that began after another had completed
//     shows at least that operation's value (no stale read in real time).
type MonotonicOp struct {
	K int64  `json:"k"`
	V *int64 `json:"v,omitempty"` // nil in an invoke
}

// CheckMonotonic checks both properties per key.
func CheckMonotonic(ops []history.Op) *Result {
	res := newResult("monotonic")
	type obs struct {
		call, ret int64
		v         int64
		op        history.Op
	}
	byKey := map[int64][]obs{}
	lastByProcess := map[[2]int64]obs{}
	for _, p := range history.Pairs(ops) {
		res.Counts[p.Invoke.F+" "+p.Complete.Type]++
		if p.Complete.Type != history.OK {
			continue
		}
		var m MonotonicOp
		if err := json.Unmarshal(p.Complete.Value, &m); err != nil || m.V == nil {
			res.add("malformed", true, "index %d: %s", p.Complete.Index, p.Complete.Value)
			continue
		}
		o := obs{p.Invoke.Time, p.Complete.Time, *m.V, p.Complete}
		pk := [2]int64{int64(p.Invoke.Process), m.K}
		if last, ok := lastByProcess[pk]; ok && o.v < last.v {
			res.add("non-monotonic", true, "process %d read key %d as %d (index %d) after %d (index %d)",
				p.Invoke.Process, m.K, o.v, o.op.Index, last.v, last.op.Index)
		}
		lastByProcess[pk] = o
		byKey[m.K] = append(byKey[m.K], o)
		res.Counts["observations"]++
	}
	for k, os := range byKey {
		// Sweep in call order; keep the largest value of every operation
		// that returned before the current one was called.
		byRet := append([]obs(nil), os...)
		sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
		sort.Slice(os, func(i, j int) bool { return os[i].call < os[j].call })
		var best obs
		have := false
		j := 0
		for _, o := range os {
			for j < len(byRet) && byRet[j].ret < o.call {
				if !have || byRet[j].v > best.v {
					best, have = byRet[j], true
				}
				j++
			}
			if have && o.v < best.v {
				res.add("stale-read", true, "key %d: index %d (process %d, node %s) saw %d, but index %d (node %s) had seen %d before it began",
					k, o.op.Index, o.op.Process, o.op.Node, o.v, best.op.Index, best.op.Node, best.v)
			}
		}
	}
	if res.Counts["observations"] == 0 && res.Verdict == Valid {
		res.Verdict = Unknown
		res.note("no operation succeeded: nothing to check")
	}
	return res
}
