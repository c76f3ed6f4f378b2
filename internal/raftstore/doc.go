// Package raftstore runs the Raft replicas (peers) of the regions a store
// holds, on top of the store's one Pebble engine.
//
// Every region is an etcd raft RawNode group, even with a single voter. One
// goroutine, the store loop, drives all of them:
//
//  1. drain Ready from every replica that has one;
//  2. write all their entries and HardStates into ONE Pebble batch and
//     commit it with ONE fsync (group commit). Nothing of a Ready is sent
//     before this: etcd raft's "persist before you send" contract;
//  3. send the Ready's messages (batched per destination store);
//  4. apply committed entries of all replicas in one batch which also
//     carries each replica's applied index, so applied data and applied
//     index move together (no double apply after a crash);
//  5. wake the proposers whose entries were applied, then Advance; a
//     one-phase commit's proposer (ProposeCommitted) is woken as soon as
//     its entry is durable, committed and certain to apply.
//
// A proposal is a Pebble batch representation built by the caller (the KV
// service computes MVCC effects on the leader while holding latches; see
// package mvcc); applying it is a deterministic merge into the apply batch,
// so every replica reaches the same state. Proposers may propose while the
// loop is fsyncing, so concurrent writers share fsyncs.
//
// Log truncation: the KV engine has no WAL of its own (the Raft log is
// its WAL), so once a replica's log passes a size threshold the store asks
// for a KV-engine flush, and when it completes deletes the log up to the
// applied index captured before the flush (single-voter regions; with
// followers the truncation point will be bounded by the slowest follower's
// match index and snapshots). The store also asks for a flush when the
// memtable is old while range scans run (memtableMaxAge), and truncates
// the logs after it the same way.
//
// Split: Split proposes an admin command through the region's own log, so
// every replica applies it at the same index. The command carries the
// split key, the epoch it was decided under and the new region's id and
// peer ids, allocated by PD before proposing. Applying it shrinks the
// region to [start, splitKey) and creates a region [splitKey, end), both at
// epoch version+1, with the same voters (new peer ids). The parent's new
// descriptor, the new region's descriptor and its applied index
// (raftInitIndex) go into the same apply batch as the parent's applied
// index; the new region's initial Raft state (HardState and truncated
// state at raftInitIndex, raftInitTerm, as if a snapshot had been applied)
// is written to the Raft engine just before, only if none exists, so a
// split replayed after a crash keeps the log the new region wrote since.
// Once the batch is committed the store creates the new replica, which
// campaigns at once if the parent was led from this store. Data does not
// move: both regions read and write the same engine.
//
// Every write carries the epoch version it was computed under and is
// applied only if the region still has it; a write proposed before a split
// and committed after it is refused on every replica alike
// (EpochNotMatch), never applied to a range the region no longer owns.
// EpochNotMatch names the region and the regions split off it, so a client
// can correct its cache without asking PD.
//
// Callers (package kvserver) must route a request to a peer with Peer,
// check it with Check (region epoch, key range, leadership), which returns
// the region it checked against, and then read the engine directly (the
// leader serves reads from applied state, clipped to that region's range)
// or Propose a write under that region's epoch and wait for it to be
// applied.
package raftstore
