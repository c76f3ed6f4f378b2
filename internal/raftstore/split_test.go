package raftstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// splitHarness drives a real store (two engines on a crashable in-memory
// filesystem) from testdata/split scripts.
//
//	open                                    bootstrap regions 1 and 2 (both over every key) and start
//	regions                                 the local regions, in key order
//	put region=<id> key=<k> [value=<v>] [version=<n>]
//	                                        propose a write under epoch version n (default: current)
//	get key=<k>                             read the engine
//	split region=<id> key=<k> new=<id> peers=<id,...> [version=<n>] [confver=<n>]
//	check region=<id> [version=<n>] [key=<k>]
//	                                        a request check (epoch, leadership, key range)
//	race region=<id> key=<k> new=<id> peers=<id,...> put=<k> order=split-first|write-first
//	                                        propose a split and a write under the current epoch back to back
//	raft-state region=<id>                  the replica's persisted Raft and apply state
//	restart                                 flush the KV engine, close, reopen
//	crash                                   lose everything not synced, reopen
//
// restart and crash print the region descriptors the KV engine held before
// the logs were replayed, then the regions after.
type splitHarness struct {
	t   *testing.T
	fs  *vfs.MemFS
	eng engine.Engines
	s   *Store
	// onDisk lists the region descriptors the KV engine held when the
	// store was last opened, before any log was replayed.
	onDisk string
}

func (h *splitHarness) persistedRegions(eng engine.Engines) string {
	it, err := eng.KV.NewIter(&pebble.IterOptions{LowerBound: engine.RegionStatePrefix(),
		UpperBound: []byte{engine.RegionStatePrefix()[0], engine.RegionStatePrefix()[1] + 1}})
	if err != nil {
		h.t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for it.First(); it.Valid(); it.Next() {
		r := &kvpb.Region{}
		if err := proto.Unmarshal(it.Value(), r); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("r%d v%d", r.Id, r.Epoch.GetVersion()))
	}
	return strings.Join(out, ", ")
}

func (h *splitHarness) open(bootstrap bool) {
	eng, err := engine.OpenEngines("/data", engine.Options{FS: h.fs})
	if err != nil {
		h.t.Fatal(err)
	}
	if bootstrap {
		for _, id := range []uint64{1, 2} {
			if err := BootstrapRegion(eng, testRegion(id)); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	h.onDisk = h.persistedRegions(eng)
	s, err := Open(eng, Config{StoreID: 1})
	if err != nil {
		h.t.Fatal(err)
	}
	h.eng, h.s = eng, s
	// Once every loaded region has applied an entry of its new term, the
	// log before it (splits included) has been replayed.
	for _, r := range s.Regions() {
		waitLeader(h.t, s, r.Id)
	}
	for _, r := range s.Regions() {
		waitLeader(h.t, s, r.Id)
	}
}

func (h *splitHarness) close() {
	if h.s != nil {
		h.s.Close()
		h.eng.Close()
		h.s = nil
	}
}

func (h *splitHarness) peer(d *datadriven.TestData) *Peer {
	var id uint64
	d.ScanArgs(h.t, "region", &id)
	p, ok := h.s.Peer(id)
	if !ok {
		d.Fatalf(h.t, "no region %d", id)
	}
	return p
}

func (h *splitHarness) epochArg(d *datadriven.TestData, p *Peer) *kvpb.RegionEpoch {
	e := proto.Clone(p.Region().Epoch).(*kvpb.RegionEpoch)
	if d.HasArg("version") {
		d.ScanArgs(h.t, "version", &e.Version)
	}
	if d.HasArg("confver") {
		d.ScanArgs(h.t, "confver", &e.ConfVer)
	}
	return e
}

func (h *splitHarness) splitArgs(d *datadriven.TestData) (key string, newID uint64, peers []uint64) {
	d.ScanArgs(h.t, "key", &key)
	d.ScanArgs(h.t, "new", &newID)
	var ps []string
	d.ScanArgs(h.t, "peers", &ps)
	for _, s := range ps {
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			d.Fatalf(h.t, "peers: %v", err)
		}
		peers = append(peers, id)
	}
	return key, newID, peers
}

func (h *splitHarness) writeBatch(key, value string) []byte {
	b := h.s.Engine().NewBatch()
	defer b.Close()
	_ = b.Set([]byte(key), []byte(value), nil)
	return append([]byte(nil), b.Repr()...)
}

func fmtRegion(r *kvpb.Region) string {
	var peers []string
	for _, p := range r.Peers {
		peers = append(peers, fmt.Sprintf("%d@%d%s", p.Id, p.StoreId, roleMark[p.Role]))
	}
	return fmt.Sprintf("r%d [%q, %q) v%d c%d peers=%s", r.Id, r.StartKey, r.EndKey,
		r.Epoch.GetVersion(), r.Epoch.GetConfVer(), strings.Join(peers, ","))
}

// roleMark marks a peer's role in fmtRegion: nothing for a voter, L for
// a learner, + and - for a voter coming in or going out of a joint
// configuration.
var roleMark = map[kvpb.PeerRole]string{kvpb.PeerRole_Learner: "L", kvpb.PeerRole_IncomingVoter: "+", kvpb.PeerRole_DemotingVoter: "-"}

func fmtRegionError(e *kvpb.RegionError) string {
	switch {
	case e.EpochNotMatch != nil:
		var rs []string
		for _, r := range e.EpochNotMatch.CurrentRegions {
			rs = append(rs, fmtRegion(r))
		}
		return "EpochNotMatch; current:\n  " + strings.Join(rs, "\n  ")
	case e.KeyNotInRegion != nil:
		k := e.KeyNotInRegion
		return fmt.Sprintf("KeyNotInRegion %q: region %d is [%q, %q)", k.Key, k.RegionId, k.StartKey, k.EndKey)
	case e.NotLeader != nil:
		return fmt.Sprintf("NotLeader region %d", e.NotLeader.RegionId)
	}
	return "region error: " + e.Message
}

func fmtErr(err error) string {
	var re *RegionErr
	if errors.As(err, &re) {
		return "error: " + fmtRegionError(re.E)
	}
	return "error: " + err.Error()
}

func (h *splitHarness) cmd(d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "open":
		h.open(true)
		return h.regions()
	case "regions":
		return h.regions()
	case "put":
		p := h.peer(d)
		var key, value string
		d.ScanArgs(h.t, "key", &key)
		value = "v"
		d.MaybeScanArgs(h.t, "value", &value)
		b := h.s.Engine().NewBatch()
		defer b.Close()
		_ = b.Set([]byte(key), []byte(value), nil)
		if err := h.s.Propose(ctx, p, h.epochArg(d, p), b); err != nil {
			return fmtErr(err)
		}
		return "ok"
	case "get":
		var key string
		d.ScanArgs(h.t, "key", &key)
		v, ok, err := engine.GetCopy(h.eng.KV, []byte(key))
		if err != nil {
			return "error: " + err.Error()
		}
		if !ok {
			return "<none>"
		}
		return string(v)
	case "split":
		p := h.peer(d)
		key, newID, peers := h.splitArgs(d)
		left, right, err := h.s.Split(ctx, p, h.epochArg(d, p), []byte(key), newID, peers)
		if err != nil {
			return fmtErr(err)
		}
		waitLeader(h.t, h.s, right.Id)
		return "left:  " + fmtRegion(left) + "\nright: " + fmtRegion(right)
	case "check":
		p := h.peer(d)
		rctx := &kvpb.Context{RegionId: p.Region().Id}
		if d.HasArg("version") || d.HasArg("confver") {
			rctx.RegionEpoch = h.epochArg(d, p)
		}
		var keys [][]byte
		if d.HasArg("key") {
			var key string
			d.ScanArgs(h.t, "key", &key)
			keys = append(keys, []byte(key))
		}
		r, rerr := p.Check(rctx, keys...)
		if rerr != nil {
			return "error: " + fmtRegionError(rerr)
		}
		return "ok: " + fmtRegion(r)
	case "race":
		return h.race(d)
	case "raft-state":
		p := h.peer(d)
		id := p.Region().Id
		hs := &pb.HardState{}
		v, ok, err := engine.GetCopy(h.eng.Raft, engine.HardStateKey(id))
		if err != nil || !ok {
			return fmt.Sprintf("no hard state: %v", err)
		}
		if err := proto.Unmarshal(v, hs); err != nil {
			return err.Error()
		}
		v, _, _ = engine.GetCopy(h.eng.Raft, engine.TruncatedStateKey(id))
		ti, tt, err := engine.DecodeTruncatedState(v)
		if err != nil {
			return err.Error()
		}
		v, _, _ = engine.GetCopy(h.eng.KV, engine.ApplyStateKey(id))
		applied, err := engine.DecodeAppliedIndex(v)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("hard state: term=%d commit=%d\ntruncated: index=%d term=%d\napplied: %d",
			hs.GetTerm(), hs.GetCommit(), ti, tt, applied)
	case "restart":
		// A clean shutdown, as the node does it: the KV engine is flushed,
		// so regions load from their persisted descriptors.
		if err := h.eng.KV.Flush(); err != nil {
			d.Fatalf(h.t, "flush: %v", err)
		}
		h.close()
		h.open(false)
		return "on disk: " + h.onDisk + "\nafter replay:\n" + h.regions()
	case "crash":
		h.fs = h.fs.CrashClone(vfs.CrashCloneCfg{})
		h.close()
		h.open(false)
		return "on disk: " + h.onDisk + "\nafter replay:\n" + h.regions()
	}
	d.Fatalf(h.t, "unknown command %s", d.Cmd)
	return ""
}

// race proposes a split and a write computed under the region's current
// epoch, in the order given, without the propose-time epoch check: the
// entries land in the log in that order, and the write must be refused at
// apply exactly when the split precedes it.
func (h *splitHarness) race(d *datadriven.TestData) string {
	p := h.peer(d)
	key, newID, peers := h.splitArgs(d)
	var putKey, order string
	d.ScanArgs(h.t, "put", &putKey)
	d.ScanArgs(h.t, "order", &order)
	r := p.Region()
	splitID, writeID := h.s.nextProp.Add(1), h.s.nextProp.Add(1)
	split := encodeSplit(splitID, &splitCmd{confVer: r.Epoch.GetConfVer(), version: r.Epoch.GetVersion(),
		newRegionID: newID, newPeerIDs: peers, splitKey: []byte(key)})
	write := encodeWrite(writeID, r.Epoch.GetVersion(), h.writeBatch(putKey, "raced"))
	type step struct {
		name, data string
		id         uint64
	}
	steps := []step{{"split", string(split), splitID}, {"write", string(write), writeID}}
	if order == "write-first" {
		steps[0], steps[1] = steps[1], steps[0]
	}
	// Hold the replica so both entries are appended before the store loop
	// looks at either.
	p.mu.Lock()
	props := make([]*proposal, len(steps))
	for i, st := range steps {
		props[i] = &proposal{done: make(chan error, 1)}
		p.proposals[st.id] = props[i]
		if err := p.rn.Propose([]byte(st.data)); err != nil {
			p.mu.Unlock()
			d.Fatalf(h.t, "propose %s: %v", st.name, err)
		}
	}
	p.mu.Unlock()
	h.s.wake()
	var out []string
	for i, st := range steps {
		res := "ok"
		if err := h.s.wait(context.Background(), props[i]); err != nil {
			res = fmtErr(err)
		}
		out = append(out, st.name+": "+res)
	}
	waitLeader(h.t, h.s, newID)
	return strings.Join(out, "\n")
}

func (h *splitHarness) regions() string {
	rs := h.s.Regions()
	sort.SliceStable(rs, func(i, j int) bool {
		if string(rs[i].StartKey) != string(rs[j].StartKey) {
			return string(rs[i].StartKey) < string(rs[j].StartKey)
		}
		return rs[i].Id < rs[j].Id
	})
	var out []string
	for _, r := range rs {
		out = append(out, fmtRegion(r))
	}
	return strings.Join(out, "\n")
}

func TestSplitDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/split", func(t *testing.T, path string) {
		h := &splitHarness{t: t, fs: vfs.NewCrashableMem()}
		defer h.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			h.t = t
			return h.cmd(d)
		})
	})
}

func TestSplitCommandRoundTrip(t *testing.T) {
	in := &splitCmd{confVer: 3, version: 7, newRegionID: 1001, newPeerIDs: []uint64{1002, 1003, 1004}, splitKey: []byte("t\x00\x01k")}
	c, err := decodeCommand(encodeSplit(42, in))
	if err != nil {
		t.Fatal(err)
	}
	if c.kind != cmdSplit || c.id != 42 || !reflect.DeepEqual(c.split, in) {
		t.Fatalf("decoded %+v %+v, want %+v", c, c.split, in)
	}
	w, err := decodeCommand(encodeWrite(43, 9, []byte("repr")))
	if err != nil || w.kind != cmdWrite || w.id != 43 || w.version != 9 || string(w.repr) != "repr" {
		t.Fatalf("write decoded as %+v, %v", w, err)
	}
	for _, bad := range [][]byte{nil, {cmdSplit, 0, 0, 0, 0, 0, 0, 0, 1, 0}, {9, 0, 0, 0, 0, 0, 0, 0, 1}, {cmdWrite, 0, 0, 0, 0, 0, 0, 0, 1, 0}} {
		if _, err := decodeCommand(bad); err == nil {
			t.Fatalf("malformed command %v decoded", bad)
		}
	}
}

// Writers keep proposing to both halves of a region while it splits, each
// checking its request and proposing under the epoch it checked, as the KV
// service does. Every write is either acknowledged (and then in the
// engine) or refused with a routing error the client retries; none fails
// otherwise, and none hangs. (Which writes the apply refuses is pinned
// down deterministically by the race cases of testdata/split; this test is
// for the concurrency of the split path, under -race.)
func TestWritesRacingASplit(t *testing.T) {
	h := &splitHarness{t: t, fs: vfs.NewCrashableMem()}
	defer h.close()
	h.open(true)
	raceWritesAgainstSplit(t, h, func(p *Peer, epoch *kvpb.RegionEpoch, b *pebble.Batch) error {
		return h.s.Propose(context.Background(), p, epoch, b)
	})
}

// raceWritesAgainstSplit has four writers propose keys across region 2
// with propose while region 2 splits at "m", and checks that every write
// is either acknowledged and applied or refused (KeyNotInRegion before it
// is proposed, EpochNotMatch after), and that the parent refuses the new
// region's keys afterwards.
func raceWritesAgainstSplit(t *testing.T, h *splitHarness, propose func(p *Peer, epoch *kvpb.RegionEpoch, b *pebble.Batch) error) {
	t.Helper()
	parent, _ := h.s.Peer(2)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		acked    []string
		refused  int
		splitted = make(chan struct{})
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			after := -1 // the iteration at which the split was seen
			for i := 0; ; i++ {
				select {
				case <-splitted:
					// Go on for 50 more writes after the split, whatever
					// number of writes raced it.
					if after < 0 {
						after = i
					}
					if i > after+50 {
						return
					}
				default:
				}
				key := fmt.Sprintf("%c%04d", "aknz"[w], i)
				r, rerr := parent.Check(nil, []byte(key))
				if rerr != nil {
					if rerr.KeyNotInRegion != nil {
						mu.Lock()
						refused++
						mu.Unlock()
						continue
					}
					t.Errorf("check %s: %v", key, rerr)
					return
				}
				b := h.s.Engine().NewBatch()
				_ = b.Set([]byte(key), []byte("v"), nil)
				err := propose(parent, r.Epoch, b)
				b.Close()
				var re *RegionErr
				switch {
				case err == nil:
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
				case errors.As(err, &re) && re.E.EpochNotMatch != nil:
					mu.Lock()
					refused++
					mu.Unlock()
				default:
					t.Errorf("propose %s: %v", key, err)
					return
				}
			}
		}(w)
	}
	time.Sleep(20 * time.Millisecond)
	if _, _, err := h.s.Split(context.Background(), parent, parent.Region().Epoch, []byte("m"), 100, []uint64{101}); err != nil {
		t.Fatal(err)
	}
	close(splitted)
	wg.Wait()
	if refused == 0 {
		t.Fatal("no write was refused: the test did not race the split")
	}
	// A write acknowledged at commit (ProposeCommitted) is applied soon
	// after; every acknowledged write must be there.
	deadline := time.Now().Add(5 * time.Second)
	for _, k := range acked {
		for {
			if _, ok, _ := engine.GetCopy(h.eng.KV, []byte(k)); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("acknowledged write %s missing", k)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// After the split the parent refuses keys it no longer owns.
	if rerr := parent.CheckKey([]byte("n0000")); rerr == nil || rerr.KeyNotInRegion == nil {
		t.Fatalf("parent accepts a key of the new region: %v", rerr)
	}
}
