package node

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/strata-db/strata/kvpb"
)

// TestRegionReportsDataDriven pins which regions a store heartbeat
// carries (report.go), in testdata/reports/*:
//
//	heartbeat at=<seconds> [fail]
//	<region id> [leader=<peer>] [term=n] [commit=n] [applied=n] [conf=n] [ver=n]
//	            [peers=<id@store,...>] [progress=<peer:match[:idle],...>]
//	            [size=n] [keys=n] [read=<bytes>] [write=<bytes>] [same]
//	                         one heartbeat of a store that leads these regions
//	                         (a line a region; unset fields are 1, no
//	                         traffic; same: the very report last sent, as a
//	                         sleeping leader's is reused): prints the regions
//	                         it reports and why, and whether that is all of
//	                         them; fail: PD did not answer
//	report-all               PD asked for every region
func TestRegionReportsDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/reports", func(t *testing.T, path string) {
		rr := &regionReports{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "report-all":
				rr.reportAll()
				return ""
			case "heartbeat":
				var at int
				d.ScanArgs(t, "at", &at)
				now := time.Unix(1_700_000_000, 0).Add(time.Duration(at) * time.Second)
				var led []*kvpb.RegionStat
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					if line = strings.TrimSpace(line); line != "" {
						led = append(led, parseStat(t, d, rr, line))
					}
				}
				reasons := map[uint64]string{}
				for _, s := range led {
					prev, ok := rr.last[s.Region.Id]
					reasons[s.Region.Id] = reportReason(prev, ok, s, now)
				}
				sent, complete := rr.pick(led, now)
				var b strings.Builder
				if len(sent) == 0 {
					b.WriteString("nothing")
				}
				for i, s := range sent {
					if i > 0 {
						b.WriteString(", ")
					}
					r := reasons[s.Region.Id]
					if rr.all || rr.last == nil {
						r = "all"
					}
					fmt.Fprintf(&b, "%d (%s)", s.Region.Id, r)
				}
				if complete {
					b.WriteString("; complete")
				}
				if d.HasArg("fail") {
					b.WriteString("; failed")
				} else {
					rr.sent(sent, led, now)
				}
				return b.String() + "\n"
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

func parseStat(t *testing.T, d *datadriven.TestData, rr *regionReports, line string) *kvpb.RegionStat {
	f := strings.Fields(line)
	id, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		d.Fatalf(t, "bad region %q", line)
	}
	num := func(v string) uint64 {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			d.Fatalf(t, "bad number %q in %q", v, line)
		}
		return n
	}
	r := &kvpb.Region{Id: id, StartKey: []byte{byte(id)}, EndKey: []byte{byte(id + 1)},
		Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1},
		Peers: []*kvpb.Peer{{Id: 1, StoreId: 1}, {Id: 2, StoreId: 2}, {Id: 3, StoreId: 3}}}
	s := &kvpb.RegionStat{Region: r, Leader: r.Peers[0], Term: 1, CommitIndex: 1, AppliedIndex: 1,
		ApproximateSize: 1, ApproximateKeys: 1}
	progress, leader := "1:1,2:1,3:1", uint64(1)
	for _, a := range f[1:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "same":
			prev, ok := rr.last[id]
			if !ok {
				d.Fatalf(t, "region %d: nothing sent to reuse", id)
			}
			return prev.stat
		case "term":
			s.Term = num(v)
		case "commit":
			s.CommitIndex = num(v)
		case "applied":
			s.AppliedIndex = num(v)
		case "conf":
			r.Epoch.ConfVer = num(v)
		case "ver":
			r.Epoch.Version = num(v)
		case "size":
			s.ApproximateSize = num(v)
		case "keys":
			s.ApproximateKeys = num(v)
		case "read":
			s.ReadBytes, s.ReadQueries, s.IntervalMs = num(v), 1, 1000
		case "write":
			s.WrittenBytes, s.WriteQueries, s.IntervalMs = num(v), 1, 1000
		case "progress":
			progress = v
		case "peers":
			r.Peers = nil
			for _, ps := range strings.Split(v, ",") {
				a, b, _ := strings.Cut(ps, "@")
				r.Peers = append(r.Peers, &kvpb.Peer{Id: num(a), StoreId: num(b)})
			}
		case "leader":
			leader = num(v)
		default:
			d.Fatalf(t, "unknown field %q", a)
		}
	}
	s.Leader = nil
	for _, p := range r.Peers {
		if p.Id == leader {
			s.Leader = p
		}
	}
	for _, ps := range strings.Split(progress, ",") {
		parts := strings.Split(ps, ":")
		pr := &kvpb.PeerProgress{PeerId: num(parts[0]), Match: num(parts[1]), Active: true}
		if len(parts) > 2 && parts[2] == "idle" {
			pr.Active = false
		}
		s.Progress = append(s.Progress, pr)
	}
	return s
}
