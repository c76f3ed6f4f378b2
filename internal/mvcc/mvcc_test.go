package mvcc

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// TestProtocol runs the scripts in testdata/ against a real in-memory Pebble.
// Each command reads a snapshot, builds a batch with the function under test
// and applies it, as the KV service does through Raft. A failed command
// applies its batch too, so the scripts show that failures write nothing.
//
// Commands (timestamps are integers, or "Nms" for N milliseconds physical):
//
//	prewrite primary=K start=TS [ttl=MS] [for_update=TS] [min_commit=TS] [pessimistic=(K,...)] [lock_ts=(K:TS,...)] [K=V ...]
//	  input lines: put K V | del K | lock K | insert K V | check_not_exists K
//	one_pc  (as prewrite) commit=TS
//	commit K... start=TS commit=TS
//	rollback K... start=TS
//	get K ts=TS [bypass=(TS,...)]
//	scan [start=K] [end=K] ts=TS [limit=N] [reverse]
//	check_txn_status primary=K lock=TS [caller=TS] current=TS [rollback_if_not_exist]
//	resolve_lock K... start=TS [commit=TS]
//	scan_locks [start=K] [end=K] max_ts=TS [limit=N]
//	pessimistic_lock K... primary=K start=TS for_update=TS [ttl=MS] [return_values] [mem] [lock_with_conflict]
//	  [drop_before_apply]
//	  (mem: new locks go to the in-memory table, PessimisticLocks, which
//	  every command sees; without it they go to the engine;
//	  drop_before_apply: the table drops every lock, as when the store
//	  loses the region's leadership, after the request read its generation
//	  and before it applies: PessimisticLockAsOf)
//	pessimistic_rollback K... start=TS for_update=TS
//	drop_locks  (the in-memory table drops every lock, as when the store
//	  loses the region's leadership: PessimisticLocks.DropRange)
//	persist_locks [start=K] [end=K] [drop_before_apply]
//	  (the in-memory locks in the range move to the engine, as before a
//	  leader transfer: PersistPessimisticLocks)
//	heartbeat primary=K start=TS ttl=MS
//	gc [start=K] [end=K] safe_point=TS [limit=N]
//	destroy_range [start=K] [end=K]
//	dump     (the engine's records, then the in-memory locks as "memlock")
//	lockset  (the keys the lock index, fed every applied batch, holds)
//
// Keys and values accept Go escapes (a\x00b); a value "x*300" is 300 x's.
//
// Every script runs twice: reading snapshots of the engine, and reading the
// live engine through LockSet.Reader with a VersionCache, fed around each
// apply as the store's apply path feeds it. The expected output is the
// same: the cache must never change an answer.
func TestProtocol(t *testing.T) {
	for _, mode := range []protocolMode{
		{name: "engine"},
		{name: "version_cache", cache: true},
		{name: "recent_writes", cache: true, recent: true},
		{name: "bounded_writes", cache: true, recent: true, floor: true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var total protocolStats
			datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
				st := runProtocolScript(t, path, mode)
				total.cacheHits += st.cacheHits
				total.sstOnly += st.sstOnly
				total.bounded += st.bounded
			})
			if mode.cache && total.cacheHits == 0 {
				t.Fatal("no read was answered by the version cache")
			}
			if mode.recent && !mode.floor && total.sstOnly == 0 {
				t.Fatal("no newer-write check was answered from the SSTs alone")
			}
			if mode.floor && total.bounded == 0 {
				t.Fatal("no newer-write check was answered by the bounds alone")
			}
			t.Logf("version cache hits: %d, newer-write checks answered by the SSTs: %d, by the bounds: %d",
				total.cacheHits, total.sstOnly, total.bounded)
		})
	}
}

// protocolMode is how TestProtocol runs the scripts: reading a snapshot of
// the engine, or the live engine through the version cache, or in
// addition with the recent-write bounds, flushing the memtables after
// every other command so that checks meet records both in memtables and
// in SSTs; or with bounds that also know the engine's timestamp floor,
// reloaded from the engine (as a restarted node does) after every fourth
// command.
type protocolMode struct {
	name                 string
	cache, recent, floor bool
}

type protocolStats struct{ cacheHits, sstOnly, bounded uint64 }

// smallCeilingWindow makes the scripts' small timestamps cross ceilings.
const smallCeilingWindow = 3

func loadTestRecentWrites(t *testing.T, db *pebble.DB) *RecentWrites {
	t.Helper()
	rw, err := LoadRecentWrites(db)
	if err != nil {
		t.Fatal(err)
	}
	rw.window = smallCeilingWindow
	return rw
}

func runProtocolScript(t *testing.T, path string, mode protocolMode) (st protocolStats) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer, DisableWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The lock index sees every applied batch, as the store's apply
	// path feeds it.
	locks, err := LoadLockSet(db)
	if err != nil {
		t.Fatal(err)
	}
	if mode.cache {
		locks.SetVersionCache(NewVersionCache(1 << 20))
		defer func() {
			st.cacheHits = locks.VersionCache().Stats().Hits
			locks.VersionCache().Close()
		}()
	}
	addStats := func() {
		rs := locks.RecentWrites().Stats()
		st.sstOnly += rs.SSTOnly
		st.bounded += rs.Bounded
	}
	switch {
	case mode.floor:
		locks.SetRecentWrites(loadTestRecentWrites(t, db))
		defer addStats()
	case mode.recent:
		locks.SetRecentWrites(NewRecentWrites())
		defer addStats()
	}
	memLocks := NewPessimisticLocks(0)
	locks.SetPessimisticLocks(memLocks)
	commands := 0
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		var r pebble.Reader = locks.Reader(db)
		if !mode.cache {
			snap := db.NewSnapshot()
			defer snap.Close()
			r = WithPessimisticLocks(snap, memLocks)
		}
		// Only pessimistic_lock ... mem puts new locks in memory.
		memLocks.maxBytes = 0
		if d.Cmd == "pessimistic_lock" && d.HasArg("mem") {
			memLocks.maxBytes = DefaultPessimisticLockBytes
		}
		b := db.NewBatch()
		out := runCommand(t, r, b, d)
		if err := locks.BeforeApply(b.Repr()); err != nil {
			t.Fatal(err)
		}
		repr := slices.Clone(b.Repr()) // what the store's OnApply sees: no ceiling
		if err := locks.BeforeCommit(b); err != nil {
			t.Fatal(err)
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := locks.AfterApply(repr); err != nil {
			t.Fatal(err)
		}
		if commands++; mode.recent && commands%2 == 0 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			if mode.floor && commands%4 == 0 {
				// A restart: the memtables are empty, the new table's
				// floor is the persisted ceiling.
				addStats()
				locks.SetRecentWrites(loadTestRecentWrites(t, db))
			}
		}
		switch d.Cmd {
		case "dump":
			return dump(t, db) + dumpMemLocks(memLocks)
		case "lockset":
			return dumpLockSet(locks)
		}
		return out
	})
	return st
}

var reservedArgs = map[string]bool{
	"primary": true, "start": true, "ttl": true, "for_update": true, "min_commit": true,
	"pessimistic": true, "commit": true, "ts": true, "bypass": true, "end": true, "limit": true,
	"reverse": true, "lock": true, "caller": true, "current": true, "rollback_if_not_exist": true,
	"max_ts": true, "return_values": true, "safe_point": true, "mem": true, "lock_with_conflict": true,
	"lock_ts": true, "drop_before_apply": true,
}

func runCommand(t *testing.T, r pebble.Reader, b *pebble.Batch, d *datadriven.TestData) string {
	args := parseArgs(t, d)
	switch d.Cmd {
	case "prewrite", "one_pc":
		req := &kvpb.PrewriteRequest{
			PrimaryLock:  args.key("primary"),
			StartVersion: args.ts("start"),
			LockTtl:      args.uint("ttl"),
			ForUpdateTs:  args.ts("for_update"),
			MinCommitTs:  args.ts("min_commit"),
		}
		pessimistic := map[string]bool{}
		for _, k := range args.list("pessimistic") {
			pessimistic[k] = true
		}
		for _, kv := range args.puts {
			req.Mutations = append(req.Mutations, &kvpb.Mutation{Op: kvpb.Op_Put, Key: kv[0], Value: kv[1]})
		}
		for _, line := range strings.Split(d.Input, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			m := &kvpb.Mutation{Key: unquote(t, f[1])}
			switch f[0] {
			case "put":
				m.Op, m.Value = kvpb.Op_Put, value(t, f[2])
			case "insert":
				m.Op, m.Value = kvpb.Op_Insert, value(t, f[2])
			case "del":
				m.Op = kvpb.Op_Del
			case "lock":
				m.Op = kvpb.Op_Lock
			case "check_not_exists":
				m.Op = kvpb.Op_CheckNotExists
			case "pessimistic_lock":
				m.Op = kvpb.Op_PessimisticLock
			default:
				t.Fatalf("unknown mutation %q", line)
			}
			req.Mutations = append(req.Mutations, m)
		}
		lockTS := map[string]uint64{}
		for _, kt := range args.list("lock_ts") {
			k, ts, ok := strings.Cut(kt, ":")
			n, err := strconv.ParseUint(ts, 10, 64)
			if !ok || err != nil {
				t.Fatalf("lock_ts wants K:TS, got %q", kt)
			}
			lockTS[k] = n
		}
		for _, m := range req.Mutations {
			req.IsPessimisticLock = append(req.IsPessimisticLock, pessimistic[string(m.Key)])
			req.LockForUpdateTs = append(req.LockForUpdateTs, lockTS[string(m.Key)])
		}
		var errs []error
		var err error
		commitTS := args.ts("commit")
		if d.Cmd == "one_pc" {
			errs, err = OnePC(r, b, req, commitTS)
		} else {
			errs, err = Prewrite(r, b, req)
		}
		if err != nil {
			return result(t, err)
		}
		var sb strings.Builder
		for i, e := range errs {
			if e != nil {
				fmt.Fprintf(&sb, "%s: %s\n", fmtKey(req.Mutations[i].Key), result(t, e))
			}
		}
		if sb.Len() > 0 {
			return sb.String()
		}
		if d.Cmd == "one_pc" {
			return fmt.Sprintf("ok (committed at %d)", commitTS)
		}
		return "ok"

	case "commit":
		return result(t, Commit(r, b, args.keys, args.ts("start"), args.ts("commit")))

	case "rollback":
		return result(t, Rollback(r, b, args.keys, args.ts("start")))

	case "get":
		var bypass []uint64
		for _, s := range args.list("bypass") {
			bypass = append(bypass, parseTS(t, s))
		}
		v, found, err := Get(r, args.keys[0], args.ts("ts"), bypass)
		switch {
		case err != nil:
			return result(t, err)
		case !found:
			return "not found"
		}
		return fmtValue(v)

	case "scan":
		pairs, err := Scan(r, args.key("start"), args.key("end"), int(args.uint("limit")), args.ts("ts"), args.has("reverse"))
		if err != nil {
			return result(t, err)
		}
		if len(pairs) == 0 {
			return "(empty)"
		}
		var sb strings.Builder
		for _, p := range pairs {
			fmt.Fprintf(&sb, "%s: %s\n", fmtKey(p.Key), fmtValue(p.Value))
		}
		return sb.String()

	case "check_txn_status":
		st, err := CheckTxnStatus(r, b, args.key("primary"), args.ts("lock"), args.ts("caller"), args.ts("current"), args.has("rollback_if_not_exist"))
		if err != nil {
			return result(t, err)
		}
		s := fmt.Sprintf("ttl=%d commit=%d action=%s", st.TTL, st.CommitTS, st.Action)
		if st.Lock != nil {
			s += "\nlock: " + fmtLockInfo(st.Lock)
		}
		return s

	case "resolve_lock":
		return result(t, ResolveLock(r, b, args.ts("start"), args.ts("commit"), args.keys))

	case "scan_locks":
		locks, err := ScanLocks(r, args.key("start"), args.key("end"), args.ts("max_ts"), int(args.uint("limit")))
		if err != nil {
			return result(t, err)
		}
		if len(locks) == 0 {
			return "(none)"
		}
		var sb strings.Builder
		for _, l := range locks {
			sb.WriteString(fmtLockInfo(l) + "\n")
		}
		return sb.String()

	case "pessimistic_lock":
		req := &kvpb.PessimisticLockRequest{
			PrimaryLock:      args.key("primary"),
			StartVersion:     args.ts("start"),
			LockTtl:          args.uint("ttl"),
			ForUpdateTs:      args.ts("for_update"),
			ReturnValues:     args.has("return_values"),
			LockWithConflict: args.has("lock_with_conflict"),
		}
		for _, k := range args.keys {
			req.Mutations = append(req.Mutations, &kvpb.Mutation{Op: kvpb.Op_PessimisticLock, Key: k})
		}
		var errs []error
		var values [][]byte
		var err error
		if args.has("drop_before_apply") {
			// The region leader checked its leadership, then lost the
			// region (its in-memory locks dropped) while the request
			// waited for its latches.
			table := pessimisticLocksOf(r)
			gen := table.Generation()
			table.DropRange(nil, nil)
			errs, values, err = PessimisticLockAsOf(r, b, req, gen)
		} else {
			errs, values, err = PessimisticLock(r, b, req)
		}
		if err != nil {
			return result(t, err)
		}
		var sb strings.Builder
		for i, e := range errs {
			if e != nil {
				fmt.Fprintf(&sb, "%s: %s\n", fmtKey(args.keys[i]), result(t, e))
			}
		}
		if sb.Len() > 0 {
			return sb.String()
		}
		if !req.ReturnValues {
			return "ok"
		}
		for i, v := range values {
			if v == nil {
				fmt.Fprintf(&sb, "%s: (none)\n", fmtKey(args.keys[i]))
			} else {
				fmt.Fprintf(&sb, "%s: %s\n", fmtKey(args.keys[i]), fmtValue(v))
			}
		}
		return sb.String()

	case "pessimistic_rollback":
		return result(t, PessimisticRollback(r, b, args.keys, args.ts("start"), args.ts("for_update")))

	case "heartbeat":
		ttl, err := TxnHeartBeat(r, b, args.key("primary"), args.ts("start"), args.uint("ttl"))
		if err != nil {
			return result(t, err)
		}
		return fmt.Sprintf("ttl=%d", ttl)

	case "gc":
		res, err := GC(r, b, args.key("start"), args.key("end"), args.ts("safe_point"), int(args.uint("limit")))
		if err != nil {
			t.Fatalf("gc: %v", err)
		}
		out := fmt.Sprintf("deleted %d versions, %d values", res.Versions, res.Values)
		if res.Resume != nil {
			out += "; resume at " + fmtKey(res.Resume)
		}
		return out

	case "destroy_range":
		if err := DestroyRange(b, args.key("start"), args.key("end")); err != nil {
			t.Fatalf("destroy_range: %v", err)
		}
		return "ok"

	case "drop_locks":
		pessimisticLocksOf(r).DropRange(nil, nil)
		return "ok"

	case "persist_locks":
		table := pessimisticLocksOf(r)
		gen := table.Generation()
		keys := table.Keys(args.key("start"), args.key("end"), DefaultPessimisticLockBytes)
		if args.has("drop_before_apply") {
			table.DropRange(nil, nil)
		}
		n, err := PersistPessimisticLocks(r, b, keys, gen)
		if err != nil {
			return result(t, err)
		}
		return fmt.Sprintf("moved %d", n)

	case "persist_new_locks":
		pessimisticLocksOf(r).PersistNewLocks(args.key("start"), args.key("end"), time.Hour)
		return "ok"

	case "dump", "lockset":
		return ""
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

// result prints a command outcome. Every error the package hands the KV
// service must be a protocol error with a wire form.
func result(t *testing.T, err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, ErrLocksDropped) {
		return "error: " + err.Error()
	}
	if KeyErrorOf(err) == nil {
		t.Fatalf("engine error: %v", err)
	}
	return "error: " + err.Error()
}

type cmdArgs struct {
	t     *testing.T
	named map[string][]string
	keys  [][]byte    // positional arguments
	puts  [][2][]byte // K=V arguments
}

func parseArgs(t *testing.T, d *datadriven.TestData) *cmdArgs {
	a := &cmdArgs{t: t, named: map[string][]string{}}
	for _, arg := range d.CmdArgs {
		switch {
		case reservedArgs[arg.Key]:
			a.named[arg.Key] = arg.Vals
		case len(arg.Vals) == 0:
			a.keys = append(a.keys, unquote(t, arg.Key))
		default:
			a.puts = append(a.puts, [2][]byte{unquote(t, arg.Key), value(t, arg.Vals[0])})
		}
	}
	return a
}

func (a *cmdArgs) has(name string) bool { _, ok := a.named[name]; return ok }

func (a *cmdArgs) list(name string) []string { return a.named[name] }

func (a *cmdArgs) key(name string) []byte {
	v, ok := a.named[name]
	if !ok {
		return nil
	}
	return unquote(a.t, v[0])
}

func (a *cmdArgs) ts(name string) uint64 {
	v, ok := a.named[name]
	if !ok {
		return 0
	}
	return parseTS(a.t, v[0])
}

func (a *cmdArgs) uint(name string) uint64 {
	v, ok := a.named[name]
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		a.t.Fatal(err)
	}
	return n
}

func parseTS(t *testing.T, s string) uint64 {
	if s == "max" {
		return math.MaxUint64
	}
	if ms, ok := strings.CutSuffix(s, "ms"); ok {
		n, err := strconv.ParseUint(ms, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return ComposeTS(n, 0)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// quietLogger keeps Pebble's informational messages out of test output.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)         {}
func (quietLogger) Errorf(f string, args ...any) { fmt.Printf(f+"\n", args...) }
func (quietLogger) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

func unquote(t *testing.T, s string) []byte {
	if !strings.HasPrefix(s, `"`) {
		s = `"` + s + `"`
	}
	u, err := strconv.Unquote(s)
	if err != nil {
		t.Fatalf("bad key %q: %v", s, err)
	}
	return []byte(u)
}

func value(t *testing.T, s string) []byte {
	if unit, count, ok := strings.Cut(s, "*"); ok {
		n, err := strconv.Atoi(count)
		if err != nil {
			t.Fatal(err)
		}
		return []byte(strings.Repeat(unit, n))
	}
	return unquote(t, s)
}

func fmtValue(v []byte) string {
	if len(v) > 16 {
		return fmt.Sprintf("%s... (%d bytes)", fmtKey(v[:8]), len(v))
	}
	return fmtKey(v)
}

func fmtLockInfo(l *kvpb.LockInfo) string {
	s := fmt.Sprintf("%s %s primary=%s start=%d ttl=%d", fmtKey(l.Key), l.LockType, fmtKey(l.PrimaryLock), l.LockVersion, l.LockTtl)
	if l.LockForUpdateTs != 0 {
		s += fmt.Sprintf(" for_update=%d", l.LockForUpdateTs)
	}
	if l.MinCommitTs != 0 {
		s += fmt.Sprintf(" min_commit=%d", l.MinCommitTs)
	}
	return s
}

func dumpLockSet(ls *LockSet) string {
	ls.mu.RLock()
	keys := make([]string, 0, len(ls.m))
	for k := range ls.m {
		keys = append(keys, k)
	}
	ls.mu.RUnlock()
	if len(keys) == 0 {
		return "(empty)"
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = fmtKey([]byte(k))
	}
	return strings.Join(keys, " ")
}

// dumpMemLocks prints the in-memory pessimistic locks in key order.
func dumpMemLocks(p *PessimisticLocks) string {
	var sb strings.Builder
	for _, l := range p.scan(nil, nil, math.MaxUint64) {
		fmt.Fprintf(&sb, "memlock %s\n", fmtLockInfo(l))
	}
	return sb.String()
}

// dump prints the whole MVCC keyspace decoded, in engine order.
func dump(t *testing.T, db *pebble.DB) string {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{Prefix}, UpperBound: []byte{Prefix + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var sb strings.Builder
	for valid := it.First(); valid; valid = it.Next() {
		k, v := it.Key(), it.Value()
		switch k[1] {
		case lockCF:
			l, err := decodeLock(v)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sb, "lock  %s", fmtLockInfo(l.info(k[2:])))
			if l.hasValue {
				fmt.Fprintf(&sb, " value=%s", fmtValue(l.value))
			} else if l.typ == kvpb.Op_Put {
				sb.WriteString(" value in data cf")
			}
			sb.WriteString("\n")
		case writeCF, dataCF:
			userKey, rest, err := decodeEscaped(k[2:])
			if err != nil || len(rest) != 8 {
				t.Fatalf("bad engine key %q", k)
			}
			ts := ^bigEndianTS(rest)
			if k[1] == dataCF {
				fmt.Fprintf(&sb, "data  %s @start=%d: %s\n", fmtKey(userKey), ts, fmtValue(v))
				continue
			}
			w, err := decodeWrite(v)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&sb, "write %s @commit=%d: %s start=%d", fmtKey(userKey), ts, w.kind, w.startTS)
			if w.hasValue {
				fmt.Fprintf(&sb, " value=%s", fmtValue(w.value))
			} else if w.kind == writePut {
				sb.WriteString(" value in data cf")
			}
			if w.overlappedRollback {
				sb.WriteString(" overlapped_rollback")
			}
			sb.WriteString("\n")
		case tsCeilingCF:
			// The apply path's bookkeeping, not data (TestRecentWritesFloor).
		default:
			t.Fatalf("unexpected engine key %q", k)
		}
	}
	if sb.Len() == 0 {
		return "(empty)"
	}
	return sb.String()
}
