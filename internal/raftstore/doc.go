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
//  5. wake the proposers whose entries were applied, then Advance.
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
// match index and snapshots).
//
// Callers (package kvserver) must route a request to a peer with Peer,
// check it with CheckRequest (region epoch, key range, leadership) and then
// read the engine directly (the leader serves reads from applied state) or
// Propose a write and wait for it to be applied.
package raftstore
