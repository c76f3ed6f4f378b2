package e2e_test

// End-to-end tests: real transactions through the client against a real
// in-process node (Raft store, PD, KV service), both through the node's own
// in-process client and through a second client that reaches the node over
// gRPC.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-db/strata/client"
	"github.com/strata-db/strata/internal/node"
	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

type testNode struct {
	node   *node.Node
	conn   *grpc.ClientConn
	pd     kvpb.PDClient
	kv     kvpb.KvClient // raw KV service, for playing a crashed coordinator
	remote *client.Client
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func startNode(t *testing.T, opts client.Options) *testNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A port found free can be taken by another process before the node
	// binds it; then the node starts on another.
	var (
		addr string
		n    *node.Node
		err  error
	)
	for attempt := 1; ; attempt++ {
		addr = freeAddr(t)
		n, err = node.Start(ctx, node.Config{
			DataDir:  t.TempDir(),
			InMemory: true,
			GRPCAddr: addr,
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err == nil {
			break
		}
		if attempt == 5 || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	pd := kvpb.NewPDClient(conn)
	router := client.NewGRPCRouter(pd)
	tn := &testNode{node: n, conn: conn, pd: pd, kv: kvpb.NewKvClient(conn), remote: client.New(pd, router, opts)}
	t.Cleanup(func() {
		tn.remote.Close()
		router.Close()
		conn.Close()
		n.Close()
	})
	return tn
}

func mustBegin(t *testing.T, s kv.Storage, opts kv.TxnOptions) kv.Txn {
	t.Helper()
	txn, err := s.Begin(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return txn
}

func mustGet(t *testing.T, txn kv.Txn, key string) string {
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

func show(kvs []kv.KeyValue) string {
	s := ""
	for i, e := range kvs {
		if i > 0 {
			s += " "
		}
		s += string(e.Key) + "=" + string(e.Value)
	}
	return s
}

func TestEndToEndTransactions(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	router := client.NewGRPCRouter(tn.pd)
	defer router.Close()
	twoPC := client.New(tn.pd, router, client.Options{DisableOnePC: true})
	defer twoPC.Close()
	stores := map[string]kv.Storage{"in-process": tn.node.Storage(), "grpc": tn.remote, "grpc-2pc": twoPC}
	for name, store := range stores {
		p := "e2e/" + name + "/"
		w := mustBegin(t, store, kv.TxnOptions{})
		for i := 0; i < 5; i++ {
			_ = w.Set([]byte(fmt.Sprintf("%sk%d", p, i)), []byte(fmt.Sprint(i)))
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatalf("%s: multi-key commit: %v", name, err)
		}

		txn := mustBegin(t, store, kv.TxnOptions{})
		_ = txn.Delete([]byte(p + "k1"))
		_ = txn.Set([]byte(p+"k2"), []byte("twenty"))
		_ = txn.Set([]byte(p+"k25"), []byte("new"))
		if got := mustGet(t, txn, p+"k2"); got != "twenty" {
			t.Fatalf("%s: read-your-writes: %s", name, got)
		}
		if got := mustGet(t, txn, p+"k1"); got != "<none>" {
			t.Fatalf("%s: read own delete: %s", name, got)
		}
		fwd, err := txn.Scan(ctx, []byte(p), []byte(p+"~"), 0, false)
		if err != nil {
			t.Fatal(err)
		}
		want := p + "k0=0 " + p + "k2=twenty " + p + "k25=new " + p + "k3=3 " + p + "k4=4"
		if show(fwd) != want {
			t.Fatalf("%s: scan = %s, want %s", name, show(fwd), want)
		}
		rev, err := txn.Scan(ctx, []byte(p), []byte(p+"~"), 2, true)
		if err != nil {
			t.Fatal(err)
		}
		if show(rev) != p+"k4=4 "+p+"k3=3" {
			t.Fatalf("%s: reverse scan = %s", name, show(rev))
		}
		got, err := txn.BatchGet(ctx, [][]byte{[]byte(p + "k0"), []byte(p + "k1"), []byte(p + "k25"), []byte(p + "nope")})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || string(got[p+"k0"]) != "0" || string(got[p+"k25"]) != "new" {
			t.Fatalf("%s: BatchGet = %v", name, got)
		}
		if err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		after := mustBegin(t, store, kv.TxnOptions{})
		all, err := after.Scan(ctx, []byte(p), []byte(p+"~"), 0, false)
		if err != nil {
			t.Fatal(err)
		}
		if show(all) != want {
			t.Fatalf("%s: after commit scan = %s", name, show(all))
		}
	}
}

func TestEndToEndWriteConflictIsRetryable(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	store := tn.node.Storage()
	a := mustBegin(t, store, kv.TxnOptions{})
	b := mustBegin(t, store, kv.TxnOptions{})
	// b reads c before a commits, so a's commit lands after b's snapshot
	// (a commit nobody has read past may legitimately be ordered before
	// b's snapshot, and then b simply sees it).
	if got := mustGet(t, b, "e2e/c"); got != "<none>" {
		t.Fatalf("c = %q", got)
	}
	_ = a.Set([]byte("e2e/c"), []byte("a"))
	_ = b.Set([]byte("e2e/c"), []byte("b"))
	_ = b.Set([]byte("e2e/d"), []byte("b"))
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); !kv.IsRetryable(err) {
		t.Fatalf("second writer: %v, want retryable", err)
	}
	check := mustBegin(t, store, kv.TxnOptions{})
	if mustGet(t, check, "e2e/c") != "a" || mustGet(t, check, "e2e/d") != "<none>" {
		t.Fatal("the losing transaction left writes behind")
	}
}

func TestEndToEndConcurrentIncrementsLoseNothing(t *testing.T) {
	tn := startNode(t, client.Options{})
	router := client.NewGRPCRouter(tn.pd)
	defer router.Close()
	twoPC := client.New(tn.pd, router, client.Options{DisableOnePC: true})
	defer twoPC.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		store      kv.Storage
		forUpdate  bool // SELECT ... FOR UPDATE before the read
		pessimists bool
	}{
		{"optimistic", tn.node.Storage(), false, false},
		{"optimistic-2pc", twoPC, false, false},
		{"for-update", tn.node.Storage(), true, true},
		{"for-update-2pc", twoPC, true, true},
	} {
		key := []byte("e2e/counter/" + tc.name)
		const workers, each = 4, 10
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done := 0; done < each; {
					txn, err := tc.store.Begin(ctx, kv.TxnOptions{Pessimistic: tc.pessimists})
					if err != nil {
						t.Error(err)
						return
					}
					if tc.forUpdate {
						if err := txn.LockKeys(ctx, key); err != nil {
							_ = txn.Rollback(ctx)
							if kv.IsRetryable(err) {
								continue
							}
							t.Error(err)
							return
						}
					}
					n := 0
					if v, err := txn.Get(ctx, key); err == nil {
						fmt.Sscan(string(v), &n)
					} else if !errors.Is(err, kv.ErrNotFound) {
						t.Error(err)
						return
					}
					_ = txn.Set(key, []byte(fmt.Sprint(n+1)))
					switch err := txn.Commit(ctx); {
					case err == nil:
						done++
					case kv.IsRetryable(err):
					default:
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if got := mustGet(t, mustBegin(t, tc.store, kv.TxnOptions{}), string(key)); got != fmt.Sprint(workers*each) {
			t.Fatalf("%s: counter = %s after %d committed increments", tc.name, got, workers*each)
		}
	}
}

func TestEndToEndCommitReleasesLockedButUnwrittenKeys(t *testing.T) {
	tn := startNode(t, client.Options{})
	router := client.NewGRPCRouter(tn.pd)
	defer router.Close()
	ctx := context.Background()
	for _, opts := range []client.Options{{}, {DisableOnePC: true}} {
		c := client.New(tn.pd, router, opts)
		txn := mustBegin(t, c, kv.TxnOptions{Pessimistic: true})
		if err := txn.LockKeys(ctx, []byte("e2e/lk/a"), []byte("e2e/lk/b")); err != nil {
			t.Fatal(err)
		}
		_ = txn.Set([]byte("e2e/lk/a"), []byte("written"))
		if err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		// An optimistic LockKeys fails at once on a held lock, so success
		// proves both locks were released by the commit.
		probe := mustBegin(t, c, kv.TxnOptions{})
		if err := probe.LockKeys(ctx, []byte("e2e/lk/a"), []byte("e2e/lk/b")); err != nil {
			t.Fatalf("%+v: keys still locked after commit: %v", opts, err)
		}
		_ = probe.Rollback(ctx)
		if got := mustGet(t, mustBegin(t, c, kv.TxnOptions{}), "e2e/lk/a"); got != "written" {
			t.Fatalf("a = %q", got)
		}
		c.Close()
	}
}

// prewriteAndCrash plays a coordinator that prewrites keys (the first is the
// primary) and dies; if commitPrimary, it dies right after committing the
// primary.
func prewriteAndCrash(t *testing.T, tn *testNode, ttlMs uint64, commitPrimary bool, keys ...string) {
	t.Helper()
	ctx := context.Background()
	ts, err := tn.pd.Tso(ctx, &kvpb.TsoRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	startTS := ts.Timestamp
	for _, k := range keys {
		loc, err := tn.pd.GetRegion(ctx, &kvpb.GetRegionRequest{Key: []byte(k)})
		if err != nil {
			t.Fatal(err)
		}
		rctx := &kvpb.Context{RegionId: loc.Region.Id, RegionEpoch: loc.Region.Epoch, Peer: loc.Leader}
		resp, err := tn.kv.KvPrewrite(ctx, &kvpb.PrewriteRequest{
			Context:      rctx,
			Mutations:    []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(k), Value: []byte("crashed")}},
			PrimaryLock:  []byte(keys[0]),
			StartVersion: startTS,
			LockTtl:      ttlMs,
			TxnSize:      uint64(len(keys)),
		})
		if err != nil || resp.RegionError != nil || len(resp.Errors) > 0 {
			t.Fatalf("raw prewrite of %s: %v %v %v", k, err, resp.GetRegionError(), resp.GetErrors())
		}
	}
	if !commitPrimary {
		return
	}
	cts, err := tn.pd.Tso(ctx, &kvpb.TsoRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := tn.pd.GetRegion(ctx, &kvpb.GetRegionRequest{Key: []byte(keys[0])})
	resp, err := tn.kv.KvCommit(ctx, &kvpb.CommitRequest{
		Context:       &kvpb.Context{RegionId: loc.Region.Id, RegionEpoch: loc.Region.Epoch, Peer: loc.Leader},
		StartVersion:  startTS,
		Keys:          [][]byte{[]byte(keys[0])},
		CommitVersion: cts.Timestamp,
	})
	if err != nil || resp.RegionError != nil || resp.Error != nil {
		t.Fatalf("raw commit of primary: %v %v %v", err, resp.GetRegionError(), resp.GetError())
	}
}

func TestEndToEndLocksOfCrashedTransactionAreResolved(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()

	// Died after prewrite: once the TTL passes, readers roll it back.
	prewriteAndCrash(t, tn, 50, false, "e2e/rb/p", "e2e/rb/s")
	time.Sleep(100 * time.Millisecond)
	txn := mustBegin(t, tn.remote, kv.TxnOptions{})
	if got := mustGet(t, txn, "e2e/rb/s"); got != "<none>" {
		t.Fatalf("secondary of a dead uncommitted transaction reads %q", got)
	}
	rows, err := txn.Scan(ctx, []byte("e2e/rb/"), []byte("e2e/rb/~"), 0, false)
	if err != nil || len(rows) != 0 {
		t.Fatalf("scan over rolled-back locks = %s, %v", show(rows), err)
	}
	w := mustBegin(t, tn.remote, kv.TxnOptions{})
	_ = w.Set([]byte("e2e/rb/p"), []byte("fresh"))
	_ = w.Set([]byte("e2e/rb/s"), []byte("fresh"))
	if err := w.Commit(ctx); err != nil {
		t.Fatalf("writing over rolled-back locks: %v", err)
	}

	// Died after committing the primary: readers roll the secondary forward,
	// however long its TTL.
	prewriteAndCrash(t, tn, 60000, true, "e2e/rf/p", "e2e/rf/s")
	txn = mustBegin(t, tn.node.Storage(), kv.TxnOptions{})
	if got := mustGet(t, txn, "e2e/rf/s"); got != "crashed" {
		t.Fatalf("secondary of a committed transaction reads %q, want crashed", got)
	}
}

func TestEndToEndPessimisticLockWaitTimeout(t *testing.T) {
	tn := startNode(t, client.Options{LockWaitTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	holder := mustBegin(t, tn.remote, kv.TxnOptions{Pessimistic: true})
	if err := holder.LockKeys(ctx, []byte("e2e/row")); err != nil {
		t.Fatal(err)
	}
	waiter := mustBegin(t, tn.remote, kv.TxnOptions{Pessimistic: true})
	err := waiter.LockKeys(ctx, []byte("e2e/row"))
	var re *kv.RetryableError
	if !errors.As(err, &re) || !re.LockWaitTimeout {
		t.Fatalf("waiter: %v, want lock wait timeout", err)
	}
	_ = waiter.Rollback(ctx)
	_ = holder.Set([]byte("e2e/row"), []byte("held"))
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, mustBegin(t, tn.remote, kv.TxnOptions{}), "e2e/row"); got != "held" {
		t.Fatalf("row = %q", got)
	}
}

func TestEndToEndIteratorCrossesBatchesBothWays(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	store := tn.node.Storage()
	const n = 600 // more than two fetch batches of 256
	w := mustBegin(t, store, kv.TxnOptions{})
	for i := 0; i < n; i++ {
		_ = w.Set([]byte(fmt.Sprintf("e2e/iter/%04d", i)), []byte(fmt.Sprint(i)))
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	txn := mustBegin(t, store, kv.TxnOptions{})
	_ = txn.Delete([]byte("e2e/iter/0300"))
	_ = txn.Set([]byte("e2e/iter/0300x"), []byte("buffered"))

	collect := func(start, end []byte, reverse bool) []string {
		it, err := txn.Iter(ctx, start, end, reverse)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var keys []string
		for it.Valid() {
			if k := string(it.Key()); len(k) >= 9 && k[:9] == "e2e/iter/" {
				keys = append(keys, k)
			}
			if err := it.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return keys
	}
	fwd := collect([]byte("e2e/iter/"), []byte("e2e/iter/~"), false)
	// The reverse scan is unbounded above: it starts from the last region
	// of the keyspace and must find its way back to the prefix.
	rev := collect([]byte("e2e/iter/"), nil, true)
	if len(fwd) != n || len(rev) != n {
		t.Fatalf("forward %d keys, reverse %d keys, want %d", len(fwd), len(rev), n)
	}
	for i := range fwd {
		if fwd[i] != rev[n-1-i] {
			t.Fatalf("forward[%d]=%s but reverse[%d]=%s", i, fwd[i], n-1-i, rev[n-1-i])
		}
		if i > 0 && fwd[i-1] >= fwd[i] {
			t.Fatalf("forward out of order at %d: %s then %s", i, fwd[i-1], fwd[i])
		}
	}
	if fwd[300] != "e2e/iter/0300x" {
		t.Fatalf("buffered writes not merged: fwd[300] = %s", fwd[300])
	}
}

func TestEndToEndReadCommittedRefreshesSnapshot(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	store := tn.node.Storage()
	rc := mustBegin(t, store, kv.TxnOptions{ReadCommitted: true})
	si := mustBegin(t, store, kv.TxnOptions{})
	if mustGet(t, rc, "e2e/rc") != "<none>" || mustGet(t, si, "e2e/rc") != "<none>" {
		t.Fatal("unexpected value")
	}
	w := mustBegin(t, store, kv.TxnOptions{})
	_ = w.Set([]byte("e2e/rc"), []byte("v"))
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	type refresher interface{ RefreshSnapshot(context.Context) error }
	for _, txn := range []kv.Txn{rc, si} {
		if err := txn.(refresher).RefreshSnapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustGet(t, rc, "e2e/rc"); got != "v" {
		t.Fatalf("read committed after refresh: %q, want v", got)
	}
	if got := mustGet(t, si, "e2e/rc"); got != "<none>" {
		t.Fatalf("snapshot isolation after refresh: %q, want <none>", got)
	}
}

// A program outside the module reaches a node through Connect and the
// public kv contract only.
func TestConnectFromOutside(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	c, err := client.Connect(ctx, []string{"127.0.0.1:1", tn.conn.Target()}, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	txn := mustBegin(t, c, kv.TxnOptions{})
	txn.Set([]byte("outside"), []byte("yes"))
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	txn = mustBegin(t, c, kv.TxnOptions{})
	v, err := txn.Get(ctx, []byte("outside"))
	if err != nil || string(v) != "yes" {
		t.Fatalf("get: %q %v", v, err)
	}
}
