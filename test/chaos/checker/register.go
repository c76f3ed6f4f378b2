package checker

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/strata-db/strata/test/chaos/history"
)

// Register operations, one key each: f "read" (ok value carries V, null
// when the key does not exist), "write" (V), "cas" (Old, New; fail when the
// key did not hold Old) and "incr" (ok value carries the new V).
type RegisterOp struct {
	K   string `json:"k"`
	V   *int64 `json:"v,omitempty"`
	Old *int64 `json:"old,omitempty"`
	New *int64 `json:"new,omitempty"`
}

type regIn struct {
	f        string
	k        string
	v        int64 // write's value
	old, new int64 // cas
}

type regOut struct {
	exists  bool
	v       int64
	unknown bool
}

type regState struct {
	exists bool
	v      int64
}

// RegisterModel is a map of integer registers, partitioned by key.
var RegisterModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		idx := map[string]int{}
		var out [][]porcupine.Operation
		for _, op := range h {
			k := op.Input.(regIn).k
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], op)
		}
		return out
	},
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regIn), output.(regOut)
		switch in.f {
		case "read":
			return out.exists == s.exists && (!s.exists || out.v == s.v), s
		case "write":
			return true, regState{true, in.v}
		case "cas":
			if !s.exists || s.v != in.old {
				return false, s
			}
			return true, regState{true, in.new}
		default: // incr
			next := regState{true, s.v + 1}
			return out.unknown || out.v == next.v, next
		}
	},
	Equal: func(a, b any) bool { return a.(regState) == b.(regState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(regIn), output.(regOut)
		res := fmt.Sprint(out.v)
		if out.unknown {
			res = "?"
		} else if !out.exists {
			res = "nil"
		}
		switch in.f {
		case "read":
			return fmt.Sprintf("GET %s -> %s", in.k, res)
		case "write":
			return fmt.Sprintf("SET %s %d", in.k, in.v)
		case "cas":
			return fmt.Sprintf("CAS %s %d->%d", in.k, in.old, in.new)
		}
		return fmt.Sprintf("INCR %s -> %s", in.k, res)
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		if !s.exists {
			return "nil"
		}
		return fmt.Sprint(s.v)
	},
}

// RegisterOptions tune CheckRegister.
type RegisterOptions struct {
	Timeout time.Duration // porcupine's budget; default 60s
	// VisualizePath, when set, receives porcupine's HTML visualization if
	// the history is not linearizable.
	VisualizePath string
}

// CheckRegister checks the register history for linearizability per key
// with porcupine. Failed operations are dropped (they did not happen); an
// info operation may have happened at any time after its call, so its
// return is the end of time; an info read constrains nothing and is dropped.
func CheckRegister(ops []history.Op, opts RegisterOptions) *Result {
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	res := newResult("register (linearizable per key)")
	var hist []porcupine.Operation
	for _, p := range history.Pairs(ops) {
		res.Counts[p.Invoke.F+" "+p.Complete.Type]++
		if p.Complete.Type == history.Fail {
			continue
		}
		var inv RegisterOp
		if err := json.Unmarshal(p.Invoke.Value, &inv); err != nil {
			res.add("malformed", true, "index %d: %v", p.Invoke.Index, err)
			continue
		}
		in := regIn{f: p.Invoke.F, k: inv.K}
		switch in.f {
		case "write":
			if inv.V == nil {
				res.add("malformed", true, "index %d: write without a value", p.Invoke.Index)
				continue
			}
			in.v = *inv.V
		case "cas":
			if inv.Old == nil || inv.New == nil {
				res.add("malformed", true, "index %d: cas without old and new", p.Invoke.Index)
				continue
			}
			in.old, in.new = *inv.Old, *inv.New
		}
		var out regOut
		ret := p.Complete.Time
		if p.Complete.Type == history.Info {
			if in.f == "read" {
				continue
			}
			out.unknown = true
			ret = math.MaxInt64
		} else if in.f == "read" || in.f == "incr" {
			var c RegisterOp
			if err := json.Unmarshal(p.Complete.Value, &c); err != nil {
				res.add("malformed", true, "index %d: %v", p.Complete.Index, err)
				continue
			}
			if c.V != nil {
				out.exists, out.v = true, *c.V
			}
		}
		hist = append(hist, porcupine.Operation{ClientId: p.Invoke.Process, Input: in, Call: p.Invoke.Time, Output: out, Return: ret})
	}
	res.Counts["operations checked"] = len(hist)
	if len(hist) == 0 {
		res.Verdict = Unknown
		res.note("no operation to check")
		return res
	}
	r, info := porcupine.CheckOperationsVerbose(RegisterModel, hist, opts.Timeout)
	switch r {
	case porcupine.Illegal:
		res.add("nonlinearizable", true, "no order of the %d operations respects real time and a register's behaviour; see the visualization", len(hist))
		if opts.VisualizePath != "" {
			if err := porcupine.VisualizePath(RegisterModel, info, opts.VisualizePath); err != nil {
				res.note("writing the visualization: %v", err)
			} else {
				res.note("visualization: %s", opts.VisualizePath)
			}
		}
	case porcupine.Unknown:
		res.Verdict = Unknown
		res.note("porcupine did not finish within %v", opts.Timeout)
	}
	return res
}
