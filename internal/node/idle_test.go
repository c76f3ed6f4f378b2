package node

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/kvpb"
)

// A GC pass on an idle cluster leaves sleeping regions asleep: its lock
// scan asks every region, and a sleeping leader answers from its applied
// state instead of waking for a ReadIndex round. The abandoned lock of a
// transaction below the safe point, in a region that sleeps, is still
// found and resolved.
func TestGCLockScanLeavesSleepingRegionsAsleep(t *testing.T) {
	ctx := context.Background()
	start := func(join []string) *Node {
		n, err := Start(ctx, Config{DataDir: t.TempDir(), InMemory: true, GCInterval: -1, GCLifeTime: time.Millisecond,
			HibernateRegions: true, GRPCAddr: freeLoopback(t), Join: join, Replicas: 3,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	a := start(nil)
	nodes := []*Node{a, start([]string{a.cfg.GRPCAddr}), start([]string{a.cfg.GRPCAddr})}
	s := a.SQL().NewSession("root", "localhost")
	sqlExec(t, s, "CREATE DATABASE d", "CREATE TABLE d.t (id BIGINT PRIMARY KEY, v INT)")
	if got := sqlRows(t, s, "SPLIT TABLE d.t BETWEEN (0) AND (800) REGIONS 8"); got != "8 1" {
		t.Fatalf("SPLIT TABLE: %s", got)
	}
	tid := tableID(t, a, "d", "t")

	// leaderOf finds the replica that leads the region holding key.
	leaderOf := func(key []byte) (*Node, *raftstore.Peer) {
		for _, n := range nodes {
			for _, p := range n.store.Peers() {
				if p.RegionID() != pd.SystemRegionID && p.IsLeaderReady() && p.CheckKey(key) == nil {
					return n, p
				}
			}
		}
		return nil, nil
	}
	// The table's regions, each with three voters and a leader.
	keys := make([][]byte, 8)
	for i := range keys {
		keys[i] = tablecodec.RecordKey(tid, int64(i*100+50))
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ready := 0
		for _, k := range keys {
			if _, p := leaderOf(k); p != nil && len(p.Region().Peers) == 3 {
				ready++
			}
		}
		if ready == len(keys) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d regions have a leader and three replicas", ready, len(keys))
		}
	}

	// An abandoned transaction's lock (its TTL long past) in the fourth
	// region.
	locked := keys[3]
	ln, lp := leaderOf(locked)
	ts, err := a.pd.Tso(ctx, &kvpb.TsoRequest{Count: 1})
	if err != nil || ts.Error != nil {
		t.Fatal(err, ts.GetError())
	}
	pw, err := ln.kv.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: &kvpb.Context{RegionId: lp.RegionID()},
		StartVersion: ts.Timestamp, PrimaryLock: locked, LockTtl: 1,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: locked, Value: []byte("x")}}})
	if err != nil || pw.RegionError != nil || len(pw.Errors) > 0 {
		t.Fatalf("prewrite: %v %+v", err, pw)
	}

	// Every region of the table asleep on its leader.
	asleep := func() int {
		n := 0
		for _, k := range keys {
			if _, p := leaderOf(k); p != nil && p.Asleep() {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(60 * time.Second); asleep() < len(keys); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d regions asleep after 60 s", asleep(), len(keys))
		}

	}

	var gcNode *Node
	for _, n := range nodes {
		if n.pd.IsLeader() {
			gcNode = n
		}
	}
	if gcNode == nil {
		t.Fatal("no PD leader")
	}
	pass, err := gcNode.RunGC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The lock's region woke to resolve it; the other seven slept on.
	if got := asleep(); got < len(keys)-1 {
		t.Fatalf("%d of %d regions asleep after a GC pass (%+v): its lock scan woke them", got, len(keys), pass)
	}
	locks, err := a.Storage().ScanLocks(ctx, tablecodec.TablePrefix(tid), tablecodec.PrefixEnd(tablecodec.TablePrefix(tid)), pass.SafePoint, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 0 {
		t.Fatalf("the abandoned lock below safe point %d was not resolved: %v", pass.SafePoint, locks)
	}
}
