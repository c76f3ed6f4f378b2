package node

import (
	"context"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/kvpb"
)

// TestSleepingRegionReportReused: a region whose leader hibernates is
// reported with the same RegionStat each heartbeat while nothing reaches
// it (no Status, no encoding of a new one), and afresh, with its traffic,
// once a read does.
func TestSleepingRegionReportReused(t *testing.T) {
	n, base := startSplitNode(t, Config{InMemory: true, HibernateRegions: true, SplitTable: true, SplitCheckInterval: 100 * time.Millisecond})
	putRows(t, n, 300, 0, 10, []byte("v"))
	putRows(t, n, 301, 0, 10, []byte("v"))
	waitRegions(t, base, 3, 10*time.Second) // table 300 in a region of its own
	var p *raftstore.Peer
	deadline := time.Now().Add(30 * time.Second)
	for p == nil {
		for _, q := range n.store.Peers() {
			r := q.Region()
			if r.Id != pd.SystemRegionID && q.IsLeaderReady() && q.Asleep() &&
				string(r.StartKey) == string(tablecodec.TablePrefix(300)) {
				p = q
			}
		}
		if p == nil {
			if time.Now().After(deadline) {
				t.Fatal("no data region hibernated in 30 s")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	n.regionStat(p) // the report the next ones reuse
	first := n.regionStat(p)
	second := n.regionStat(p)
	if first != second {
		t.Fatalf("a sleeping region without traffic was reported afresh")
	}
	if first.ReadQueries != 0 || first.IntervalMs != 0 || first.Leader == nil || first.Term == 0 {
		t.Fatalf("reused report: %v", first)
	}
	ctx := context.Background()
	txn, err := n.Storage().Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Get(ctx, tablecodec.RecordKey(300, 1)); err != nil {
		t.Fatal(err)
	}
	_ = txn.Rollback(ctx)
	third := n.regionStat(p)
	if third == first || third.ReadQueries == 0 {
		t.Fatalf("a read of the sleeping region was not reported: %v", third)
	}
}

// TestIdleHeartbeatReportsNothing: once regions nobody uses sleep and
// their reports went out, the node's heartbeats carry none of them, and PD
// still lists them with their leaders and sizes; a read makes the region's
// next report go out.
func TestIdleHeartbeatReportsNothing(t *testing.T) {
	n, base := startSplitNode(t, Config{InMemory: true, HibernateRegions: true, SplitTable: true, SplitCheckInterval: 100 * time.Millisecond})
	putRows(t, n, 300, 0, 10, []byte("v"))
	putRows(t, n, 301, 0, 10, []byte("v"))
	waitRegions(t, base, 3, 10*time.Second)
	ctx := context.Background()
	// The tables' regions: nothing reads them (the first data region
	// holds the schema and users, which every node polls: it has traffic).
	quiet := func(r *kvpb.Region) bool {
		k := string(r.StartKey)
		return k == string(tablecodec.TablePrefix(300)) || k == string(tablecodec.TablePrefix(301))
	}
	// pending returns the quiet regions the next heartbeat would report.
	pending := func() []uint64 {
		var led []*kvpb.RegionStat
		for _, p := range n.store.Peers() {
			if p.Initialized() && p.IsLeaderReady() {
				led = append(led, n.regionStat(p))
			}
		}
		sent, _ := n.reports.pick(led, time.Now())
		var ids []uint64
		for _, s := range sent {
			if quiet(s.Region) {
				ids = append(ids, s.Region.Id)
			}
		}
		return ids
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		asleep := 0
		for _, p := range n.store.Peers() {
			if quiet(p.Region()) && p.Asleep() {
				asleep++
			}
		}
		n.heartbeat(ctx)
		if asleep == 2 && len(pending()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d data regions asleep; the next heartbeat would still report %v", asleep, pending())
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, err := n.pd.ClusterStatus(ctx, &kvpb.ClusterStatusRequest{})
	if err != nil || st.Error != nil {
		t.Fatal(err, st.GetError())
	}
	listed := 0
	for _, r := range st.Regions {
		if quiet(r.Region) {
			listed++
			if r.Leader == nil || len(r.Progress) == 0 || r.ApproximateKeys == 0 {
				t.Fatalf("region %d in PD's status: %v", r.Region.Id, r)
			}
		}
	}
	if listed != 2 {
		t.Fatalf("PD lists %d of the 2 quiet regions", listed)
	}
	txn, err := n.Storage().Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Get(ctx, tablecodec.RecordKey(300, 1)); err != nil {
		t.Fatal(err)
	}
	_ = txn.Rollback(ctx)
	if ids := pending(); len(ids) != 1 {
		t.Fatalf("after a read of one region the heartbeat would report %v", ids)
	}
}
