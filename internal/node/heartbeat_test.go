package node

import (
	"context"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/internal/sql/tablecodec"
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
