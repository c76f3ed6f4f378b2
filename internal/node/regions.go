package node

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/kvpb"
)

// regionAdmin is the node's sql.RegionAdmin: SPLIT TABLE and SHOW TABLE
// REGIONS. A split is carried out by the region's leader: this node when
// it leads the region, otherwise the leader's store through the stores'
// gRPC service (transport.SplitAt, authenticated as Raft traffic is).
type regionAdmin struct{ n *Node }

var _ sql.RegionAdmin = regionAdmin{}

func (a regionAdmin) SplitAt(ctx context.Context, keys [][]byte) (int, error) {
	sorted := append([][]byte(nil), keys...)
	sort.Slice(sorted, func(i, j int) bool { return bytes.Compare(sorted[i], sorted[j]) < 0 })
	done := 0
	for i, k := range sorted {
		if len(k) == 0 || (i > 0 && bytes.Equal(k, sorted[i-1])) {
			continue
		}
		ok, err := a.splitOne(ctx, k)
		if err != nil {
			return done, err
		}
		if ok {
			done++
		}
	}
	return done, nil
}

// splitTries bounds the tries of one SPLIT TABLE key: a region a split just made
// has no ready leader until its election and its first entry (a few
// hundred milliseconds on a busy machine), and a leader may move.
const splitTries = 20

// splitOne splits the region holding key at key; false when key starts
// a region already.
func (a regionAdmin) splitOne(ctx context.Context, key []byte) (bool, error) {
	n := a.n
	const last = splitTries - 1
	for attempt := 0; attempt < splitTries; attempt++ {
		if attempt > 0 {
			// The leader moved, is still being elected, or the split
			// raced another: ask PD again.
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		resp, err := n.pd.GetRegion(ctx, &kvpb.GetRegionRequest{Key: key})
		if err != nil {
			return false, err
		}
		if resp.Error != nil {
			return false, fmt.Errorf("%s", resp.Error.Message)
		}
		if bytes.Equal(resp.Region.StartKey, key) {
			return false, nil
		}
		leader := resp.Leader.GetStoreId()
		if leader == n.storeID || leader == 0 {
			_, _, err := n.SplitRegion(ctx, key)
			if err == nil {
				return true, nil
			}
			if attempt == last {
				return false, err
			}
			continue
		}
		resp2, err := n.transport.SplitAt(ctx, leader, key)
		switch {
		case err != nil:
			if attempt == last {
				return false, fmt.Errorf("node %d (leader of region %d): %v", leader, resp.Region.Id, err)
			}
		case resp2.AlreadyBoundary:
			return false, nil
		case resp2.Error == "":
			return true, nil
		case !resp2.NotLeader && attempt == last:
			return false, fmt.Errorf("node %d: %s", leader, resp2.Error)
		}
	}
	return false, fmt.Errorf("the leader of the region holding the split key kept moving; try again")
}

func (a regionAdmin) Regions(ctx context.Context, start, end []byte) ([]sql.RegionRow, error) {
	resp, err := a.n.pd.ClusterStatus(ctx, &kvpb.ClusterStatusRequest{})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("%s", resp.Error.Message)
	}
	var out []sql.RegionRow
	for _, r := range resp.Regions {
		reg := r.Region
		if reg.Id == pd.SystemRegionID {
			continue
		}
		if (len(reg.EndKey) > 0 && bytes.Compare(reg.EndKey, start) <= 0) || (len(end) > 0 && bytes.Compare(reg.StartKey, end) >= 0) {
			continue
		}
		row := sql.RegionRow{ID: reg.Id, StartKey: reg.StartKey, EndKey: reg.EndKey, LeaderID: r.Leader.GetId(),
			LeaderStore: r.Leader.GetStoreId(), WrittenBytes: r.WrittenBytes, ReadBytes: r.ReadBytes,
			ApproximateSize: r.ApproximateSize, ApproximateKeys: r.ApproximateKeys}
		for _, p := range reg.Peers {
			row.Peers = append(row.Peers, p.Id)
		}
		if r.UnderReplicated {
			row.SchedulingState = "under-replicated"
		}
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].StartKey, out[j].StartKey) < 0 })
	return out, nil
}
