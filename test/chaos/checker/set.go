package checker

import (
	"encoding/json"
	"sort"

	"github.com/strata-db/strata/test/chaos/history"
)

// Set operations: f "add" with an integer value (each value added once),
// and f "read" whose ok value is the whole set as a list, read after the
// faults healed (one final read per node).

// CheckSet checks every ok final read: it holds every acknowledged add (a
// missing one is a lost write), holds nothing never added (and no element
// twice), and holds nothing whose add definitely failed. Adds of unknown
// outcome may be present or not.
func CheckSet(ops []history.Op) *Result {
	res := newResult("set")
	attempted := map[int64]string{} // value -> outcome
	var reads []history.Op
	for _, p := range history.Pairs(ops) {
		res.Counts[p.Invoke.F+" "+p.Complete.Type]++
		switch p.Invoke.F {
		case "add":
			var v int64
			if err := json.Unmarshal(p.Invoke.Value, &v); err != nil {
				res.add("malformed", true, "index %d: %v", p.Invoke.Index, err)
				continue
			}
			attempted[v] = p.Complete.Type
		case "read":
			if p.Complete.Type == history.OK {
				reads = append(reads, p.Complete)
			}
		}
	}
	if len(reads) == 0 {
		res.Verdict = Unknown
		res.note("no final read succeeded: nothing to check")
		return res
	}
	for _, r := range reads {
		var got []int64
		if err := json.Unmarshal(r.Value, &got); err != nil {
			res.add("malformed", true, "index %d: %v", r.Index, err)
			continue
		}
		present := map[int64]bool{}
		for _, v := range got {
			if present[v] {
				res.add("duplicate", true, "read on node %s (index %d) holds %d twice", r.Node, r.Index, v)
			}
			present[v] = true
			switch attempted[v] {
			case "":
				res.add("unexpected", true, "read on node %s (index %d) holds %d, which was never added", r.Node, r.Index, v)
			case history.Fail:
				res.add("failed-add-present", true, "read on node %s (index %d) holds %d, whose add failed", r.Node, r.Index, v)
			}
		}
		var lost []int64
		recovered := 0
		for v, outcome := range attempted {
			switch {
			case outcome == history.OK && !present[v]:
				lost = append(lost, v)
			case outcome == history.Info && present[v]:
				recovered++
			}
		}
		sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
		for _, v := range lost {
			res.add("lost", true, "read on node %s (index %d) lacks %d, whose add was acknowledged", r.Node, r.Index, v)
		}
		res.Counts["lost writes"] += len(lost)
		res.Counts["unknown adds present"] = recovered
		res.Counts["final reads"]++
	}
	return res
}
