package checker

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/strata-db/strata/test/chaos/history"
)

// The list-append checker, after Elle (Kingsbury and Alvaro, "Elle:
// Inferring Isolation Anomalies from Experimental Observations", VLDB 2020).
//
// Transactions append unique values to lists and read whole lists. Because
// every read returns the order of all appends before it, the longest read of
// a key gives that key's version order, and every other read must be a
// prefix of it. From the version orders come Adya's dependencies between
// committed transactions:
//
//	ww  T1 -> T2  T2 appended the element right after T1's in a key's order
//	wr  T1 -> T2  T2 read a list whose last element T1 appended
//	rw  T1 -> T2  T1 read a list, and T2 appended the element after its end
//
// and a cycle among them is an anomaly, named by the edges it needs:
// G0 (ww only), G1c (ww and wr), G-single (exactly one rw), G-nonadjacent
// (two or more rw, no two in a row) and G2-item (two or more rw). Elements
// that a read shows but no committed transaction could have written are
// G1a (an aborted write) or garbage; a read ending at a transaction's
// non-final append is G1b; two committed transactions that read the same
// version of a key and both appended to it are a lost update; a transaction
// that does not see its own earlier reads and appends is internal.
//
// Snapshot isolation forbids all of these but G2-item (write skew) when the
// rw edges of every cycle are adjacent; serializability forbids G2-item too.

// Models a list-append history can be checked against.
const (
	SnapshotIsolation = "snapshot-isolation"
	Serializable      = "serializable"
)

// forbiddenBy lists the anomaly types each model forbids.
var forbiddenBy = map[string]map[string]bool{
	SnapshotIsolation: setOf("G0", "G1a", "G1b", "G1c", "G-single-item", "G-nonadjacent-item", "lost-update",
		"internal", "incompatible-order", "duplicate-elements", "garbage-read", "duplicate-append"),
	Serializable: setOf("G0", "G1a", "G1b", "G1c", "G-single-item", "G-nonadjacent-item", "G2-item", "lost-update",
		"internal", "incompatible-order", "duplicate-elements", "garbage-read", "duplicate-append"),
}

func setOf(xs ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// Mop is one micro-operation of a list-append transaction.
type Mop struct {
	F    string  // "append" or "r"
	K    int64   // key
	V    int64   // appended value
	Read []int64 // read value; nil for an unknown read (an invoke's, or SQL NULL)
}

// MarshalJSON writes ["append",k,v] or ["r",k,[...]|null].
func (m Mop) MarshalJSON() ([]byte, error) {
	if m.F == "append" {
		return json.Marshal([]any{"append", m.K, m.V})
	}
	if m.Read == nil {
		return json.Marshal([]any{"r", m.K, nil})
	}
	return json.Marshal([]any{"r", m.K, m.Read})
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (m *Mop) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw) != 3 {
		return fmt.Errorf("micro-op %s: want [f, key, value]", b)
	}
	if err := json.Unmarshal(raw[0], &m.F); err != nil {
		return err
	}
	if err := json.Unmarshal(raw[1], &m.K); err != nil {
		return err
	}
	switch m.F {
	case "append":
		return json.Unmarshal(raw[2], &m.V)
	case "r":
		m.Read = nil
		if string(raw[2]) == "null" {
			return nil
		}
		m.Read = []int64{}
		return json.Unmarshal(raw[2], &m.Read)
	}
	return fmt.Errorf("micro-op %s: unknown function %q", b, m.F)
}

// txn is one transaction of the history.
type txn struct {
	id     int    // position in the checker's list
	status string // ok, info or fail
	inv    history.Op
	comp   history.Op
	mops   []Mop
}

func (t *txn) String() string {
	b, _ := json.Marshal(t.mops)
	return fmt.Sprintf("T%d (process %d, %s, index %d) %s", t.comp.Index, t.inv.Process, t.status, t.comp.Index, b)
}

func (t *txn) name() string { return fmt.Sprintf("T%d", t.comp.Index) }

type kv struct{ k, v int64 }

// Dependency kinds, as bits so that one edge can carry several.
const (
	ww uint8 = 1 << iota
	wr
	rw
)

func kindName(k uint8) string {
	switch k {
	case ww:
		return "ww"
	case wr:
		return "wr"
	}
	return "rw"
}

type edgeKey struct{ from, to int }

type depGraph struct {
	out   map[int][]int         // adjacency, each target once
	kinds map[edgeKey]uint8     // edge kinds
	why   map[edgeKey][3]string // one reason per kind, for explanations
}

func newDepGraph() *depGraph {
	return &depGraph{out: map[int][]int{}, kinds: map[edgeKey]uint8{}, why: map[edgeKey][3]string{}}
}

func (g *depGraph) add(from, to int, kind uint8, why string) {
	if from == to {
		return
	}
	e := edgeKey{from, to}
	k, seen := g.kinds[e]
	if !seen {
		g.out[from] = append(g.out[from], to)
	}
	g.kinds[e] = k | kind
	w := g.why[e]
	if i := kindIndex(kind); w[i] == "" {
		w[i] = why
		g.why[e] = w
	}
}

func kindIndex(k uint8) int {
	switch k {
	case ww:
		return 0
	case wr:
		return 1
	}
	return 2
}

// ListAppendOptions tune CheckListAppend.
type ListAppendOptions struct {
	// Model is the isolation level claimed: SnapshotIsolation (default) or
	// Serializable. Anomalies the model allows are reported but leave the
	// verdict valid.
	Model string
	// CycleTimeout bounds the cycle search; past it the verdict is at best
	// unknown. Default 60s.
	CycleTimeout time.Duration
}

// CheckListAppend checks a list-append history.
func CheckListAppend(ops []history.Op, opts ListAppendOptions) *Result {
	if opts.Model == "" {
		opts.Model = SnapshotIsolation
	}
	if opts.CycleTimeout == 0 {
		opts.CycleTimeout = time.Minute
	}
	res := newResult("list-append (" + opts.Model + ")")
	forbidden := forbiddenBy[opts.Model]
	if forbidden == nil {
		res.Verdict = Unknown
		res.note("unknown model %q", opts.Model)
		return res
	}
	flag := func(typ, format string, args ...any) { res.add(typ, forbidden[typ], format, args...) }

	// Transactions, with the micro-ops each outcome lets us trust.
	var txns []*txn
	for _, p := range history.Pairs(ops) {
		if p.Invoke.F != "txn" {
			continue
		}
		t := &txn{id: len(txns), status: p.Complete.Type, inv: p.Invoke, comp: p.Complete}
		src := p.Invoke.Value
		if t.status == history.OK {
			src = p.Complete.Value
		}
		if err := json.Unmarshal(src, &t.mops); err != nil {
			res.Verdict = Unknown
			res.note("index %d: unreadable transaction %s: %v", p.Invoke.Index, src, err)
			continue
		}
		res.Counts["txn "+t.status]++
		txns = append(txns, t)
	}

	// Who wrote what. Appends of ok and info transactions may have happened;
	// appends of failed ones must not be seen.
	writer := map[kv]*txn{}
	failed := map[kv]*txn{}
	intermediate := map[kv]*txn{} // appends that are not their txn's last to that key
	for _, t := range txns {
		last := map[int64]int64{}
		for _, m := range t.mops {
			if m.F != "append" {
				continue
			}
			e := kv{m.K, m.V}
			if t.status == history.Fail {
				failed[e] = t
				continue
			}
			if prev, dup := writer[e]; dup {
				flag("duplicate-append", "%s and %s both appended %d to key %d; values must be unique per key", prev, t, m.V, m.K)
			}
			writer[e] = t
			if v, ok := last[m.K]; ok {
				intermediate[kv{m.K, v}] = t
			}
			last[m.K] = m.V
		}
	}

	// Reads: what each element says, and internal consistency.
	committed := map[int]bool{} // txn ids known to have committed
	longest := map[int64][]int64{}
	longestBy := map[int64]*txn{}
	for _, t := range txns {
		if t.status == history.OK {
			committed[t.id] = true
		}
	}
	for _, t := range txns {
		if t.status != history.OK {
			continue
		}
		checkInternal(t, flag)
		for _, m := range t.mops {
			if m.F != "r" || m.Read == nil {
				continue
			}
			res.Counts["reads"]++
			seen := map[int64]bool{}
			for _, v := range m.Read {
				if seen[v] {
					flag("duplicate-elements", "%s read key %d as %v: %d appears twice", t, m.K, m.Read, v)
				}
				seen[v] = true
				e := kv{m.K, v}
				w := writer[e]
				switch {
				case w != nil:
					committed[w.id] = true
				case failed[e] != nil:
					flag("G1a", "%s read key %d as %v, which holds %d appended by the failed %s", t, m.K, m.Read, v, failed[e])
				default:
					flag("garbage-read", "%s read key %d as %v: no transaction appended %d", t, m.K, m.Read, v)
				}
			}
			if n := len(m.Read); n > 0 {
				e := kv{m.K, m.Read[n-1]}
				if w := intermediate[e]; w != nil && w != t {
					flag("G1b", "%s read key %d as %v, ending at %d, an intermediate append of %s", t, m.K, m.Read, m.Read[n-1], w)
				}
			}
			if len(m.Read) > len(longest[m.K]) {
				longest[m.K] = m.Read
				longestBy[m.K] = t
			}
		}
	}

	// Version orders: every read a prefix of the longest.
	for _, t := range txns {
		if t.status != history.OK {
			continue
		}
		for _, m := range t.mops {
			if m.F != "r" || m.Read == nil {
				continue
			}
			if !isPrefix(m.Read, longest[m.K]) {
				flag("incompatible-order", "key %d: %s read %v, but %s read %v; neither is a prefix of the other",
					m.K, t, m.Read, longestBy[m.K], longest[m.K])
			}
		}
	}
	position := map[kv]int{}
	for k, vs := range longest {
		for i, v := range vs {
			if _, ok := position[kv{k, v}]; !ok {
				position[kv{k, v}] = i
			}
		}
	}

	// The dependency graph over committed transactions.
	g := newDepGraph()
	for k, vs := range longest {
		for i := 1; i < len(vs); i++ {
			a, b := writer[kv{k, vs[i-1]}], writer[kv{k, vs[i]}]
			if a != nil && b != nil {
				g.add(a.id, b.id, ww, fmt.Sprintf("%s appended %d after %s's %d to key %d", b.name(), vs[i], a.name(), vs[i-1], k))
			}
		}
	}
	type readVersion struct {
		t *txn
		n int // elements from other transactions seen
	}
	observed := map[int64][]readVersion{} // key -> first reads of the key by txns that also append to it
	for _, t := range txns {
		if t.status != history.OK {
			continue
		}
		firstRead := map[int64]bool{}
		for _, m := range t.mops {
			if m.F != "r" || m.Read == nil {
				continue
			}
			// The version this read observed is the read without the
			// transaction's own appends at its end.
			ext := m.Read
			for len(ext) > 0 {
				w := writer[kv{m.K, ext[len(ext)-1]}]
				if w != t {
					break
				}
				ext = ext[:len(ext)-1]
			}
			if n := len(ext); n > 0 {
				if w := writer[kv{m.K, ext[n-1]}]; w != nil {
					g.add(w.id, t.id, wr, fmt.Sprintf("%s read key %d as %v, after %s's append of %d", t.name(), m.K, m.Read, w.name(), ext[n-1]))
				}
			}
			vo := longest[m.K]
			if len(ext) < len(vo) && isPrefix(ext, vo) {
				if w := writer[kv{m.K, vo[len(ext)]}]; w != nil && w != t {
					g.add(t.id, w.id, rw, fmt.Sprintf("%s read key %d as %v and did not see %s's append of %d", t.name(), m.K, m.Read, w.name(), vo[len(ext)]))
				}
			}
			if !firstRead[m.K] {
				firstRead[m.K] = true
				observed[m.K] = append(observed[m.K], readVersion{t, len(ext)})
			}
		}
	}

	// Lost updates: two committed transactions read the same version of a
	// key and both appended to it.
	for k, rvs := range observed {
		byVersion := map[int][]*txn{}
		for _, rv := range rvs {
			if appendsTo(rv.t, k) {
				byVersion[rv.n] = append(byVersion[rv.n], rv.t)
			}
		}
		for n, ts := range byVersion {
			if len(ts) > 1 {
				var names []string
				for _, t := range ts {
					names = append(names, t.String())
				}
				flag("lost-update", "key %d: %d committed transactions read the version of %d elements and each appended to it: %s",
					k, len(ts), n, strings.Join(names, "; "))
			}
		}
	}

	// Cycles.
	for id := range committed {
		_ = id
	}
	deadline := time.Now().Add(opts.CycleTimeout)
	byID := map[int]*txn{}
	for _, t := range txns {
		byID[t.id] = t
	}
	sccs := stronglyConnected(g)
	res.Counts["cycles (strongly connected components)"] = len(sccs)
	for _, scc := range sccs {
		for _, c := range findCycles(g, scc, deadline) {
			flag(c.typ, "%s", explainCycle(g, byID, c))
		}
		if time.Now().After(deadline) {
			res.note("cycle search stopped after %v", opts.CycleTimeout)
			if res.Verdict == Valid {
				res.Verdict = Unknown
			}
			break
		}
	}
	if res.Counts["txn ok"] == 0 && res.Verdict == Valid {
		res.Verdict = Unknown
		res.note("no transaction committed: nothing to check")
	}
	return res
}

func appendsTo(t *txn, k int64) bool {
	for _, m := range t.mops {
		if m.F == "append" && m.K == k {
			return true
		}
	}
	return false
}

func isPrefix(a, b []int64) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkInternal: within a transaction, a read of a key shows the previous
// read of it followed by the appends since, or (with no earlier read) ends
// with the transaction's appends so far.
func checkInternal(t *txn, flag func(typ, format string, args ...any)) {
	known := map[int64][]int64{}   // key -> expected full list, when a read fixed it
	pending := map[int64][]int64{} // key -> own appends not yet covered by a read
	for _, m := range t.mops {
		switch m.F {
		case "append":
			if l, ok := known[m.K]; ok {
				known[m.K] = append(append([]int64(nil), l...), m.V)
			} else {
				pending[m.K] = append(pending[m.K], m.V)
			}
		case "r":
			if m.Read == nil {
				continue
			}
			if l, ok := known[m.K]; ok {
				if fmt.Sprint(l) != fmt.Sprint(m.Read) {
					flag("internal", "%s read key %d as %v, but its earlier read and appends make it %v", t, m.K, m.Read, l)
				}
			} else if p := pending[m.K]; len(p) > 0 {
				if len(m.Read) < len(p) || fmt.Sprint(m.Read[len(m.Read)-len(p):]) != fmt.Sprint(p) {
					flag("internal", "%s read key %d as %v, which does not end with its own appends %v", t, m.K, m.Read, p)
				}
			}
			known[m.K] = m.Read
			delete(pending, m.K)
		}
	}
}

// stronglyConnected returns the graph's strongly connected components of
// more than one transaction (Tarjan's algorithm, iterative).
func stronglyConnected(g *depGraph) [][]int {
	index := map[int]int{}
	low := map[int]int{}
	onStack := map[int]bool{}
	var stack []int
	var out [][]int
	next := 0
	var nodes []int
	for n := range g.out {
		nodes = append(nodes, n)
	}
	sort.Ints(nodes)
	type frame struct {
		n int
		i int
	}
	for _, root := range nodes {
		if _, seen := index[root]; seen {
			continue
		}
		work := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(work) > 0 {
			f := &work[len(work)-1]
			if f.i < len(g.out[f.n]) {
				m := g.out[f.n][f.i]
				f.i++
				if _, seen := index[m]; !seen {
					index[m], low[m] = next, next
					next++
					stack = append(stack, m)
					onStack[m] = true
					work = append(work, frame{m, 0})
				} else if onStack[m] && index[m] < low[f.n] {
					low[f.n] = index[m]
				}
				continue
			}
			n := f.n
			work = work[:len(work)-1]
			if len(work) > 0 {
				p := work[len(work)-1].n
				if low[n] < low[p] {
					low[p] = low[n]
				}
			}
			if low[n] == index[n] {
				var comp []int
				for {
					m := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[m] = false
					comp = append(comp, m)
					if m == n {
						break
					}
				}
				if len(comp) > 1 {
					sort.Ints(comp)
					out = append(out, comp)
				}
			}
		}
	}
	return out
}

// step is one edge of a cycle, with the kind it was taken as.
type step struct {
	from, to int
	kind     uint8
}

type cycle struct {
	typ   string
	steps []step
}

// findCycles looks in one strongly connected component for an example of
// each cycle type: G0, G1c, G-single, G-nonadjacent and G2-item.
func findCycles(g *depGraph, scc []int, deadline time.Time) []cycle {
	in := map[int]bool{}
	for _, n := range scc {
		in[n] = true
	}
	// Edges of the component by kind.
	var starts [3][]step
	for _, a := range scc {
		for _, b := range g.out[a] {
			if !in[b] {
				continue
			}
			k := g.kinds[edgeKey{a, b}]
			for _, kind := range []uint8{ww, wr, rw} {
				if k&kind != 0 {
					starts[kindIndex(kind)] = append(starts[kindIndex(kind)], step{a, b, kind})
				}
			}
		}
	}
	var found []cycle
	try := func(typ string, first []step, search func(s step) []step) {
		for _, s := range first {
			if time.Now().After(deadline) {
				return
			}
			if rest := search(s); rest != nil {
				found = append(found, cycle{typ, append([]step{s}, rest...)})
				return
			}
		}
	}
	// A path from s.to back to s.from through edges of the allowed kinds,
	// tracking an automaton state; accept says which end states close the
	// cycle.
	type state struct {
		n int
		s uint8
	}
	search := func(s step, initial uint8, move func(st uint8, kind uint8) (uint8, bool), accept func(st uint8) bool) []step {
		startState := state{s.to, initial}
		prev := map[state]struct {
			from state
			kind uint8
		}{}
		seen := map[state]bool{startState: true}
		queue := []state{startState}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			if cur.n == s.from && accept(cur.s) {
				var path []step
				for c := cur; c != startState; {
					p := prev[c]
					path = append(path, step{p.from.n, c.n, p.kind})
					c = p.from
				}
				for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return path
			}
			for _, m := range g.out[cur.n] {
				if !in[m] {
					continue
				}
				k := g.kinds[edgeKey{cur.n, m}]
				for _, kind := range []uint8{ww, wr, rw} {
					if k&kind == 0 {
						continue
					}
					ns, ok := move(cur.s, kind)
					if !ok {
						continue
					}
					nx := state{m, ns}
					if seen[nx] {
						continue
					}
					seen[nx] = true
					prev[nx] = struct {
						from state
						kind uint8
					}{cur, kind}
					queue = append(queue, nx)
				}
			}
		}
		return nil
	}
	only := func(allowed uint8) func(uint8, uint8) (uint8, bool) {
		return func(st, kind uint8) (uint8, bool) { return st, kind&allowed != 0 }
	}
	always := func(uint8) bool { return true }

	// G0: ww edges only.
	try("G0", starts[0], func(s step) []step { return search(s, 0, only(ww), always) })
	// G1c: ww and wr, starting from a wr edge so that one is used.
	try("G1c", starts[1], func(s step) []step { return search(s, 0, only(ww|wr), always) })
	// G-single-item: one rw edge, the rest ww and wr.
	try("G-single-item", starts[2], func(s step) []step { return search(s, 0, only(ww|wr), always) })
	// G-nonadjacent-item: two or more rw edges, never two in a row (the cycle
	// starts with one, so neither its second nor its last edge is rw).
	// State bits: 1 = the last edge was rw, 2 = a second rw was taken.
	try("G-nonadjacent-item", starts[2], func(s step) []step {
		return search(s, 1, func(st, kind uint8) (uint8, bool) {
			if kind == rw {
				if st&1 != 0 {
					return 0, false
				}
				return 1 | 2, true
			}
			return st &^ 1, true
		}, func(st uint8) bool { return st == 2 })
	})
	// G2-item: two or more rw edges.
	try("G2-item", starts[2], func(s step) []step {
		return search(s, 0, func(st, kind uint8) (uint8, bool) {
			if kind == rw {
				return 1, true
			}
			return st, true
		}, func(st uint8) bool { return st == 1 })
	})
	return found
}

func explainCycle(g *depGraph, byID map[int]*txn, c cycle) string {
	var b strings.Builder
	fmt.Fprintf(&b, "a cycle of %d transactions:", len(c.steps))
	seen := map[int]bool{}
	for _, s := range c.steps {
		if !seen[s.from] {
			seen[s.from] = true
			fmt.Fprintf(&b, "\n    %s", byID[s.from])
		}
	}
	for _, s := range c.steps {
		fmt.Fprintf(&b, "\n    %s -%s-> %s: %s", byID[s.from].name(), kindName(s.kind), byID[s.to].name(),
			g.why[edgeKey{s.from, s.to}][kindIndex(s.kind)])
	}
	return b.String()
}
