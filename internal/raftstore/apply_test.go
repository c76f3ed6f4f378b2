package raftstore

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/strata-db/strata/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestPlanApplyDataDriven pins planApply, the pure decision of what
// committed entries do to a region, with testdata/apply scripts:
//
//	region id=<n> peers=<id@store[L],...> [start=<k>] [end=<k>] [version=<n>] [confver=<n>] [store=<local store>]
//	entries [exists=<id,...>]
//	<index> write [version=<n>]
//	<index> split key=<k> new=<id> peers=<id,...> [version=<n>] [confver=<n>]
//	<index> add-learner|promote|demote|remove peer=<id@store> [version=<n>] [confver=<n>]
//	<index> leave-joint [confver=<n>]
//	<index> prepare-merge target=<id>:<start>:<end>:<version> [version=<n>] [confver=<n>]
//	                     (the target's replicas are the region's peer ids + 100, same stores)
//	<index> commit-merge source=<id>:<start>:<end>:<version>:<confver> prepare=<index> [version=<n>] [confver=<n>]
//	                     (the source's replicas are the region's peer ids + 100)
//	<index> rollback-merge prepare=<index>
//	<index> empty
//	----
//	one line per entry's outcome, then the region after them
//
// Each entries command continues from the region the previous one left.
func TestPlanApplyDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/apply", testPlanApply)
}

func testPlanApply(t *testing.T, path string) {
	var region *kvpb.Region
	var merge *kvpb.MergeState
	store := uint64(1)
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "region":
			var id uint64
			d.ScanArgs(t, "id", &id)
			region = &kvpb.Region{Id: id, Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}}
			var start, end string
			d.MaybeScanArgs(t, "start", &start)
			d.MaybeScanArgs(t, "end", &end)
			region.StartKey, region.EndKey = []byte(start), []byte(end)
			d.MaybeScanArgs(t, "version", &region.Epoch.Version)
			d.MaybeScanArgs(t, "confver", &region.Epoch.ConfVer)
			d.MaybeScanArgs(t, "store", &store)
			for _, ps := range listArg(t, d, "peers") {
				region.Peers = append(region.Peers, parsePeer(t, ps))
			}
			return fmtRegion(region)
		case "entries":
			exists := map[uint64]bool{}
			if d.HasArg("exists") {
				for _, s := range listArg(t, d, "exists") {
					id, _ := strconv.ParseUint(s, 10, 64)
					exists[id] = true
				}
			}
			var ents []*pb.Entry
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				ents = append(ents, parseEntry(t, region, line))
			}
			plan, err := planApply(region, merge, store, ents, func(id uint64) bool { return exists[id] })
			if err != nil {
				return "error: " + err.Error()
			}
			var out []string
			for _, o := range plan.outcomes {
				out = append(out, fmtOutcome(o))
			}
			if plan.region != nil {
				region = plan.region
			}
			if plan.mergeSet {
				merge = plan.merge
			}
			out = append(out, fmt.Sprintf("applied %d; region %s", plan.applied, fmtRegion(region)))
			if merge != nil {
				out = append(out, fmt.Sprintf("merging into r%d, prepared at %d", merge.Target.GetId(), merge.PrepareIndex))
			}
			if plan.removed {
				out = append(out, "this store's replica was removed")
			}
			return strings.Join(out, "\n")
		}
		d.Fatalf(t, "unknown command %s", d.Cmd)
		return ""
	})
}

func fmtOutcome(o entryOutcome) string {
	switch {
	case o.err != nil:
		return fmt.Sprintf("%d: refused: %v", o.index, o.err)
	case o.repr != nil:
		return fmt.Sprintf("%d: write", o.index)
	case o.right != nil:
		s := fmt.Sprintf("%d: split -> %s + %s", o.index, fmtRegion(o.left), fmtRegion(o.right))
		if o.rightExists {
			s += " (already here: kept)"
		}
		return s
	case o.conf != nil:
		return fmt.Sprintf("%d: membership -> %s", o.index, fmtRegion(o.conf))
	case o.prepared != nil:
		return fmt.Sprintf("%d: prepare merge -> %s", o.index, fmtRegion(o.region))
	case o.commit != nil:
		return fmt.Sprintf("%d: commit merge of r%d -> %s", o.index, o.commit.source.Id, fmtRegion(o.region))
	case o.region != nil:
		return fmt.Sprintf("%d: rollback merge -> %s", o.index, fmtRegion(o.region))
	}
	return fmt.Sprintf("%d: ?", o.index)
}

// parseEntry builds a committed entry from a script line.
func parseEntry(t *testing.T, r *kvpb.Region, line string) *pb.Entry {
	f := strings.Fields(line)
	idx, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || len(f) < 2 {
		t.Fatalf("bad entry line %q", line)
	}
	args := map[string]string{}
	for _, a := range f[2:] {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	u := func(k string, def uint64) uint64 {
		if v, ok := args[k]; ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
		return def
	}
	version, confVer := u("version", r.Epoch.GetVersion()), u("confver", r.Epoch.GetConfVer())
	e := &pb.Entry{Index: proto.Uint64(idx), Term: proto.Uint64(6)}
	id := idx * 100
	switch f[1] {
	case "empty":
	case "write":
		// planApply passes a write's batch through without reading it.
		e.Data = encodeWrite(id, version, []byte("batch"))
	case "split":
		var peers []uint64
		for _, s := range strings.Split(args["peers"], ",") {
			n, _ := strconv.ParseUint(s, 10, 64)
			peers = append(peers, n)
		}
		e.Data = encodeSplit(id, &splitCmd{confVer: confVer, version: version, newRegionID: u("new", 0),
			newPeerIDs: peers, splitKey: []byte(args["key"])})
	case "add-learner", "promote", "demote", "remove", "leave-joint":
		kind := map[string]ChangeKind{"add-learner": AddLearner, "promote": PromoteLearner, "demote": DemoteVoter,
			"remove": RemovePeer, "leave-joint": LeaveJoint}[f[1]]
		c := PeerChange{Kind: kind}
		if kind != LeaveJoint {
			c.Peer = parsePeer(t, args["peer"])
		}
		cc, peers, err := buildConfChange([]PeerChange{c})
		if err != nil {
			t.Fatal(err)
		}
		cc.Context = encodeConfChangeContext(id, confVer, version, peers)
		data, _ := proto.Marshal(cc)
		e.Type = pb.EntryType_EntryConfChangeV2.Enum()
		e.Data = data
	case "prepare-merge", "commit-merge":
		key := map[string]string{"prepare-merge": "target", "commit-merge": "source"}[f[1]]
		p := strings.Split(args[key], ":")
		if len(p) < 4 {
			t.Fatalf("bad %s %q", key, args[key])
		}
		other := &kvpb.Region{StartKey: []byte(p[1]), EndKey: []byte(p[2]), Epoch: &kvpb.RegionEpoch{ConfVer: 1}}
		other.Id, _ = strconv.ParseUint(p[0], 10, 64)
		other.Epoch.Version, _ = strconv.ParseUint(p[3], 10, 64)
		if len(p) > 4 {
			other.Epoch.ConfVer, _ = strconv.ParseUint(p[4], 10, 64)
		}
		for _, rp := range r.Peers {
			other.Peers = append(other.Peers, &kvpb.Peer{Id: rp.Id + 100, StoreId: rp.StoreId, Role: rp.Role})
		}
		var err error
		if f[1] == "prepare-merge" {
			e.Data, err = encodePrepareMerge(id, &prepareMergeCmd{confVer: confVer, version: version, target: other})
		} else {
			e.Data, err = encodeCommitMerge(id, &commitMergeCmd{confVer: confVer, version: version,
				prepareIndex: u("prepare", 0), source: other, entries: []*pb.Entry{{Index: proto.Uint64(3), Term: proto.Uint64(6)}}})
		}
		if err != nil {
			t.Fatal(err)
		}
	case "rollback-merge":
		e.Data = encodeRollbackMerge(id, u("prepare", 0))
	default:
		t.Fatalf("unknown entry %q", f[1])
	}
	return e
}
