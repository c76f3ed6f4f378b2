package kvserver

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/strata-db/strata/kvpb"
)

// TestLockWait runs the scripts in testdata/ against a real KV service (one
// region on a Raft store): pessimistic lock requests that wait on the
// leader for other transactions' locks, wake when those are released, time
// out, and fail at once when waiting would close a deadlock. Commands:
//
//	lock txn=TS [for_update=TS] [primary=K] [wait=DUR] [as=NAME] [conflict=lock] K...
//	  (conflict=lock: lock_with_conflict)
//	  (with as, the request runs in the background; the command prints
//	  "waiting" once it waits on the leader, or its result if it ended first)
//	await NAME
//	commit txn=TS commit=TS K=V...     (prewrite over the pessimistic locks, then commit)
//	rollback txn=TS K...
//	pessimistic_rollback txn=TS for_update=TS K...
//	waiters [count=N]                  (the keys requests wait on, once N wait)
func TestLockWait(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.Contains(path, "/coprocessor/") {
			t.Skip("TestCoprocessor's scripts")
		}
		s, stop := startServer(t, t.TempDir(), true)
		defer stop()
		ctx := context.Background()
		running := map[string]chan string{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			a := parseScriptArgs(t, d)
			switch d.Cmd {
			case "lock":
				req := &kvpb.PessimisticLockRequest{
					Context: rctx(), StartVersion: a.ts("txn"), ForUpdateTs: a.ts("for_update"), LockTtl: 3000,
					PrimaryLock: []byte(a.str("primary", a.keys[0])),
				}
				if req.ForUpdateTs == 0 {
					req.ForUpdateTs = req.StartVersion
				}
				req.LockWithConflict = a.str("conflict", "") == "lock"
				if w := a.str("wait", ""); w != "" {
					dur, err := time.ParseDuration(w)
					if err != nil {
						t.Fatal(err)
					}
					req.WaitTimeoutMs = dur.Milliseconds()
				}
				for _, k := range a.keys {
					req.Mutations = append(req.Mutations, &kvpb.Mutation{Op: kvpb.Op_PessimisticLock, Key: []byte(k)})
				}
				run := func() string {
					resp, err := s.KvPessimisticLock(ctx, req)
					if err != nil {
						return "error: " + err.Error()
					}
					return formatLockResponse(resp)
				}
				name := a.str("as", "")
				if name == "" {
					return run()
				}
				before := totalWaiters(s)
				done := make(chan string, 1)
				running[name] = done
				go func() { done <- run() }()
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					select {
					case out := <-done:
						delete(running, name)
						return out
					default:
					}
					if totalWaiters(s) > before {
						return "waiting"
					}
				}
				t.Fatalf("%s neither finished nor waited", name)
			case "await":
				select {
				case out := <-running[a.keys[0]]:
					delete(running, a.keys[0])
					return out
				case <-time.After(10 * time.Second):
					t.Fatalf("%s did not finish", a.keys[0])
				}
			case "commit":
				txn := a.ts("txn")
				var keys [][]byte
				pw := &kvpb.PrewriteRequest{Context: rctx(), StartVersion: txn, ForUpdateTs: txn, LockTtl: 3000}
				for _, kv := range a.puts {
					keys = append(keys, []byte(kv[0]))
					pw.Mutations = append(pw.Mutations, &kvpb.Mutation{Op: kvpb.Op_Put, Key: []byte(kv[0]), Value: []byte(kv[1])})
					pw.IsPessimisticLock = append(pw.IsPessimisticLock, true)
				}
				pw.PrimaryLock = keys[0]
				presp, err := s.KvPrewrite(ctx, pw)
				if err != nil || presp.RegionError != nil || len(presp.Errors) > 0 {
					return fmt.Sprintf("prewrite: %v %v %v", err, presp.GetRegionError(), presp.GetErrors())
				}
				cresp, err := s.KvCommit(ctx, &kvpb.CommitRequest{Context: rctx(), StartVersion: txn, CommitVersion: a.ts("commit"), Keys: keys})
				if err != nil || cresp.RegionError != nil || cresp.Error != nil {
					return fmt.Sprintf("commit: %v %v %v", err, cresp.GetRegionError(), cresp.GetError())
				}
				return "ok"
			case "rollback":
				resp, err := s.KvBatchRollback(ctx, &kvpb.BatchRollbackRequest{Context: rctx(), StartVersion: a.ts("txn"), Keys: a.byteKeys()})
				if err != nil || resp.RegionError != nil || resp.Error != nil {
					return fmt.Sprintf("rollback: %v %v %v", err, resp.GetRegionError(), resp.GetError())
				}
				return "ok"
			case "pessimistic_rollback":
				resp, err := s.KvPessimisticRollback(ctx, &kvpb.PessimisticRollbackRequest{Context: rctx(), StartVersion: a.ts("txn"),
					ForUpdateTs: a.ts("for_update"), Keys: a.byteKeys()})
				if err != nil || resp.RegionError != nil || len(resp.Errors) > 0 {
					return fmt.Sprintf("pessimistic rollback: %v %v %v", err, resp.GetRegionError(), resp.GetErrors())
				}
				return "ok"
			case "waiters":
				if n := a.str("count", ""); n != "" {
					want, _ := strconv.Atoi(n)
					for deadline := time.Now().Add(5 * time.Second); totalWaiters(s) != want && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
				}
				var lines []string
				for k, n := range s.waiters.waitingKeys() {
					lines = append(lines, fmt.Sprintf("%s: %d", k, n))
				}
				if len(lines) == 0 {
					return "(none)"
				}
				slices.Sort(lines)
				return strings.Join(lines, "\n")
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
		if len(running) > 0 {
			t.Fatalf("requests never awaited: %v", running)
		}
	})
}

func totalWaiters(s *Server) int { return int(s.waiters.n.Load()) }

func formatLockResponse(resp *kvpb.PessimisticLockResponse) string {
	if resp.RegionError != nil {
		return "region error: " + resp.RegionError.Message
	}
	if len(resp.Errors) == 0 {
		return "ok"
	}
	var sb strings.Builder
	if resp.LockedWithConflict {
		sb.WriteString("locked, with conflicts:\n")
	}
	for _, e := range resp.Errors {
		switch {
		case e.Locked != nil:
			fmt.Fprintf(&sb, "locked: %s by txn %d\n", e.Locked.Key, e.Locked.LockVersion)
		case e.Deadlock != nil:
			fmt.Fprintf(&sb, "deadlock: waiting for txn %d on %s would close the cycle\n", e.Deadlock.LockTs, e.Deadlock.LockKey)
			for _, w := range e.Deadlock.WaitChain {
				fmt.Fprintf(&sb, "  txn %d waits for txn %d on %s\n", w.Txn, w.WaitForTxn, w.Key)
			}
		case e.Conflict != nil:
			fmt.Fprintf(&sb, "write conflict: %s committed at %d by txn %d\n", e.Conflict.Key, e.Conflict.ConflictCommitTs, e.Conflict.ConflictTs)
		default:
			fmt.Fprintf(&sb, "error: %v\n", e)
		}
	}
	return sb.String()
}

type scriptArgs struct {
	t     *testing.T
	named map[string]string
	keys  []string
	puts  [][2]string
}

func parseScriptArgs(t *testing.T, d *datadriven.TestData) *scriptArgs {
	a := &scriptArgs{t: t, named: map[string]string{}}
	for _, arg := range d.CmdArgs {
		switch {
		case len(arg.Vals) == 0:
			a.keys = append(a.keys, arg.Key)
		case slices.Contains([]string{"txn", "for_update", "primary", "wait", "as", "commit", "count", "conflict"}, arg.Key):
			a.named[arg.Key] = arg.Vals[0]
		default:
			a.puts = append(a.puts, [2]string{arg.Key, arg.Vals[0]})
		}
	}
	return a
}

func (a *scriptArgs) str(name, def string) string {
	if v, ok := a.named[name]; ok {
		return v
	}
	return def
}

func (a *scriptArgs) ts(name string) uint64 {
	v, ok := a.named[name]
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		a.t.Fatal(err)
	}
	return n
}

func (a *scriptArgs) byteKeys() [][]byte {
	out := make([][]byte, len(a.keys))
	for i, k := range a.keys {
		out[i] = []byte(k)
	}
	return out
}
