// Package client is Strata's public Go client: transactions over the
// region-replicated key-value store, with snapshot isolation and atomic
// multi-key commit. It is the only API outside users import; the SQL layer
// uses it through the kv.Storage / kv.Txn contract.
//
// # Connecting
//
// From another program, give Connect the gRPC address of any node of the
// cluster (more than one to survive one being down):
//
//	c, err := client.Connect(ctx, []string{"10.0.0.1:20160", "10.0.0.2:20160"}, client.Options{})
//	defer c.Close()
//
// Underneath, a Client needs the placement driver (for timestamps and the region
// directory) and a Router that reaches the KV service of each store:
//
//	pd := kvpb.NewPDClient(conn)              // or client.LocalPD(pdServer) in-process
//	router := client.NewGRPCRouter(pd)        // dials stores at the addresses PD knows
//	router.SetLocal(myStoreID, client.LocalKv(kvServer)) // optional in-process fast path
//	c := client.New(pd, router, client.Options{})
//	defer c.Close()
//	defer router.Close()
//
// LocalKv and LocalPD turn a server in the same process into a client with
// plain function calls (no serialization), which is how a node's SQL layer
// talks to its own store.
//
// # Transactions
//
//	txn, err := c.Begin(ctx, kv.TxnOptions{})
//	v, err := txn.Get(ctx, []byte("k1"))       // kv.ErrNotFound if absent
//	txn.Set([]byte("k1"), []byte("v2"))        // buffered until Commit
//	txn.Delete([]byte("k2"))
//	txn.Insert([]byte("k3"), []byte("v3"))     // Commit checks that k3 has no value
//	rows, err := txn.Scan(ctx, start, end, 100, false)
//	err = txn.Commit(ctx)
//	if kv.IsRetryable(err) {
//		// A write conflict or lock wait timeout: nothing was written.
//		// Run the whole transaction again (reads included) if the
//		// application wants to; the client never does it for you.
//	}
//
// Reads see the snapshot at the transaction's start timestamp plus the
// transaction's own writes. Scans and iterators merge the two, in either
// direction, across region boundaries. Txn.ScanFunc (kv.FuncScanner) reads
// a range the transaction has not written to through a cursor that hands
// each entry to a function as the KV service reads it, without building
// the pairs, when the region's leader is in this process. A Txn is used by
// one goroutine at a time; a Client is shared by all.
//
// SELECT ... FOR UPDATE is LockKeys: it locks keys at once instead of at
// commit. With kv.TxnOptions{Pessimistic: true} it waits for other
// transactions' locks up to Options.LockWaitTimeout; otherwise it fails at
// once. Under snapshot isolation a key changed by someone else after the
// transaction's snapshot fails LockKeys with a retryable error.
//
// A failed Commit is one of: a *kv.RetryableError (nothing was written), a
// *kv.KeyExistsError when a key written with Insert had a value (nothing was
// written), an error wrapping ErrResultUndetermined (the commit may or may
// not have happened: do not retry blindly), or another error (nothing was
// written).
//
// # How it works
//
// Timestamps come from PD's timestamp oracle through a batcher: however many
// goroutines ask at once, one Tso RPC is in flight and serves them all.
//
// The region cache maps a key to its region and leader; a miss asks PD.
// When a store answers with a region error (not leader, epoch changed, key
// not in region, busy) the cache corrects itself from the answer and the
// request is retried after a short exponential backoff, bounded by
// Options.BackoffBudget and the caller's context. Users never see region
// errors.
//
// Commit is Percolator. If every key lives in one region the transaction
// commits in one request (one-phase commit). Otherwise the first key is the
// primary: every key is prewritten (locked) in parallel, a commit timestamp
// is taken, the primary is committed (the commit point), then the
// secondaries. A coordinator that dies leaves locks; the lock TTL
// (Options.LockTTL, extended by heartbeats while the coordinator lives)
// lets the next reader or writer check the primary and roll the locks
// forward or back.
package client
