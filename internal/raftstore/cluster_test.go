package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// memNet is an in-memory network between the stores of a test cluster,
// like etcd raft's rafttest: every store's Transport hands it messages,
// one goroutine per destination store delivers them in order through
// Store.Receive, and snapshots travel as their files, through the same
// store API the gRPC transport uses (SnapshotFiles, WriteSnapshotFile,
// CheckSnapshotFile). Links can be cut in either direction.
type memNet struct {
	mu      sync.Mutex
	stores  map[uint64]*Store
	queues  map[uint64]chan netMsg
	blocked map[[2]uint64]bool
	pending atomic.Int64 // messages sent and not yet handled
	dropped atomic.Int64
	wg      sync.WaitGroup
}

type netMsg struct {
	from uint64
	m    *kvpb.RaftMessage
}

func newMemNet() *memNet {
	return &memNet{stores: map[uint64]*Store{}, queues: map[uint64]chan netMsg{}, blocked: map[[2]uint64]bool{}}
}

// attach makes s the store that receives messages for its id.
func (n *memNet) attach(s *Store) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stores[s.storeID] = s
	if _, ok := n.queues[s.storeID]; !ok {
		q := make(chan netMsg, 4096)
		n.queues[s.storeID] = q
		n.wg.Add(1)
		go func(id uint64) {
			defer n.wg.Done()
			for msg := range q {
				n.handle(id, msg)
				n.pending.Add(-1)
			}
		}(s.storeID)
	}
}

func (n *memNet) detach(id uint64) {
	n.mu.Lock()
	delete(n.stores, id)
	n.mu.Unlock()
}

func (n *memNet) close() {
	n.mu.Lock()
	for _, q := range n.queues {
		close(q)
	}
	n.queues = map[uint64]chan netMsg{}
	n.mu.Unlock()
	n.wg.Wait()
}

func (n *memNet) cut(from, to uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.blocked[[2]uint64{from, to}]
}

func (n *memNet) transport(from uint64) Transport { return memTransport{n: n, from: from} }

type memTransport struct {
	n    *memNet
	from uint64
}

func (t memTransport) Send(msgs []*kvpb.RaftMessage) {
	for _, m := range msgs {
		to := m.ToPeer.GetStoreId()
		t.n.mu.Lock()
		q, ok := t.n.queues[to]
		t.n.mu.Unlock()
		if !ok || t.n.cut(t.from, to) {
			t.n.dropped.Add(1)
			continue
		}
		t.n.pending.Add(1)
		select {
		case q <- netMsg{from: t.from, m: m}:
		default:
			t.n.pending.Add(-1)
			t.n.dropped.Add(1)
		}
	}
}

// handle delivers one message to store id (and, for a snapshot, its files
// first, reporting the outcome to the sender).
func (n *memNet) handle(id uint64, msg netMsg) {
	n.mu.Lock()
	dst, src := n.stores[id], n.stores[msg.from]
	cut := n.blocked[[2]uint64{msg.from, id}]
	n.mu.Unlock()
	if dst == nil || cut {
		n.dropped.Add(1)
		return
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(msg.m.Message, m); err != nil {
		panic(err)
	}
	if os.Getenv("MEMNET_TRACE") != "" {
		fmt.Printf("net %d->%d r%d %v term=%d idx=%d logterm=%d commit=%d reject=%v hint=%d ents=%d\n", msg.from, id, msg.m.RegionId, m.GetType(), m.GetTerm(), m.GetIndex(), m.GetLogTerm(), m.GetCommit(), m.GetReject(), m.GetRejectHint(), len(m.Entries))
	}
	if m.GetType() == pb.MessageType_MsgSnap {
		err := copySnapshot(src, dst, m)
		if err == nil {
			err = dst.Receive(msg.m)
		}
		if src != nil {
			src.ReportSnapshot(msg.m.RegionId, msg.m.ToPeer.GetId(), err == nil)
		}
		return
	}
	_ = dst.Receive(msg.m)
}

// copySnapshot moves a snapshot's files from the sender's store to the
// receiver's, as a transport streams them.
func copySnapshot(src, dst *Store, m *pb.Message) error {
	if src == nil {
		return errors.New("sender gone")
	}
	h := &kvpb.SnapshotHeader{}
	if err := proto.Unmarshal(m.GetSnapshot().GetData(), h); err != nil {
		return err
	}
	files, err := src.SnapshotFiles(h)
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	i := 0
	for _, f := range h.Files {
		if f.Name == "" {
			continue
		}
		w, err := dst.WriteSnapshotFile(h, f)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, files[i])
		i++
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = dst.CheckSnapshotFile(h, f)
		}
		if err != nil {
			dst.DiscardReceived(h.Id)
			return err
		}
	}
	return nil
}

// testStore is one store of a test cluster: its filesystem survives
// restarts and crashes.
type testStore struct {
	id  uint64
	fs  *vfs.MemFS
	eng engine.Engines
	s   *Store
}

// clusterHarness drives a cluster of real stores on an in-memory network
// from testdata/replica scripts. Stores tick and keep time only when told
// (ManualTicks), so elections and leases happen where the script says.
//
//	cluster stores=<n> [hibernate=true]    n empty stores, not yet open (idle regions hibernate)
//	bootstrap region=<id> peers=<p@s,...> [start=<k>] [end=<k>]
//	                                       a region's initial state on every store it names
//	open [stores=<s,...>]                  open stores (default: all closed ones)
//	campaign store=<s> region=<id>         make the replica start an election
//	tick [stores=<s,...>] [n=<ticks>]      raft ticks (default all stores, 1)
//	clock [stores=<s,...>] advance=<dur>   move store clocks (leases)
//	leader region=<id>                     who leads, and who is a ready leader
//	regions [stores=<s,...>]               the replicas each store holds
//	put store=<s> region=<id> key=<k> [value=<v>]
//	fill store=<s> region=<id> n=<count> [prefix=<p>]
//	get key=<k>                            the engine value on every open store
//	read store=<s> region=<id>             ReadReady: lease, read index or error
//	add-learner|promote|demote|remove store=<s> region=<id> peer=<p@s>
//	leave-joint store=<s> region=<id>
//	transfer-leader store=<s> region=<id> to=<peer>
//	prepare-merge store=<s> region=<id> target=<id>
//	                                       Store.PrepareMerge: freeze the region for a merge into target
//	isolate store=<s>                      cut every link to and from s
//	block from=<s> to=<s>                  cut one direction
//	heal                                   restore every link
//	crash store=<s>                        lose everything not synced, stay down
//	stop store=<s>                         clean shutdown, stay down
//	log store=<s> region=<id>              applied, truncated and last index
//	flush store=<s>                        flush the KV engine (and truncate logs)
//	asleep region=<id> [stores=<s,...>]    which replicas hibernate
//	store-lost down=<s> [stores=<s,...>]   Store.StoreLost: the transport lost store s, or PD counts it down
//	destroy-stale store=<s> region=<id> peer=<id> conf-ver=<n>
//	                                       Store.DestroyStale: PD's descriptor at conf-ver lacks the peer
//	destroy-merged store=<s> region=<id> peer=<id>
//	                                       Store.DestroyMergedAway: PD shows the region merged away
//	message to=<s> region=<id> peer=<id> from=<p@s> type=<heartbeat|vote>
//	                                       a raft message from a leader the store has not heard of
//
// After every command the harness waits until the network and every open
// store are idle.
type clusterHarness struct {
	t         *testing.T
	net       *memNet
	stores    map[uint64]*testStore
	hibernate bool
}

func newClusterHarness(t *testing.T) *clusterHarness {
	return &clusterHarness{t: t, net: newMemNet(), stores: map[uint64]*testStore{}}
}

func (h *clusterHarness) close() {
	for _, ts := range h.stores {
		if ts.s != nil {
			ts.s.Close()
			ts.eng.Close()
			ts.s = nil
		}
	}
	h.net.close()
}

func (h *clusterHarness) openStore(ts *testStore) {
	eng, err := engine.OpenEngines("/data", engine.Options{FS: ts.fs})
	if err != nil {
		h.t.Fatal(err)
	}
	s, err := Open(eng, Config{StoreID: ts.id, Transport: h.net.transport(ts.id), ManualTicks: true,
		Logger: quietLogger(), Hibernate: h.hibernate})
	if err != nil {
		h.t.Fatal(err)
	}
	ts.eng, ts.s = eng, s
	h.net.attach(s)
}

// settle waits until no message is in flight and every open store is idle,
// twice in a row.
func (h *clusterHarness) settle() {
	deadline := time.Now().Add(20 * time.Second)
	calm := 0
	for calm < 3 {
		if time.Now().After(deadline) {
			h.t.Fatalf("cluster did not settle: %d messages pending", h.net.pending.Load())
		}
		busy := h.net.pending.Load() != 0
		for _, ts := range h.stores {
			if ts.s != nil && !ts.s.idle() {
				busy = true
			}
		}
		if busy {
			calm = 0
		} else {
			calm++
		}
		time.Sleep(time.Millisecond)
	}
}

// tickAndWait ticks s's replicas in its store loop and returns once the
// loop has done so.
func (s *Store) tickAndWait() {
	n := s.ticks.Load()
	s.Tick()
	for s.ticks.Load() == n {
		time.Sleep(100 * time.Microsecond)
	}
}

// listArg reads a comma-separated argument.
func listArg(t *testing.T, d *datadriven.TestData, key string) []string {
	var v string
	d.ScanArgs(t, key, &v)
	return strings.Split(v, ",")
}

func parsePeer(t *testing.T, s string) *kvpb.Peer {
	role := kvpb.PeerRole_Voter
	if strings.HasSuffix(s, "L") {
		role, s = kvpb.PeerRole_Learner, strings.TrimSuffix(s, "L")
	}
	a, b, ok := strings.Cut(s, "@")
	id, err1 := strconv.ParseUint(a, 10, 64)
	st, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("bad peer %q (want id@store)", s)
	}
	return &kvpb.Peer{Id: id, StoreId: st, Role: role}
}

func (h *clusterHarness) storeArgs(d *datadriven.TestData, key string) []*testStore {
	var out []*testStore
	if d.HasArg(key) {
		for _, s := range listArg(h.t, d, key) {
			id, err := strconv.ParseUint(s, 10, 64)
			if err != nil || h.stores[id] == nil {
				d.Fatalf(h.t, "no store %s", s)
			}
			out = append(out, h.stores[id])
		}
		return out
	}
	for _, ts := range h.stores {
		out = append(out, ts)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// store is the store the command names: a number, or "leader" for the
// store whose replica of the command's region is a ready leader of the
// highest term.
func (h *clusterHarness) store(d *datadriven.TestData) *testStore {
	var arg string
	d.ScanArgs(h.t, "store", &arg)
	if arg == "leader" {
		var rid uint64
		d.ScanArgs(h.t, "region", &rid)
		var best *testStore
		var bestTerm uint64
		for _, ts := range h.stores {
			if ts.s == nil {
				continue
			}
			if p, ok := ts.s.Peer(rid); ok && p.IsLeaderReady() {
				p.mu.Lock()
				term := p.term
				p.mu.Unlock()
				if term > bestTerm {
					best, bestTerm = ts, term
				}
			}
		}
		if best == nil {
			d.Fatalf(h.t, "region %d has no ready leader", rid)
		}
		return best
	}
	id, err := strconv.ParseUint(arg, 10, 64)
	if err != nil {
		d.Fatalf(h.t, "store: %v", err)
	}
	ts := h.stores[id]
	if ts == nil || ts.s == nil {
		d.Fatalf(h.t, "store %d is not open", id)
	}
	return ts
}

func (h *clusterHarness) peer(d *datadriven.TestData) (*testStore, *Peer) {
	ts := h.store(d)
	var rid uint64
	d.ScanArgs(h.t, "region", &rid)
	p, ok := ts.s.Peer(rid)
	if !ok {
		d.Fatalf(h.t, "store %d has no replica of region %d", ts.id, rid)
	}
	return ts, p
}

func (h *clusterHarness) cmd(d *datadriven.TestData) string {
	out := h.run(d)
	h.settle()
	return out
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (h *clusterHarness) run(d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "cluster":
		var n uint64
		d.ScanArgs(h.t, "stores", &n)
		d.MaybeScanArgs(h.t, "hibernate", &h.hibernate)
		for id := uint64(1); id <= n; id++ {
			h.stores[id] = &testStore{id: id, fs: vfs.NewCrashableMem()}
		}
		return ""
	case "bootstrap":
		var rid uint64
		d.ScanArgs(h.t, "region", &rid)
		ps := listArg(h.t, d, "peers")
		r := &kvpb.Region{Id: rid, Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}}
		var start, end string
		d.MaybeScanArgs(h.t, "start", &start)
		d.MaybeScanArgs(h.t, "end", &end)
		r.StartKey, r.EndKey = []byte(start), []byte(end)
		for _, s := range ps {
			r.Peers = append(r.Peers, parsePeer(h.t, s))
		}
		for _, rp := range r.Peers {
			ts := h.stores[rp.StoreId]
			eng, err := engine.OpenEngines("/data", engine.Options{FS: ts.fs})
			if err != nil {
				h.t.Fatal(err)
			}
			if err := BootstrapRegion(eng, r); err != nil {
				h.t.Fatal(err)
			}
			eng.Close()
		}
		return fmtRegion(r)
	case "open":
		for _, ts := range h.storeArgs(d, "stores") {
			if ts.s == nil {
				h.openStore(ts)
			}
		}
		return ""
	case "campaign":
		_, p := h.peer(d)
		p.mu.Lock()
		err := p.rn.Campaign()
		p.mu.Unlock()
		p.store.wake()
		if err != nil {
			return "error: " + err.Error()
		}
		return ""
	case "tick":
		n := 1
		d.MaybeScanArgs(h.t, "n", &n)
		// until-elected=<region>: tick (up to n times) until one of the
		// ticked stores holds a ready leader of the region. Elections
		// are randomized and may split votes; this waits them out.
		var until uint64
		d.MaybeScanArgs(h.t, "until-elected", &until)
		for i := 0; i < n; i++ {
			if until != 0 {
				elected := false
				for _, ts := range h.storeArgs(d, "stores") {
					if ts.s == nil {
						continue
					}
					if p, ok := ts.s.Peer(until); ok && p.IsLeaderReady() {
						elected = true
					}
				}
				if elected {
					break
				}
			}
			for _, ts := range h.storeArgs(d, "stores") {
				if ts.s != nil {
					ts.s.tickAndWait()
				}
			}
			h.settle()
		}
		return ""
	case "clock":
		var adv string
		d.ScanArgs(h.t, "advance", &adv)
		dur, err := time.ParseDuration(adv)
		if err != nil {
			d.Fatalf(h.t, "advance: %v", err)
		}
		for _, ts := range h.storeArgs(d, "stores") {
			if ts.s != nil {
				ts.s.AdvanceClock(dur)
			}
		}
		return ""
	case "elected":
		// Elections are randomized: how many ready leaders, at which term.
		var rid uint64
		d.ScanArgs(h.t, "region", &rid)
		n, term := 0, uint64(0)
		for _, ts := range h.storeArgs(d, "stores") {
			if ts.s == nil {
				continue
			}
			if p, ok := ts.s.Peer(rid); ok && p.IsLeaderReady() {
				n++
				p.mu.Lock()
				term = p.term
				p.mu.Unlock()
			}
		}
		_ = term
		return fmt.Sprintf("%d ready leader(s)", n)
	case "leader":
		var rid uint64
		d.ScanArgs(h.t, "region", &rid)
		var lines []string
		for _, ts := range h.storeArgs(d, "stores") {
			if ts.s == nil {
				continue
			}
			p, ok := ts.s.Peer(rid)
			if !ok {
				continue
			}
			p.mu.Lock()
			state := "follower"
			switch {
			case p.isLeader && p.leaderReady.Load():
				state = "leader (ready)"
			case p.isLeader:
				state = "leader"
			}
			st := p.rn.BasicStatus()
			p.mu.Unlock()
			lines = append(lines, fmt.Sprintf("s%d: peer %d %s term=%d lead=%d", ts.id, p.id, state, st.HardState.GetTerm(), st.Lead))
		}
		return strings.Join(lines, "\n")
	case "regions":
		var lines []string
		for _, ts := range h.storeArgs(d, "stores") {
			if ts.s == nil {
				lines = append(lines, fmt.Sprintf("s%d: down", ts.id))
				continue
			}
			for _, p := range ts.s.Peers() {
				if p.Initialized() {
					line := fmt.Sprintf("s%d: %s", ts.id, fmtRegion(p.Region()))
					if ms := p.Merging(); ms != nil {
						line += fmt.Sprintf(" merging into r%d at %d", ms.Target.GetId(), ms.PrepareIndex)
					}
					lines = append(lines, line)
				} else {
					lines = append(lines, fmt.Sprintf("s%d: r%d uninitialized peer=%d", ts.id, p.regionID, p.id))
				}
			}
			if len(ts.s.Peers()) == 0 {
				lines = append(lines, fmt.Sprintf("s%d: none", ts.id))
			}
		}
		return strings.Join(lines, "\n")
	case "put":
		ts, p := h.peer(d)
		var key, value string
		d.ScanArgs(h.t, "key", &key)
		value = "v"
		d.MaybeScanArgs(h.t, "value", &value)
		b := ts.s.Engine().NewBatch()
		defer b.Close()
		_ = b.Set([]byte(key), []byte(value), nil)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := ts.s.Propose(cctx, p, p.Region().Epoch, b); err != nil {
			return fmtErr(err)
		}
		return "ok"
	case "fill":
		ts, p := h.peer(d)
		var n int
		d.ScanArgs(h.t, "n", &n)
		prefix := "f"
		d.MaybeScanArgs(h.t, "prefix", &prefix)
		for i := 0; i < n; i++ {
			b := ts.s.Engine().NewBatch()
			_ = b.Set([]byte(fmt.Sprintf("%s%05d", prefix, i)), []byte("v"), nil)
			err := ts.s.Propose(ctx, p, p.Region().Epoch, b)
			b.Close()
			if err != nil {
				return fmt.Sprintf("put %d: %s", i, fmtErr(err))
			}
		}
		return "ok"
	case "get":
		var key string
		d.ScanArgs(h.t, "key", &key)
		var parts []string
		for _, ts := range h.storeArgs(d, "stores") {
			if ts.s == nil {
				continue
			}
			v, ok, err := engine.GetCopy(ts.eng.KV, []byte(key))
			switch {
			case err != nil:
				parts = append(parts, fmt.Sprintf("s%d: error %v", ts.id, err))
			case !ok:
				parts = append(parts, fmt.Sprintf("s%d: <none>", ts.id))
			default:
				parts = append(parts, fmt.Sprintf("s%d: %s", ts.id, v))
			}
		}
		return strings.Join(parts, " ")
	case "read":
		ts, p := h.peer(d)
		lease := p.leaseValid()
		done := make(chan error, 1)
		go func() {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			done <- ts.s.ReadReady(cctx, p)
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(200 * time.Millisecond):
			// Waiting on a round; let the network and the stores run.
			h.settle()
			err = <-done
		}
		switch {
		case err != nil:
			return fmtErr(err)
		case lease:
			return "ok (lease)"
		default:
			return "ok (read index)"
		}
	case "add-learner", "promote", "demote", "remove", "leave-joint":
		ts, p := h.peer(d)
		kind := map[string]ChangeKind{"add-learner": AddLearner, "promote": PromoteLearner, "demote": DemoteVoter,
			"remove": RemovePeer, "leave-joint": LeaveJoint}[d.Cmd]
		c := PeerChange{Kind: kind}
		if kind != LeaveJoint {
			var ps string
			d.ScanArgs(h.t, "peer", &ps)
			c.Peer = parsePeer(h.t, ps)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := ts.s.ChangePeers(cctx, p, p.Region().Epoch, []PeerChange{c})
		if err != nil {
			return fmtErr(err)
		}
		return fmtRegion(r)
	case "split":
		ts, p := h.peer(d)
		var key string
		var newID uint64
		d.ScanArgs(h.t, "key", &key)
		d.ScanArgs(h.t, "new", &newID)
		var ids []uint64
		for _, s := range listArg(h.t, d, "peers") {
			id, _ := strconv.ParseUint(s, 10, 64)
			ids = append(ids, id)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, r, err := ts.s.Split(cctx, p, p.Region().Epoch, []byte(key), newID, ids)
		if err != nil {
			return fmtErr(err)
		}
		return fmtRegion(l) + "\n" + fmtRegion(r)
	case "prepare-merge":
		ts, p := h.peer(d)
		var target uint64
		d.ScanArgs(h.t, "target", &target)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := ts.s.PrepareMerge(cctx, p, p.Region().Epoch, target); err != nil {
			return fmtErr(err)
		}
		return "ok"
	case "transfer-leader":
		ts, p := h.peer(d)
		var to uint64
		d.ScanArgs(h.t, "to", &to)
		if err := ts.s.TransferLeader(p, to); err != nil {
			return fmtErr(err)
		}
		return ""
	case "isolate":
		var id uint64
		d.ScanArgs(h.t, "store", &id)
		h.net.mu.Lock()
		for other := range h.stores {
			if other != id {
				h.net.blocked[[2]uint64{id, other}] = true
				h.net.blocked[[2]uint64{other, id}] = true
			}
		}
		h.net.mu.Unlock()
		return ""
	case "block":
		var from, to uint64
		d.ScanArgs(h.t, "from", &from)
		d.ScanArgs(h.t, "to", &to)
		h.net.mu.Lock()
		h.net.blocked[[2]uint64{from, to}] = true
		h.net.mu.Unlock()
		return ""
	case "heal":
		h.net.mu.Lock()
		h.net.blocked = map[[2]uint64]bool{}
		h.net.mu.Unlock()
		return ""
	case "crash", "stop":
		ts := h.store(d)
		h.net.detach(ts.id)
		if d.Cmd == "crash" {
			ts.fs = ts.fs.CrashClone(vfs.CrashCloneCfg{})
		} else {
			_ = ts.eng.KV.Flush()
		}
		ts.s.Close()
		ts.eng.Close()
		ts.s = nil
		return ""
	case "progress":
		_, p := h.peer(d)
		p.mu.Lock()
		st := p.rn.Status()
		p.mu.Unlock()
		var ids []uint64
		for id := range st.Progress {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		var lines []string
		for _, id := range ids {
			pr := st.Progress[id]
			lines = append(lines, fmt.Sprintf("%d: %s match=%d next=%d", id, pr.State, pr.Match, pr.Next))
		}
		return strings.Join(lines, "\n")
	case "log":
		_, p := h.peer(d)
		st := p.storage.applyState()
		return fmt.Sprintf("applied=%d truncated=%d last=%d", st.AppliedIndex, st.TruncatedIndex, p.storage.lastIndex())
	case "flush":
		ts := h.store(d)
		// The store truncates logs once a flush it asked for completes.
		deadline := time.Now().Add(5 * time.Second)
		for {
			ts.s.TruncateLogs()
			time.Sleep(5 * time.Millisecond)
			h.settle()
			done := true
			for _, p := range ts.s.Peers() {
				if p.Initialized() {
					st := p.storage.applyState()
					if want := p.compactIndex(st.AppliedIndex); want > st.TruncatedIndex {
						done = false
					}
				}
			}
			if done || time.Now().After(deadline) {
				break
			}
		}
		return ""
	case "asleep":
		var rid uint64
		d.ScanArgs(h.t, "region", &rid)
		var parts []string
		for _, ts := range h.storeArgs(d, "stores") {
			if ts.s == nil {
				continue
			}
			if p, ok := ts.s.Peer(rid); ok {
				state := "awake"
				if p.Asleep() {
					state = "asleep"
				}
				parts = append(parts, fmt.Sprintf("s%d: %s", ts.id, state))
			}
		}
		return strings.Join(parts, " ")
	case "idle-rounds":
		// Starts n rounds of each store's loop with nothing queued and
		// prints how many replicas they looked at.
		var n int
		d.ScanArgs(h.t, "n", &n)
		stores := h.storeArgs(d, "stores")
		before := make([]uint64, len(stores))
		for i, ts := range stores {
			if ts.s != nil {
				before[i] = ts.s.looked.Load()
			}
		}
		for range n {
			for _, ts := range stores {
				if ts.s != nil {
					ts.s.wake()
				}
			}
			h.settle()
		}
		var parts []string
		for i, ts := range stores {
			if ts.s != nil {
				parts = append(parts, fmt.Sprintf("s%d: %d", ts.id, ts.s.looked.Load()-before[i]))
			}
		}
		return strings.Join(parts, " ")
	case "store-lost":
		var down uint64
		d.ScanArgs(h.t, "down", &down)
		for _, ts := range h.storeArgs(d, "stores") {
			if ts.s != nil {
				ts.s.StoreLost(down)
			}
		}
		return ""
	case "destroy-stale":
		ts := h.store(d)
		var rid, peerID, cv uint64
		d.ScanArgs(h.t, "region", &rid)
		d.ScanArgs(h.t, "peer", &peerID)
		d.ScanArgs(h.t, "conf-ver", &cv)
		return fmt.Sprint(ts.s.DestroyStale(rid, peerID, cv))
	case "destroy-merged":
		ts := h.store(d)
		var rid, peerID uint64
		d.ScanArgs(h.t, "region", &rid)
		d.ScanArgs(h.t, "peer", &peerID)
		return fmt.Sprint(ts.s.DestroyMergedAway(rid, peerID))
	case "message":
		var to, rid, peerID uint64
		var from, typ string
		d.ScanArgs(h.t, "to", &to)
		d.ScanArgs(h.t, "region", &rid)
		d.ScanArgs(h.t, "peer", &peerID)
		d.ScanArgs(h.t, "from", &from)
		d.ScanArgs(h.t, "type", &typ)
		fp := parsePeer(h.t, from)
		t := map[string]pb.MessageType{"heartbeat": pb.MessageType_MsgHeartbeat, "vote": pb.MessageType_MsgVote, "app": pb.MessageType_MsgApp}[typ]
		m := &pb.Message{Type: t.Enum(), From: proto.Uint64(fp.Id), To: proto.Uint64(peerID), Term: proto.Uint64(7)}
		data, _ := proto.Marshal(m)
		err := h.stores[to].s.Receive(&kvpb.RaftMessage{RegionId: rid, FromPeer: fp, ToPeer: &kvpb.Peer{Id: peerID, StoreId: to},
			RegionEpoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}, Message: data})
		if err != nil {
			return "error: " + err.Error()
		}
		return "delivered"
	}
	d.Fatalf(h.t, "unknown command %s", d.Cmd)
	return ""
}

func TestReplicaDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/replica", func(t *testing.T, path string) {
		h := newClusterHarness(t)
		defer h.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string { return h.cmd(d) })
	})
}
