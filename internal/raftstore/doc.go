// Package raftstore runs the Raft replicas (peers) of the regions a store
// holds, on top of the store's two Pebble engines, and moves them between
// stores.
//
// Every region is an etcd raft RawNode group, replicated on the stores its
// descriptor lists (kvpb.Region.Peers, with their roles). One goroutine,
// the store loop, drives all the replicas of a store: it drains their
// Ready, persists everything in one Raft-engine batch with one fsync
// (group commit), sends the messages (a leader's before its own fsync,
// every other only after: etcd raft's "persist before you send"), and
// applies committed entries of all replicas in one KV-engine batch that
// also carries each replica's applied index, so applied data and applied
// index move together.
//
// The files, one job each:
//
//	store.go      the set of replicas: open from disk, create, look up, close
//	peer.go       one replica: its state and the request checks (Check)
//	propose.go    what callers put in a region's log: writes, splits,
//	              membership changes; leadership transfer
//	loop.go       the store loop: Ready, persist, send, apply, Advance
//	apply.go      what committed entries do: a pure plan (planApply),
//	              then one batch for the round and the in-memory changes
//	command.go    the encoding of log commands; splits
//	merge.go      region merge: PrepareMerge, CommitMerge (with the
//	              source's catch-up), RollbackMerge, the merge driver
//	conf.go       membership changes: roles, joint consensus, ConfState
//	read.go       reads on the leader: lease, ReadIndex
//	storage.go    raft.Storage of a replica: log, HardState, entry cache
//	snapshot.go   snapshots as SST files: generate, receive, ingest;
//	              destroying a removed replica
//	truncate.go   log truncation after KV-engine flushes
//	transport.go  messages between stores: envelopes out, Receive in,
//	              replicas created by a leader's message
//	observer.go   what the layer above learns from the apply path
//
// A proposal is a Pebble batch representation built by the caller (the KV
// service computes MVCC effects on the leader while holding latches; see
// package mvcc); applying it is a deterministic merge into the apply batch,
// so every replica reaches the same state. Proposers may propose while the
// loop is fsyncing, so concurrent writers share fsyncs.
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
// the region it checked against; a read then waits for ReadReady (the
// leader's lease, or a ReadIndex round) and reads the engine directly
// (the leader serves reads from applied state, clipped to that region's
// range); a write is proposed under that region's epoch and its caller
// waits for it to be applied.
//
// The layer above learns what the apply path does through an Observer
// (the store's mvcc.LockSet in a node), and the network is a Transport
// (gRPC between nodes, an in-memory network in tests).
package raftstore
