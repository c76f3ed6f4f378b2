package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

func begin(t *testing.T, c *Client, opts kv.TxnOptions) *Txn {
	t.Helper()
	txn, err := c.Begin(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return txn.(*Txn)
}

// load commits key=value pairs given as "k=v" in one transaction.
func load(t *testing.T, c *Client, pairs ...string) {
	t.Helper()
	txn := begin(t, c, kv.TxnOptions{})
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		if err := txn.Set([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := txn.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, txn kv.Txn, key string) string {
	t.Helper()
	v, err := txn.Get(context.Background(), []byte(key))
	if errors.Is(err, kv.ErrNotFound) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

func render(kvs []kv.KeyValue) string {
	var b strings.Builder
	for i, e := range kvs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", e.Key, e.Value)
	}
	return b.String()
}

func (fc *fakeCluster) lockedKeys() []string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []string
	for k, fk := range fc.keys {
		if fk.lock != nil {
			out = append(out, k)
		}
	}
	return out
}

func (fc *fakeCluster) placeLock(key, primary string, startTS, ttl uint64, value string) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.key([]byte(key)).lock = &fakeLock{primary: []byte(primary), startTS: startTS, ttl: ttl, op: kvpb.Op_Put, value: []byte(value)}
}

func TestReadYourWrites(t *testing.T) {
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "a=1", "b=2", "x=9")

	txn := begin(t, c, kv.TxnOptions{})
	_ = txn.Set([]byte("a"), []byte("10"))
	_ = txn.Delete([]byte("b"))
	_ = txn.Set([]byte("n"), []byte("new"))
	for key, want := range map[string]string{"a": "10", "b": "<none>", "n": "new", "x": "9", "q": "<none>"} {
		if got := get(t, txn, key); got != want {
			t.Errorf("Get(%s) = %s, want %s", key, got, want)
		}
	}
	got, err := txn.BatchGet(context.Background(), [][]byte{[]byte("a"), []byte("b"), []byte("n"), []byte("x"), []byte("q"), []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got["a"]) != "10" || string(got["n"]) != "new" || string(got["x"]) != "9" {
		t.Fatalf("BatchGet = %v", got)
	}
	if txn.Len() != 3 {
		t.Fatalf("Len = %d, want 3", txn.Len())
	}

	// Another transaction sees none of it until commit.
	other := begin(t, c, kv.TxnOptions{})
	if get(t, other, "a") != "1" || get(t, other, "n") != "<none>" {
		t.Fatal("uncommitted writes leaked")
	}
	if err := txn.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if get(t, other, "a") != "1" {
		t.Fatal("an older snapshot saw a later commit")
	}
	after := begin(t, c, kv.TxnOptions{})
	if get(t, after, "a") != "10" || get(t, after, "b") != "<none>" || get(t, after, "n") != "new" {
		t.Fatal("committed writes not visible to a later transaction")
	}
}

func TestScanMergesBufferWithSnapshotAcrossRegionsBothWays(t *testing.T) {
	fc := newFakeCluster("c", "f")
	// Batches of two force several requests per region.
	c := fc.newClient(Options{ScanBatchSize: 2})
	defer c.Close()
	load(t, c, "a=1", "b=2", "c=3", "d=4", "e=5", "f=6", "g=7", "h=8")

	txn := begin(t, c, kv.TxnOptions{})
	_ = txn.Set([]byte("b2"), []byte("new"))
	_ = txn.Delete([]byte("d"))
	_ = txn.Set([]byte("e"), []byte("50"))
	_ = txn.Delete([]byte("h"))
	_ = txn.Set([]byte("zz"), []byte("tail"))
	_ = txn.Delete([]byte("nothing"))

	ctx := context.Background()
	cases := []struct {
		start, end string
		limit      int
		reverse    bool
		want       string
	}{
		{"", "", 0, false, "a=1 b=2 b2=new c=3 e=50 f=6 g=7 zz=tail"},
		{"", "", 0, true, "zz=tail g=7 f=6 e=50 c=3 b2=new b=2 a=1"},
		{"b", "g", 0, false, "b=2 b2=new c=3 e=50 f=6"},
		{"b", "g", 0, true, "f=6 e=50 c=3 b2=new b=2"},
		{"", "", 3, false, "a=1 b=2 b2=new"},
		{"", "", 3, true, "zz=tail g=7 f=6"},
		{"c", "f", 0, true, "e=50 c=3"},
		{"d", "e", 0, false, ""},
		{"g", "c", 0, false, ""},
	}
	for _, tc := range cases {
		var start, end []byte
		if tc.start != "" {
			start = []byte(tc.start)
		}
		if tc.end != "" {
			end = []byte(tc.end)
		}
		got, err := txn.Scan(ctx, start, end, tc.limit, tc.reverse)
		if err != nil {
			t.Fatal(err)
		}
		if render(got) != tc.want {
			t.Errorf("Scan(%q, %q, limit %d, reverse %v) = %q, want %q", tc.start, tc.end, tc.limit, tc.reverse, render(got), tc.want)
		}
	}
}

func TestIterSeesBufferAsOfCreation(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{ScanBatchSize: 1})
	defer c.Close()
	load(t, c, "a=1", "c=3")
	txn := begin(t, c, kv.TxnOptions{})
	_ = txn.Set([]byte("b"), []byte("2"))
	ctx := context.Background()
	it, err := txn.Iter(ctx, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	_ = txn.Set([]byte("bb"), []byte("later")) // not visible to it
	var got []string
	for it.Valid() {
		got = append(got, string(it.Key())+"="+string(it.Value()))
		if err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, " ") != "a=1 b=2 c=3" {
		t.Fatalf("iterated %v", got)
	}
}

// TestIterSizedHintOnlySizes: the expected count of IterSized sizes the
// first request (expect+1 entries, so a range that holds expect entries is
// read in one request); a wrong hint still yields every entry, across
// regions, both ways.
func TestIterSizedHintOnlySizes(t *testing.T) {
	fc := newFakeCluster("e")
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "a=1", "b=2", "c=3", "d=4", "f=6", "g=7")
	txn := begin(t, c, kv.TxnOptions{})
	_ = txn.Set([]byte("c2"), []byte("new"))
	ctx := context.Background()
	iterate := func(start, end string, reverse bool, expect int) string {
		t.Helper()
		it, err := txn.IterSized(ctx, []byte(start), []byte(end), reverse, expect)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var got []string
		for it.Valid() {
			got = append(got, string(it.Key())+"="+string(it.Value()))
			if err := it.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return strings.Join(got, " ")
	}
	before := fc.callCount("Scan")
	if got := iterate("a", "e", false, 4); got != "a=1 b=2 c=3 c2=new d=4" {
		t.Errorf("IterSized(a, e, 4) = %q", got)
	}
	if n := fc.callCount("Scan") - before; n != 1 {
		t.Errorf("a range of 4 stored entries with expect 4 took %d scan requests, want 1", n)
	}
	for _, reverse := range []bool{false, true} {
		want := "a=1 b=2 c=3 c2=new d=4 f=6 g=7"
		if reverse {
			want = "g=7 f=6 d=4 c2=new c=3 b=2 a=1"
		}
		if got := iterate("a", "z", reverse, 1); got != want {
			t.Errorf("IterSized(a, z, reverse %v, expect 1) = %q, want %q", reverse, got, want)
		}
	}
}

func TestSingleRegionCommitIsOnePhase(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "a=1", "b=2")
	if p, cm := fc.callCount("Prewrite"), fc.callCount("Commit"); p != 1 || cm != 0 {
		t.Fatalf("prewrites=%d commits=%d, want 1 and 0", p, cm)
	}
	if get(t, begin(t, c, kv.TxnOptions{}), "b") != "2" {
		t.Fatal("one-phase commit not visible")
	}
}

// A transaction in one region larger than one prewrite request (a bulk
// INSERT) still commits in one request, up to the one-phase bounds; past
// them it runs 2PC in requests of bounded size.
func TestLargeSingleRegionCommitIsOnePhase(t *testing.T) {
	for _, tc := range []struct {
		keys, valueBytes   int
		prewrites, commits int
	}{
		{keys: 3 * maxMutationsPerRequest / 2, valueBytes: 100, prewrites: 1, commits: 0},
		{keys: maxOnePCMutations, valueBytes: 10, prewrites: 1, commits: 0},
		{keys: maxOnePCMutations + 1, valueBytes: 10, prewrites: 5, commits: 5},
		{keys: 2 * maxMutationsPerRequest, valueBytes: maxOnePCBytes / maxMutationsPerRequest, prewrites: 2, commits: 2},
	} {
		fc := newFakeCluster()
		c := fc.newClient(Options{})
		txn := begin(t, c, kv.TxnOptions{})
		value := bytes.Repeat([]byte("v"), tc.valueBytes)
		for i := 0; i < tc.keys; i++ {
			if err := txn.Set([]byte(fmt.Sprintf("k%06d", i)), value); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		if p, cm := fc.callCount("Prewrite"), fc.callCount("Commit"); p != tc.prewrites || cm != tc.commits {
			t.Errorf("%d keys of %d bytes: prewrites=%d commits=%d, want %d and %d",
				tc.keys, tc.valueBytes, p, cm, tc.prewrites, tc.commits)
		}
		if locked := fc.lockedKeys(); len(locked) != 0 {
			t.Errorf("%d keys: locks left after commit: %d", tc.keys, len(locked))
		}
		if got := get(t, begin(t, c, kv.TxnOptions{}), fmt.Sprintf("k%06d", tc.keys-1)); got != string(value) {
			t.Errorf("%d keys: last key not visible", tc.keys)
		}
		c.Close()
	}
}

func TestMultiRegionCommitIsTwoPhaseAndAtomic(t *testing.T) {
	fc := newFakeCluster("g", "p")
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "a=1", "h=2", "q=3")
	if p, cm := fc.callCount("Prewrite"), fc.callCount("Commit"); p != 3 || cm != 3 {
		t.Fatalf("prewrites=%d commits=%d, want 3 and 3", p, cm)
	}
	if locked := fc.lockedKeys(); len(locked) != 0 {
		t.Fatalf("locks left after commit: %v", locked)
	}
	txn := begin(t, c, kv.TxnOptions{})
	if get(t, txn, "a")+get(t, txn, "h")+get(t, txn, "q") != "123" {
		t.Fatal("not all writes visible")
	}
}

func TestWriteConflictIsRetryableAndLeavesNoLocks(t *testing.T) {
	for _, splits := range [][]string{nil, {"m"}} { // one-phase and two-phase
		fc := newFakeCluster(splits...)
		c := fc.newClient(Options{})
		load(t, c, "k=0")
		loser := begin(t, c, kv.TxnOptions{})
		winner := begin(t, c, kv.TxnOptions{})
		_ = winner.Set([]byte("k"), []byte("winner"))
		if err := winner.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		_ = loser.Set([]byte("a"), []byte("loser"))
		_ = loser.Set([]byte("k"), []byte("loser"))
		_ = loser.Set([]byte("z"), []byte("loser"))
		err := loser.Commit(context.Background())
		var re *kv.RetryableError
		if !errors.As(err, &re) || re.LockWaitTimeout {
			t.Fatalf("splits %v: commit err = %v, want a write-conflict RetryableError", splits, err)
		}
		if locked := fc.lockedKeys(); len(locked) != 0 {
			t.Fatalf("splits %v: locks left after a failed commit: %v", splits, locked)
		}
		check := begin(t, c, kv.TxnOptions{})
		if get(t, check, "k") != "winner" || get(t, check, "a") != "<none>" || get(t, check, "z") != "<none>" {
			t.Fatalf("splits %v: a failed transaction left writes", splits)
		}
		c.Close()
	}
}

func TestReaderRollsBackLocksOfCrashedTransaction(t *testing.T) {
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	crashedTS, err := c.getTS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A coordinator prewrote a and x, then died: its 1ms TTL has expired.
	fc.placeLock("a", "a", crashedTS, 1, "dead")
	fc.placeLock("x", "a", crashedTS, 1, "dead")
	time.Sleep(5 * time.Millisecond)
	txn := begin(t, c, kv.TxnOptions{})
	if got := get(t, txn, "x"); got != "<none>" {
		t.Fatalf("read %q through a crashed transaction's lock", got)
	}
	if got, err := txn.Scan(context.Background(), nil, nil, 0, false); err != nil || len(got) != 0 {
		t.Fatalf("scan = %v, %v; want nothing", render(got), err)
	}
	if locked := fc.lockedKeys(); len(locked) != 0 {
		t.Fatalf("locks left: %v", locked)
	}
}

func TestReaderRollsForwardSecondaryOfCommittedTransaction(t *testing.T) {
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	startTS, _ := c.getTS(context.Background())
	fc.placeLock("a", "a", startTS, 60000, "A")
	fc.placeLock("x", "a", startTS, 60000, "X")
	commitTS, _ := c.getTS(context.Background())
	fc.mu.Lock()
	fc.commitKey([]byte("a"), startTS, commitTS) // primary committed; coordinator died before x
	fc.mu.Unlock()
	txn := begin(t, c, kv.TxnOptions{})
	if got := get(t, txn, "x"); got != "X" {
		t.Fatalf("secondary of a committed transaction read as %q, want X", got)
	}
	if fc.callCount("ResolveLock") != 1 {
		t.Fatalf("ResolveLock calls = %d, want 1", fc.callCount("ResolveLock"))
	}
}

func TestReaderWaitsForLiveLockOutcome(t *testing.T) {
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	startTS, _ := c.getTS(context.Background())
	fc.placeLock("a", "a", startTS, 60000, "A")
	fc.placeLock("x", "a", startTS, 60000, "X")
	reader := begin(t, c, kv.TxnOptions{})
	go func() {
		time.Sleep(50 * time.Millisecond)
		commitTS, _ := c.getTS(context.Background())
		fc.mu.Lock()
		fc.commitKey([]byte("a"), startTS, commitTS)
		fc.commitKey([]byte("x"), startTS, commitTS)
		fc.mu.Unlock()
	}()
	began := time.Now()
	// The lock's start ts is below the reader's snapshot, so the reader
	// must wait for the outcome. The commit lands after the reader's
	// snapshot, so it then reads the version before it.
	if got := get(t, reader, "x"); got != "<none>" {
		t.Fatalf("read %q, want <none>", got)
	}
	if waited := time.Since(began); waited < 40*time.Millisecond {
		t.Fatalf("reader did not wait for the live lock (%v)", waited)
	}
}

func TestRegionErrorsAreRetriedTransparently(t *testing.T) {
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "a=1", "x=2")

	fc.setLeader("a", 2) // cached leader is stale: NotLeader with a hint
	fc.split("d")        // cached epoch is stale: EpochNotMatch
	fc.split("t")
	txn := begin(t, c, kv.TxnOptions{})
	if get(t, txn, "a") != "1" || get(t, txn, "x") != "2" {
		t.Fatal("reads after leader change and split")
	}
	fc.split("b")
	fc.setLeader("x", 3)
	_ = txn.Set([]byte("a"), []byte("10"))
	_ = txn.Set([]byte("c"), []byte("30"))
	_ = txn.Set([]byte("x"), []byte("20"))
	fc.split("w")
	if err := txn.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := begin(t, c, kv.TxnOptions{})
	got, err := check.Scan(context.Background(), nil, nil, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if render(got) != "x=20 c=30 a=10" {
		t.Fatalf("after commit through region changes: %s", render(got))
	}
}

func TestLostOnePCReplyIsUndeterminedNotRetryable(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{})
	defer c.Close()
	fc.intercept = func(_ uint64, method string, _ any) (any, error) {
		if method == "Prewrite" {
			return nil, errors.New("connection reset")
		}
		return nil, nil
	}
	txn := begin(t, c, kv.TxnOptions{})
	_ = txn.Set([]byte("k"), []byte("v"))
	err := txn.Commit(context.Background())
	if !errors.Is(err, ErrResultUndetermined) || kv.IsRetryable(err) {
		t.Fatalf("err = %v, want ErrResultUndetermined and not retryable", err)
	}
}

func TestStoreFailureMovesToAnotherReplica(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "k=v")
	// Store 1 dies; store 2 takes over leadership.
	fc.intercept = func(store uint64, _ string, _ any) (any, error) {
		if store == 1 {
			return nil, errors.New("connection refused")
		}
		return nil, nil
	}
	fc.setLeader("k", 2)
	if got := get(t, begin(t, c, kv.TxnOptions{}), "k"); got != "v" {
		t.Fatalf("read %q after leader store died", got)
	}
}

func TestFinishedTransactionRejectsUse(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{})
	defer c.Close()
	txn := begin(t, c, kv.TxnOptions{})
	if err := txn.Commit(context.Background()); err != nil {
		t.Fatal(err) // an empty commit does nothing
	}
	if fc.callCount("Prewrite") != 0 {
		t.Fatal("an empty transaction sent a prewrite")
	}
	if err := txn.Set([]byte("k"), nil); !errors.Is(err, ErrTxnFinished) {
		t.Fatalf("Set after commit: %v", err)
	}
	if _, err := txn.Get(context.Background(), []byte("k")); !errors.Is(err, ErrTxnFinished) {
		t.Fatalf("Get after commit: %v", err)
	}
	if err := txn.Rollback(context.Background()); err != nil {
		t.Fatalf("Rollback after commit: %v", err)
	}
}

// visitAll reads [start, end) through a ScanFunc cursor, limit entries per
// Visit, and renders what it was handed.
func visitAll(t *testing.T, txn *Txn, start, end string, limit int) (string, error) {
	t.Helper()
	return visitAllDir(t, txn, start, end, limit, false)
}

func visitAllDir(t *testing.T, txn *Txn, start, end string, limit int, reverse bool) (string, error) {
	t.Helper()
	var s, e []byte
	if start != "" {
		s = []byte(start)
	}
	if end != "" {
		e = []byte(end)
	}
	cur, err := txn.ScanFunc(context.Background(), s, e, reverse)
	if err != nil || cur == nil {
		t.Fatalf("ScanFunc(%q, %q) = %v, %v", start, end, cur, err)
	}
	var got []string
	for visits := 0; ; visits++ {
		n := 0
		done, err := cur.Visit(context.Background(), limit, func(key, value []byte) error {
			n++
			got = append(got, string(key)+"="+string(value))
			return nil
		})
		if err != nil {
			return strings.Join(got, " "), err
		}
		if n > limit {
			t.Fatalf("a visit of %d entries handed over %d", limit, n)
		}
		if done {
			return strings.Join(got, " "), nil
		}
		if visits > 100 {
			t.Fatal("cursor never finished")
		}
	}
}

// TestScanFuncVisitsWhatScanReads: a ScanFunc cursor hands over the same
// entries as Scan, in order, both ways, whatever the batch size, across
// regions that split and move while it reads, through a crashed
// transaction's lock in the middle of the range.
func TestScanFuncVisitsWhatScanReads(t *testing.T) {
	fc := newFakeCluster("c", "f")
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "a=1", "b=2", "c=3", "d=4", "e=5", "f=6", "g=7", "h=8")
	ctx := context.Background()
	for _, limit := range []int{1, 2, 3, 100} {
		txn := begin(t, c, kv.TxnOptions{})
		for _, r := range [][2]string{{"", ""}, {"b", "g"}, {"c", "f"}, {"d", "e"}, {"g", "c"}, {"bb", "zz"}, {"", "c"}} {
			var s, e []byte
			if r[0] != "" {
				s = []byte(r[0])
			}
			if r[1] != "" {
				e = []byte(r[1])
			}
			for _, reverse := range []bool{false, true} {
				want, err := txn.Scan(ctx, s, e, 0, reverse)
				if err != nil {
					t.Fatal(err)
				}
				got, err := visitAllDir(t, txn, r[0], r[1], limit, reverse)
				if err != nil || got != render(want) {
					t.Errorf("limit %d [%q, %q) reverse %v: visited %q, %v; Scan read %q", limit, r[0], r[1], reverse, got, err, render(want))
				}
			}
		}
	}

	// Regions change under the cursor between visits.
	for i, reverse := range []bool{false, true} {
		txn := begin(t, c, kv.TxnOptions{})
		cur, err := txn.ScanFunc(ctx, nil, nil, reverse)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		collect := func(key, value []byte) error {
			got = append(got, string(key)+"="+string(value))
			return nil
		}
		if done, err := cur.Visit(ctx, 2, collect); done || err != nil {
			t.Fatalf("first visit: done %v, %v", done, err)
		}
		fc.split([]string{"e", "b"}[i])
		fc.setLeader("g", uint64(2+i))
		for done := false; !done; {
			if done, err = cur.Visit(ctx, 2, collect); err != nil {
				t.Fatal(err)
			}
		}
		want := "a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8"
		if reverse {
			want = "h=8 g=7 f=6 e=5 d=4 c=3 b=2 a=1"
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("reverse %v, through splits and a leader move: %v", reverse, got)
		}
	}

	// A crashed transaction's expired lock in the middle of the range is
	// rolled back and the cursor goes on after the entries before it.
	crashedTS, err := c.getTS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fc.placeLock("d", "d", crashedTS, 1, "dead")
	fc.placeLock("f", "d", crashedTS, 1, "dead")
	time.Sleep(5 * time.Millisecond)
	txn := begin(t, c, kv.TxnOptions{})
	if got, err := visitAll(t, txn, "", "", 100); err != nil || got != "a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8" {
		t.Fatalf("through a crashed lock: %q, %v", got, err)
	}
	fc.placeLock("c", "c", crashedTS, 1, "dead")
	time.Sleep(5 * time.Millisecond)
	txn = begin(t, c, kv.TxnOptions{})
	if got, err := visitAllDir(t, txn, "", "", 100, true); err != nil || got != "h=8 g=7 f=6 e=5 d=4 c=3 b=2 a=1" {
		t.Fatalf("backward through a crashed lock: %q, %v", got, err)
	}
	if locked := fc.lockedKeys(); len(locked) != 0 {
		t.Fatalf("locks left: %v", locked)
	}

	// The caller's error ends the visit.
	cur, _ := txn.ScanFunc(ctx, nil, nil, false)
	stop := errors.New("stop")
	if _, err := cur.Visit(ctx, 10, func(key, _ []byte) error {
		if string(key) == "c" {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("visit returned %v, want the function's error", err)
	}
}

// TestScanFuncLeavesBufferedRangesToIter: only Iter merges a transaction's
// own writes, so ScanFunc serves no range that holds one.
func TestScanFuncLeavesBufferedRangesToIter(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "a=1", "c=3")
	txn := begin(t, c, kv.TxnOptions{})
	_ = txn.Delete([]byte("c"))
	ctx := context.Background()
	for _, r := range [][2]string{{"", ""}, {"b", "d"}, {"c", "c0"}, {"", "d"}} {
		var e []byte
		if r[1] != "" {
			e = []byte(r[1])
		}
		if cur, err := txn.ScanFunc(ctx, []byte(r[0]), e, false); cur != nil || err != nil {
			t.Errorf("ScanFunc(%q, %q) over a buffered delete = %v, %v", r[0], r[1], cur, err)
		}
	}
	if got, err := visitAll(t, txn, "a", "c", 10); err != nil || got != "a=1" {
		t.Errorf("[a, c) = %q, %v", got, err)
	}
	if got, err := visitAll(t, txn, "c0", "", 10); err != nil || got != "" {
		t.Errorf("[c0, -) = %q, %v", got, err)
	}
	_ = txn.Rollback(ctx)
	if _, err := txn.ScanFunc(ctx, nil, nil, true); !errors.Is(err, ErrTxnFinished) {
		t.Errorf("ScanFunc after rollback: %v", err)
	}
}
