// Package history is the record a chaos run keeps of what its clients asked
// for and what they heard back, in the JSON-lines form Jepsen's Elle (and
// elle-cli, and adya) read:
//
//	{"index":7,"type":"invoke","f":"txn","process":3,"time":81234567,"value":[["append",2,9]]}
//	{"index":8,"type":"ok","f":"txn","process":3,"time":82345678,"value":[["append",2,9]],"node":"n1"}
//
// Every operation appears twice: an invoke when a client sends it and a
// completion (ok, fail or info) when it hears back or gives up. ok means it
// certainly took effect, fail that it certainly did not, info that it may or
// may not have (a timeout, a reset connection, an error on COMMIT). A process
// has at most one operation outstanding; after an info the client continues
// as a new process, because the old operation may still take effect later.
// Time is nanoseconds since the run started, from a monotonic clock.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Types of an operation record.
const (
	Invoke = "invoke"
	OK     = "ok"
	Fail   = "fail"
	Info   = "info"
)

// Op is one line of a history.
type Op struct {
	Index   int64           `json:"index"`
	Type    string          `json:"type"`
	F       string          `json:"f"`
	Process int             `json:"process"`
	Time    int64           `json:"time"`
	Value   json.RawMessage `json:"value"`
	Node    string          `json:"node,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// Completed reports whether op is a completion (not an invoke).
func (op Op) Completed() bool { return op.Type != Invoke }

// Recorder appends operations to a history, in memory and (when given a
// writer) as JSON lines as they happen, so a run that dies still leaves its
// history behind. It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	ops   []Op
	w     *bufio.Writer
	err   error
}

// NewRecorder starts a history whose times count from start. w may be nil.
func NewRecorder(start time.Time, w io.Writer) *Recorder {
	r := &Recorder{start: start}
	if w != nil {
		r.w = bufio.NewWriter(w)
	}
	return r
}

// Since is the run time of t in nanoseconds.
func (r *Recorder) Since(t time.Time) int64 { return t.Sub(r.start).Nanoseconds() }

// Add stamps op with the next index (and the current time when op.Time is
// 0) and records it. It returns the stamped op.
func (r *Recorder) Add(op Op) Op {
	now := time.Since(r.start).Nanoseconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = int64(len(r.ops))
	if op.Time == 0 {
		op.Time = now
	}
	if op.Value == nil {
		op.Value = json.RawMessage("null")
	}
	r.ops = append(r.ops, op)
	if r.w != nil && r.err == nil {
		b, err := json.Marshal(op)
		if err == nil {
			b = append(b, '\n')
			_, err = r.w.Write(b)
		}
		if err == nil && op.Completed() {
			err = r.w.Flush()
		}
		r.err = err
	}
	return op
}

// Ops returns a copy of the operations recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Flush writes out buffered lines and returns the first write error.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil && r.err == nil {
		r.err = r.w.Flush()
	}
	return r.err
}

// Value marshals v for Op.Value; it panics on values that do not marshal,
// which only a programming error produces.
func Value(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("history: %T does not marshal: %v", v, err))
	}
	return b
}

// Read parses a JSON-lines history.
func Read(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}

// ReadFile parses the JSON-lines history in path.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ops, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return ops, nil
}

// Pair is an invocation and its completion. A history cut short leaves
// Complete zero-valued with Type "" for operations that never completed;
// Pairs reports those as info.
type Pair struct {
	Invoke   Op
	Complete Op
}

// Pairs matches every invoke with the completion of the same process that
// follows it, in invocation order. An invoke with no completion gets an info
// completion at the end of time.
func Pairs(ops []Op) []Pair {
	open := map[int]int{} // process -> index into pairs
	var pairs []Pair
	for _, op := range ops {
		if op.Type == Invoke {
			open[op.Process] = len(pairs)
			pairs = append(pairs, Pair{Invoke: op})
			continue
		}
		i, ok := open[op.Process]
		if !ok {
			continue
		}
		delete(open, op.Process)
		pairs[i].Complete = op
	}
	for _, i := range open {
		p := &pairs[i]
		p.Complete = p.Invoke
		p.Complete.Type = Info
		p.Complete.Time = 1<<63 - 1
		p.Complete.Error = "never completed"
	}
	return pairs
}
