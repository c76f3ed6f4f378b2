package pd

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/strata-db/strata/kvpb"
)

// TestSchedulerDataDriven pins scheduleRegion's decisions:
//
//	stores <id>[:down][:r<replicas>] ...       the cluster's stores
//	replicas n=<count>                         the replication factor
//	region peers=<id@store[L|+|-],...> [commit=<i>] [match=<id:index,...>]
//	                                           a leader's report; prints the operator
func TestSchedulerDataDriven(t *testing.T) {
	datadriven.RunTest(t, "testdata/scheduler", func(t *testing.T, d *datadriven.TestData) string {
		return schedulerCmd(t, d)
	})
}

var schedView clusterView

func schedulerCmd(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "stores":
		schedView.stores = map[uint64]storeView{}
		for _, a := range d.CmdArgs {
			parts := strings.Split(a.Key, ":")
			id, err := strconv.ParseUint(parts[0], 10, 64)
			if err != nil {
				d.Fatalf(t, "store %q", a.Key)
			}
			sv := storeView{up: true}
			for _, p := range parts[1:] {
				switch {
				case p == "down":
					sv.up = false
				case strings.HasPrefix(p, "r"):
					sv.replicas, _ = strconv.Atoi(strings.TrimPrefix(p, "r"))
				}
			}
			schedView.stores[id] = sv
		}
		return ""
	case "replicas":
		d.ScanArgs(t, "n", &schedView.replicas)
		return ""
	case "region":
		var peers, match string
		var commit uint64
		d.ScanArgs(t, "peers", &peers)
		d.MaybeScanArgs(t, "commit", &commit)
		d.MaybeScanArgs(t, "match", &match)
		r := &kvpb.RegionStat{Region: &kvpb.Region{Id: 2, Epoch: &kvpb.RegionEpoch{ConfVer: 4, Version: 1}}, CommitIndex: commit}
		for _, ps := range strings.Split(peers, ",") {
			role := kvpb.PeerRole_Voter
			switch {
			case strings.HasSuffix(ps, "L"):
				role = kvpb.PeerRole_Learner
			case strings.HasSuffix(ps, "+"):
				role = kvpb.PeerRole_IncomingVoter
			case strings.HasSuffix(ps, "-"):
				role = kvpb.PeerRole_DemotingVoter
			}
			ps = strings.TrimRight(ps, "L+-")
			a, b, _ := strings.Cut(ps, "@")
			id, _ := strconv.ParseUint(a, 10, 64)
			st, _ := strconv.ParseUint(b, 10, 64)
			r.Region.Peers = append(r.Region.Peers, &kvpb.Peer{Id: id, StoreId: st, Role: role})
		}
		if match != "" {
			for _, m := range strings.Split(match, ",") {
				a, b, _ := strings.Cut(m, ":")
				id, _ := strconv.ParseUint(a, 10, 64)
				idx, _ := strconv.ParseUint(b, 10, 64)
				r.Progress = append(r.Progress, &kvpb.PeerProgress{PeerId: id, Match: idx, Active: true})
			}
		}
		op := scheduleRegion(schedView, r)
		if op == nil {
			return "none"
		}
		if op.Peer == nil {
			return fmt.Sprintf("%s (%s)", op.Kind, op.Reason)
		}
		return fmt.Sprintf("%s peer=%d store=%d (%s)", op.Kind, op.Peer.Id, op.Peer.StoreId, op.Reason)
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}
