package e2e_test

// Transactions across a region split: the node's data region is split
// between the keys of one transaction, so its two-phase commit spans two
// Raft groups, and transactions in flight when the split happens re-route
// through their region cache.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/client"
	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

// regionOf asks PD (over gRPC, as an outside client would) for the region
// holding key.
func regionOf(t *testing.T, tn *testNode, key string) *kvpb.Region {
	t.Helper()
	resp, err := tn.pd.GetRegion(context.Background(), &kvpb.GetRegionRequest{Key: []byte(key)})
	if err != nil || resp.Error != nil {
		t.Fatalf("pd GetRegion %q: %v %v", key, err, resp.GetError())
	}
	return resp.Region
}

func split(t *testing.T, tn *testNode, key string) (left, right *kvpb.Region) {
	t.Helper()
	left, right, err := tn.node.SplitRegion(context.Background(), []byte(key))
	if err != nil {
		t.Fatalf("split at %q: %v", key, err)
	}
	return left, right
}

func TestEndToEndCommitAcrossSplitRegionsIsAtomic(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	router := client.NewGRPCRouter(tn.pd)
	defer router.Close()
	twoPC := client.New(tn.pd, router, client.Options{DisableOnePC: true})
	defer twoPC.Close()

	left, right := split(t, tn, "e2e/split/m")
	// PD heard about the split at once: no client waits for a heartbeat.
	if got := regionOf(t, tn, "e2e/split/z"); got.Id != right.Id || got.Epoch.GetVersion() != right.Epoch.GetVersion() {
		t.Fatalf("pd routes e2e/split/z to region %d v%d, want the new region %d v%d",
			got.Id, got.Epoch.GetVersion(), right.Id, right.Epoch.GetVersion())
	}
	if got := regionOf(t, tn, "e2e/split/a"); got.Id != left.Id {
		t.Fatalf("pd routes e2e/split/a to region %d, want %d", got.Id, left.Id)
	}

	for name, store := range map[string]kv.Storage{"in-process": tn.node.Storage(), "grpc": tn.remote, "grpc-2pc": twoPC} {
		a, z := "e2e/split/a/"+name, "e2e/split/z/"+name

		// Committed: visible in both regions.
		w := mustBegin(t, store, kv.TxnOptions{})
		_ = w.Set([]byte(a), []byte("1"))
		_ = w.Set([]byte(z), []byte("1"))
		if err := w.Commit(ctx); err != nil {
			t.Fatalf("%s: commit across regions: %v", name, err)
		}
		r := mustBegin(t, store, kv.TxnOptions{})
		if ga, gz := mustGet(t, r, a), mustGet(t, r, z); ga != "1" || gz != "1" {
			t.Fatalf("%s: after commit a=%s z=%s", name, ga, gz)
		}

		// Rolled back: visible in neither.
		rb := mustBegin(t, store, kv.TxnOptions{})
		_ = rb.Set([]byte(a), []byte("rolled back"))
		_ = rb.Set([]byte(z), []byte("rolled back"))
		if err := rb.Rollback(ctx); err != nil {
			t.Fatal(err)
		}

		// Failed on the other region: the secondary (z, in the new
		// region) conflicts, so the primary (a) must not commit either.
		loser := mustBegin(t, store, kv.TxnOptions{})
		if got := mustGet(t, loser, z); got != "1" {
			t.Fatalf("%s: z = %s", name, got)
		}
		winner := mustBegin(t, store, kv.TxnOptions{})
		_ = winner.Set([]byte(z), []byte("winner"))
		if err := winner.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		_ = loser.Set([]byte(a), []byte("loser"))
		_ = loser.Set([]byte(z), []byte("loser"))
		if err := loser.Commit(ctx); !kv.IsRetryable(err) {
			t.Fatalf("%s: conflicting commit across regions: %v, want retryable", name, err)
		}

		r = mustBegin(t, store, kv.TxnOptions{})
		if ga, gz := mustGet(t, r, a), mustGet(t, r, z); ga != "1" || gz != "winner" {
			t.Fatalf("%s: after a rollback and a failed commit a=%s z=%s, want 1 and winner", name, ga, gz)
		}
		rows, err := r.Scan(ctx, []byte("e2e/split/"), []byte("e2e/split/~"), 0, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range rows {
			if string(kv.Value) == "rolled back" || string(kv.Value) == "loser" {
				t.Fatalf("%s: scan across both regions sees %s=%s", name, kv.Key, kv.Value)
			}
		}
	}
}

// A transaction that read and buffered its writes while the keys were in
// one region commits after the region split between them: its cached
// region is stale, the store answers EpochNotMatch, and the commit
// re-groups its keys by the new regions (one-phase commit is no longer
// possible, so it runs two-phase commit over both).
func TestEndToEndTransactionInFlightAcrossASplit(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	router := client.NewGRPCRouter(tn.pd)
	defer router.Close()
	twoPC := client.New(tn.pd, router, client.Options{DisableOnePC: true})
	defer twoPC.Close()
	for i, store := range []kv.Storage{tn.node.Storage(), tn.remote, twoPC} {
		p := fmt.Sprintf("e2e/inflight%d/", i)
		txn := mustBegin(t, store, kv.TxnOptions{})
		if got := mustGet(t, txn, p+"a"); got != "<none>" { // caches the region before the split
			t.Fatalf("a = %s", got)
		}
		_ = txn.Set([]byte(p+"a"), []byte("A"))
		_ = txn.Set([]byte(p+"z"), []byte("Z"))
		_, right := split(t, tn, p+"m")
		if got := mustGet(t, txn, p+"z"); got != "Z" {
			t.Fatalf("read-your-writes after split: %s", got)
		}
		if err := txn.Commit(ctx); err != nil {
			t.Fatalf("store %d: commit of a transaction begun before the split: %v", i, err)
		}
		if got := regionOf(t, tn, p+"z"); got.Id != right.Id {
			t.Fatalf("z is in region %d, want the new region %d", got.Id, right.Id)
		}
		r := mustBegin(t, tn.remote, kv.TxnOptions{})
		if ga, gz := mustGet(t, r, p+"a"), mustGet(t, r, p+"z"); ga != "A" || gz != "Z" {
			t.Fatalf("store %d: a=%s z=%s", i, ga, gz)
		}
	}
}

// Locks prewritten while two keys shared a region end up in two regions
// after a split. The coordinator commits the primary through the region
// that now holds it and dies; a reader of the secondary finds its lock in
// the new region and rolls it forward. A second transaction dies before
// committing: its locks on both sides are rolled back.
func TestEndToEndLocksFromBeforeASplitAreResolved(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	prewrite := func(ttl uint64, value string, keys ...string) uint64 {
		ts, err := tn.pd.Tso(ctx, &kvpb.TsoRequest{Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		reg := regionOf(t, tn, keys[0])
		var muts []*kvpb.Mutation
		for _, k := range keys {
			if got := regionOf(t, tn, k); got.Id != reg.Id {
				t.Fatalf("keys start in regions %d and %d; the test wants one", reg.Id, got.Id)
			}
			muts = append(muts, &kvpb.Mutation{Op: kvpb.Op_Put, Key: []byte(k), Value: []byte(value)})
		}
		resp, err := tn.kv.KvPrewrite(ctx, &kvpb.PrewriteRequest{
			Context:   &kvpb.Context{RegionId: reg.Id, RegionEpoch: reg.Epoch, Peer: reg.Peers[0]},
			Mutations: muts, PrimaryLock: []byte(keys[0]), StartVersion: ts.Timestamp, LockTtl: ttl, TxnSize: uint64(len(keys)),
		})
		if err != nil || resp.RegionError != nil || len(resp.Errors) > 0 {
			t.Fatalf("prewrite: %v %v %v", err, resp.GetRegionError(), resp.GetErrors())
		}
		return ts.Timestamp
	}

	// Committed primary, secondary left locked across the split.
	old := regionOf(t, tn, "e2e/lk/p")
	startTS := prewrite(60000, "committed", "e2e/lk/p", "e2e/lk/s")
	split(t, tn, "e2e/lk/q")
	cts, err := tn.pd.Tso(ctx, &kvpb.TsoRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(reg *kvpb.Region) *kvpb.CommitResponse {
		resp, err := tn.kv.KvCommit(ctx, &kvpb.CommitRequest{
			Context:      &kvpb.Context{RegionId: reg.Id, RegionEpoch: reg.Epoch, Peer: reg.Peers[0]},
			StartVersion: startTS, Keys: [][]byte{[]byte("e2e/lk/p")}, CommitVersion: cts.Timestamp,
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Under the region it prewrote in, the commit is refused and told the
	// current layout.
	if resp := commit(old); resp.RegionError.GetEpochNotMatch() == nil || len(resp.RegionError.EpochNotMatch.CurrentRegions) != 2 {
		t.Fatalf("commit under the pre-split epoch: %v, want EpochNotMatch naming both regions", resp.RegionError)
	}
	if resp := commit(regionOf(t, tn, "e2e/lk/p")); resp.RegionError != nil || resp.Error != nil {
		t.Fatalf("commit of the primary: %v %v", resp.RegionError, resp.Error)
	}
	if got := mustGet(t, mustBegin(t, tn.remote, kv.TxnOptions{}), "e2e/lk/s"); got != "committed" {
		t.Fatalf("secondary in the new region reads %q, want it rolled forward", got)
	}

	// Uncommitted, coordinator gone: both sides roll back once the TTL passes.
	prewrite(50, "dead", "e2e/rb2/a", "e2e/rb2/z")
	split(t, tn, "e2e/rb2/m")
	time.Sleep(100 * time.Millisecond)
	r := mustBegin(t, tn.node.Storage(), kv.TxnOptions{})
	if ga, gz := mustGet(t, r, "e2e/rb2/a"), mustGet(t, r, "e2e/rb2/z"); ga != "<none>" || gz != "<none>" {
		t.Fatalf("dead transaction visible: a=%s z=%s", ga, gz)
	}
	w := mustBegin(t, tn.node.Storage(), kv.TxnOptions{})
	_ = w.Set([]byte("e2e/rb2/a"), []byte("fresh"))
	_ = w.Set([]byte("e2e/rb2/z"), []byte("fresh"))
	if err := w.Commit(ctx); err != nil {
		t.Fatalf("writing over rolled-back locks in two regions: %v", err)
	}
}

// Bank transfers between accounts run while the account range is split
// three times. Every transfer is one transaction over two accounts, often
// in two regions; every snapshot must see the same total.
func TestEndToEndTransfersStayAtomicWhileSplitting(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	router := client.NewGRPCRouter(tn.pd)
	defer router.Close()
	twoPC := client.New(tn.pd, router, client.Options{DisableOnePC: true})
	defer twoPC.Close()
	const accounts, initial = 8, 100
	acct := func(i int) []byte { return []byte(fmt.Sprintf("e2e/bank/%d", i)) }
	setup := mustBegin(t, tn.node.Storage(), kv.TxnOptions{})
	for i := 0; i < accounts; i++ {
		_ = setup.Set(acct(i), []byte(fmt.Sprint(initial)))
	}
	if err := setup.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// total sums the accounts as txn's snapshot sees them; balances
	// lists them, for failure messages.
	total := func(txn kv.Txn) (sum int, balances string, err error) {
		rows, err := txn.Scan(ctx, []byte("e2e/bank/"), []byte("e2e/bank/~"), 0, false)
		if err != nil {
			return 0, "", err
		}
		if len(rows) != accounts {
			return 0, "", fmt.Errorf("scan found %d accounts", len(rows))
		}
		for _, r := range rows {
			var n int
			fmt.Sscan(string(r.Value), &n)
			sum += n
			balances += fmt.Sprintf(" %s=%d", r.Key[len("e2e/bank/"):], n)
		}
		return sum, balances, nil
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed := 0
	for w, store := range []kv.Storage{tn.node.Storage(), tn.remote, twoPC, twoPC} {
		wg.Add(1)
		go func(w int, store kv.Storage) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				from, to := rng.Intn(accounts), rng.Intn(accounts)
				if from == to {
					continue
				}
				txn, err := store.Begin(ctx, kv.TxnOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				var bal [2]int
				for i, k := range [][]byte{acct(from), acct(to)} {
					v, err := txn.Get(ctx, k)
					if err != nil {
						t.Errorf("worker %d: get: %v", w, err)
						return
					}
					fmt.Sscan(string(v), &bal[i])
				}
				amount := rng.Intn(10)
				_ = txn.Set(acct(from), []byte(fmt.Sprint(bal[0]-amount)))
				_ = txn.Set(acct(to), []byte(fmt.Sprint(bal[1]+amount)))
				switch err := txn.Commit(ctx); {
				case err == nil:
					mu.Lock()
					committed++
					mu.Unlock()
				case kv.IsRetryable(err):
				case errors.Is(err, client.ErrResultUndetermined):
					t.Errorf("worker %d: %v", w, err)
					return
				default:
					t.Errorf("worker %d: commit: %v", w, err)
					return
				}
			}
		}(w, store)
	}
	// Auditors read the total while the splits happen.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			txn := mustBegin(t, tn.remote, kv.TxnOptions{})
			sum, balances, err := total(txn)
			if err != nil {
				t.Errorf("audit: %v", err)
				return
			}
			if sum != accounts*initial {
				// Read the same snapshot again, now that the writes in
				// flight have settled: a different answer means the first
				// scan saw a commit half applied.
				again, againBalances, err := total(txn)
				t.Errorf("audit at ts %d: total %d, want %d:%s\nthe same snapshot read again: total %d (%v):%s",
					txn.StartTS(), sum, accounts*initial, balances, again, err, againBalances)
				return
			}
		}
	}()
	for _, k := range []string{"e2e/bank/4", "e2e/bank/2", "e2e/bank/6"} {
		time.Sleep(100 * time.Millisecond)
		split(t, tn, k)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	sum, balances, err := total(mustBegin(t, tn.node.Storage(), kv.TxnOptions{}))
	if err != nil || sum != accounts*initial {
		t.Fatalf("final total %d (%v), want %d:%s", sum, err, accounts*initial, balances)
	}
	regions := map[uint64]bool{}
	for i := 0; i < accounts; i++ {
		regions[regionOf(t, tn, string(acct(i))).Id] = true
	}
	if len(regions) != 4 || committed == 0 {
		t.Fatalf("accounts in %d regions, %d transfers committed; want 4 regions and some transfers", len(regions), committed)
	}
}
