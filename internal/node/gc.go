package node

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/kvserver"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/kvpb"
)

// MVCC garbage collection, TiKV's way: every GCInterval the node that is
// PD's leader advances PD's GC safe point to the TSO's physical time minus
// GCLifeTime (no transaction may live longer: the client stops a
// transaction's heartbeats after its MaxTxnLifetime, 10 minutes by
// default). First the locks of transactions that started at or below the
// new safe point are resolved in every data region of the cluster (a lock
// must not outlive its primary's commit record), through the client, and
// only then is the safe point published. Every node then collects the
// data regions it leads at the safe point in force: kvserver.GC proposes
// each region's deletions in bounded chunks. The SQL engine destroys the ranges
// of dropped tables once the published safe point passes the drop
// (internal/sql/cleanup.go).

const (
	defaultGCInterval = time.Minute
	defaultGCLifeTime = 10 * time.Minute
	// gcChunk bounds the engine keys one GC proposal deletes.
	gcChunk = 4096
	// gcLockBatch is how many locks one lock scan hands to ResolveLocks.
	gcLockBatch = 1024
)

var (
	metricGCVersionsDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "gc", Name: "versions_deleted_total",
		Help: "MVCC write records deleted by garbage collection.",
	})
	metricGCSafePoint = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "strata", Subsystem: "gc", Name: "safe_point",
		Help: "The GC safe point of the last pass (a TSO timestamp): reads below it fail.",
	})
)

func init() {
	prometheus.MustRegister(metricGCVersionsDeleted, metricGCSafePoint)
}

// GCPass is what one pass of garbage collection did.
type GCPass struct {
	SafePoint uint64
	Regions   int // data regions collected
	kvserver.GCStats
	LiveLocks int // locks below the safe point of transactions still running
}

func (n *Node) gcLifeTime() time.Duration {
	if n.cfg.GCLifeTime > 0 {
		return n.cfg.GCLifeTime
	}
	return defaultGCLifeTime
}

// RunGC runs one pass of garbage collection, in TiDB's order. On PD's
// leader it takes the new safe point (TSO physical time minus the GC life
// time, never below the one in force), resolves the locks of transactions
// that started at or below it in every data region of the cluster, and
// only then publishes it to PD (persisted, never going back). Publishing
// after resolving makes PD's safe point a promise that no lock of a
// finished transaction at or below it remains; the SQL engine relies on
// it before it destroys a dropped table's range, which may hold the
// commit record such a lock would need. On every node it then collects
// the data regions the node leads at the published safe point.
func (n *Node) RunGC(ctx context.Context) (GCPass, error) {
	var pass GCPass
	if n.pd.IsLeader() {
		resp, err := n.pd.Tso(ctx, &kvpb.TsoRequest{Count: 1})
		if err != nil {
			return GCPass{}, err
		}
		if resp.Error != nil {
			return GCPass{}, fmt.Errorf("node: gc: tso: %s", resp.Error.Message)
		}
		now := mvcc.PhysicalMs(resp.Timestamp)
		life := uint64(n.gcLifeTime().Milliseconds())
		if now <= life {
			return GCPass{}, nil
		}
		current, err := n.pd.SafePoint(ctx)
		if err != nil {
			return pass, err
		}
		target := max(mvcc.ComposeTS(now-life, 0), current)
		live, err := n.resolveOldLocks(ctx, target)
		pass.LiveLocks += live
		if err != nil {
			return pass, fmt.Errorf("node: gc: resolve locks: %w", err)
		}
		if _, err := n.pd.UpdateGCSafePoint(ctx, target); err != nil {
			return pass, fmt.Errorf("node: gc: advance safe point: %w", err)
		}
	}
	sp, err := n.pd.SafePoint(ctx)
	if err != nil {
		return pass, fmt.Errorf("node: gc: read safe point: %w", err)
	}
	if sp == 0 {
		return pass, nil
	}
	pass.SafePoint = sp
	metricGCSafePoint.Set(float64(sp))
	for _, r := range n.ledDataRegions() {
		st, err := n.kv.GC(ctx, r.Id, sp, gcChunk)
		pass.Versions += st.Versions
		pass.Values += st.Values
		pass.Chunks += st.Chunks
		metricGCVersionsDeleted.Add(float64(st.Versions))
		if err != nil {
			return pass, err
		}
		pass.Regions++
	}
	return pass, nil
}

// ledDataRegions returns the data regions this node leads; the others are
// collected by their leaders.
func (n *Node) ledDataRegions() []*kvpb.Region {
	var out []*kvpb.Region
	for _, r := range n.store.Regions() {
		if r.Id == pd.SystemRegionID {
			continue
		}
		if p, ok := n.store.Peer(r.Id); ok && p.CheckRequest(nil) == nil {
			out = append(out, r)
		}
	}
	return out
}

// pdSafePoint gives the SQL engine PD's GC safe point
// (sql.SafePointSource), which RunGC publishes only after resolving the
// locks below it.
type pdSafePoint struct{ pd *pd.Server }

func (s pdSafePoint) GCSafePoint(ctx context.Context) (uint64, error) { return s.pd.SafePoint(ctx) }

// resolveOldLocks resolves the locks, in every data region of the
// cluster, of transactions that started at or below sp and returns how
// many belong to live transactions (which commit above sp, so they may
// stay).
func (n *Node) resolveOldLocks(ctx context.Context, sp uint64) (int, error) {
	live := 0
	var start []byte
	for {
		locks, err := n.client.ScanLocks(ctx, start, nil, sp, gcLockBatch)
		if err != nil || len(locks) == 0 {
			return live, err
		}
		l, err := n.client.ResolveLocks(ctx, locks)
		live += l
		if err != nil {
			return live, err
		}
		if len(locks) < gcLockBatch {
			return live, nil
		}
		start = append(append([]byte(nil), locks[len(locks)-1].Key...), 0)
	}
}

// gcLoop runs RunGC every GC interval until the node closes.
func (n *Node) gcLoop(interval time.Duration) {
	defer n.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		began := time.Now()
		pass, err := n.RunGC(ctx)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("gc pass failed", "err", err, "safe_point", pass.SafePoint)
			}
			continue
		}
		n.log.Debug("gc pass", "safe_point", pass.SafePoint, "regions", pass.Regions,
			"versions_deleted", pass.Versions, "values_deleted", pass.Values, "chunks", pass.Chunks,
			"live_locks", pass.LiveLocks, "took", time.Since(began))
	}
}
