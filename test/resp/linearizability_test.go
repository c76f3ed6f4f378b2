package resp

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
)

// The linearizability check: clients run GET, SET and INCR on a few keys at
// once, every operation is recorded with the time it was sent and the time
// its reply arrived, and porcupine searches for a single order of all
// operations that respects real time and the sequential behaviour of a
// register (regModel). Keys are independent registers, so the history is
// checked key by key.

type regOp uint8

const (
	opGet regOp = iota
	opSet
	opIncr
)

// regInput is one command: GET key, SET key value or INCR key.
type regInput struct {
	op    regOp
	key   string
	value int64 // SET's value
}

// regOutput is its reply. unknown: the command failed without a reply, so
// it may or may not have taken effect.
type regOutput struct {
	value   int64 // GET's value, INCR's result
	exists  bool  // GET found the key
	unknown bool
}

// regState is a register holding an integer, or nothing.
type regState struct {
	exists bool
	value  int64
}

var regModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(regInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		switch in.op {
		case opGet:
			if out.unknown {
				return true, s
			}
			return out.exists == s.exists && (!s.exists || out.value == s.value), s
		case opSet:
			return true, regState{exists: true, value: in.value}
		default: // opIncr
			next := regState{exists: true, value: s.value + 1}
			return out.unknown || out.value == next.value, next
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		res := fmt.Sprint(out.value)
		switch {
		case out.unknown:
			res = "?"
		case in.op == opGet && !out.exists:
			res = "nil"
		}
		switch in.op {
		case opGet:
			return fmt.Sprintf("GET %s -> %s", in.key, res)
		case opSet:
			return fmt.Sprintf("SET %s %d", in.key, in.value)
		}
		return fmt.Sprintf("INCR %s -> %s", in.key, res)
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		if !s.exists {
			return "nil"
		}
		return fmt.Sprint(s.value)
	},
}

// checkLinearizable runs porcupine on history and fails the test, writing
// the visualization to the test's artifact directory, when the history is
// not linearizable or the check does not finish.
func checkLinearizable(t *testing.T, history []porcupine.Operation) porcupine.CheckResult {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(regModel, history, time.Minute)
	if res == porcupine.Ok {
		return res
	}
	path := filepath.Join(t.ArtifactDir(), "linearizability.html")
	if err := porcupine.VisualizePath(regModel, info, path); err != nil {
		t.Errorf("writing the porcupine visualization: %v", err)
	}
	t.Errorf("history of %d operations: porcupine says %s; visualization: %s (run go test with -artifacts to keep it)",
		len(history), res, path)
	return res
}

// TestLinearizable runs 8 clients for 3 seconds, each on its own
// connection, doing GET, SET and INCR on 4 keys, and checks the history.
func TestLinearizable(t *testing.T) {
	fresh(t)
	const (
		clients  = 8
		keys     = 4
		duration = 3 * time.Second
	)
	start := time.Now()
	stop := start.Add(duration)
	var mu sync.Mutex
	var history []porcupine.Operation
	var failures []error
	var wg sync.WaitGroup
	for id := 0; id < clients; id++ {
		c := newClientOpts(t, &redis.Options{Addr: tgt(t).addr, Protocol: 2, PoolSize: 1,
			ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
		if err := c.Ping(t.Context()).Err(); err != nil { // connect before the clock starts
			t.Fatal(err)
		}
		wg.Add(1)
		go func(id int, c *redis.Client) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(id)))
			ctx := t.Context()
			for time.Now().Before(stop) {
				in := regInput{key: fmt.Sprintf("lin:%d", rng.Intn(keys))}
				switch r := rng.Intn(4); {
				case r < 2:
					in.op = opGet
				case r == 2:
					in.op, in.value = opSet, rng.Int63n(1000)
				default:
					in.op = opIncr
				}
				var out regOutput
				var err error
				call := time.Since(start).Nanoseconds()
				switch in.op {
				case opGet:
					var v int64
					v, err = c.Get(ctx, in.key).Int64()
					if errors.Is(err, redis.Nil) {
						err = nil
					} else {
						out.value, out.exists = v, err == nil
					}
				case opSet:
					err = c.Set(ctx, in.key, in.value, 0).Err()
				case opIncr:
					out.value, err = c.Incr(ctx, in.key).Result()
				}
				ret := time.Since(start).Nanoseconds()
				if err != nil {
					// No reply: the command may have happened at any time
					// after it was sent, or never.
					out = regOutput{unknown: true}
					ret = int64(10 * duration)
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
				if err != nil {
					failures = append(failures, fmt.Errorf("client %d: %v", id, err))
				}
				mu.Unlock()
				if err != nil {
					return // a client has at most one operation of unknown outcome
				}
			}
		}(id, c)
	}
	wg.Wait()
	for _, err := range failures {
		t.Errorf("command failed: %v", err)
	}
	if len(history) < 200 {
		t.Fatalf("only %d operations in %v", len(history), duration)
	}
	t.Logf("%d operations from %d clients on %d keys in %v", len(history), clients, keys, duration)
	checkLinearizable(t, history)
}

// TestLinearizabilityCheckerRejects feeds the model histories that are not
// linearizable (a stale read, a lost increment, a read of a value never
// written) and one that is: the check above can fail.
func TestLinearizabilityCheckerRejects(t *testing.T) {
	op := func(client int, call, ret int64, in regInput, out regOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	get := func(k string) regInput { return regInput{op: opGet, key: k} }
	set := func(k string, v int64) regInput { return regInput{op: opSet, key: k, value: v} }
	incr := func(k string) regInput { return regInput{op: opIncr, key: k} }
	val := func(v int64) regOutput { return regOutput{value: v, exists: true} }
	none := regOutput{}

	bad := map[string][]porcupine.Operation{
		// SET x 1 finished, then SET x 2 finished, then a GET saw 1.
		"stale read": {
			op(0, 0, 10, set("x", 1), none),
			op(1, 20, 30, set("x", 2), none),
			op(2, 40, 50, get("x"), val(1)),
		},
		// Two INCRs that do not overlap both returned 1.
		"lost increment": {
			op(0, 0, 10, incr("n"), val(1)),
			op(1, 20, 30, incr("n"), val(1)),
		},
		// A GET returned a value nobody wrote.
		"phantom value": {
			op(0, 0, 10, set("y", 5), none),
			op(1, 20, 30, get("y"), val(6)),
		},
		// A read saw a write that had not been sent yet.
		"read from the future": {
			op(0, 0, 10, get("z"), val(3)),
			op(1, 20, 30, set("z", 3), none),
		},
		// A second key is fine; the first still is not.
		"one bad key of two": {
			op(0, 0, 10, set("a", 1), none),
			op(1, 5, 15, set("b", 1), none),
			op(0, 20, 30, get("b"), val(1)),
			op(1, 20, 30, get("a"), none),
		},
	}
	for name, h := range bad {
		if res := porcupine.CheckOperationsTimeout(regModel, h, 10*time.Second); res != porcupine.Illegal {
			t.Errorf("%s: porcupine says %s, want Illegal", name, res)
		}
	}

	// Overlapping operations may take effect in either order, and a
	// failed INCR may or may not have happened.
	good := []porcupine.Operation{
		op(0, 0, 100, set("x", 1), none),
		op(1, 10, 20, get("x"), val(1)),
		op(2, 30, 40, get("x"), val(1)),
		op(3, 0, 100, incr("n"), val(1)),
		op(4, 50, 150, incr("n"), val(2)),
		op(5, 160, 1000, incr("n"), regOutput{unknown: true}),
		op(6, 170, 180, get("n"), val(2)),
		op(6, 190, 200, get("n"), val(3)),
	}
	if res := porcupine.CheckOperationsTimeout(regModel, good, 10*time.Second); res != porcupine.Ok {
		t.Errorf("linearizable history: porcupine says %s, want Ok", res)
	}

	// The failure report writes a visualization.
	res, info := porcupine.CheckOperationsVerbose(regModel, bad["stale read"], 10*time.Second)
	if res != porcupine.Illegal {
		t.Fatalf("stale read: %s", res)
	}
	path := filepath.Join(t.TempDir(), "v.html")
	if err := porcupine.VisualizePath(regModel, info, path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("visualization not written: %v", err)
	}
}
