// Package transport carries Raft messages between the stores of a
// cluster over gRPC (kvpb.Raft).
//
// Each store keeps one long-lived stream to every other store it talks to
// and sends on it batches of messages for all regions (kvpb.RaftMessage
// envelopes: region id, from and to peer, epoch). A sender per destination
// store has a bounded queue: Send never blocks, and a message that finds
// the queue full is dropped (raft sends again), so one slow or dead peer
// never holds up the others. When a stream breaks, the regions whose
// messages were lost are told their peer is unreachable
// (raftstore.Store.ReportUnreachable), and the sender reconnects with
// exponential backoff.
//
// Snapshots travel on a stream of their own per snapshot (kvpb.Raft
// Snapshot): the MsgSnap envelope first, then the bytes of the snapshot's
// SST files in the order its header lists them. The receiver writes them
// into the store's receive directory, checks sizes and checksums, and
// only then hands the message to the store; the sender reports the
// outcome to raft (ReportSnapshot).
//
// Every batch carries the cluster id; a store of another cluster is
// refused, so a node pointed at the wrong cluster cannot corrupt it.
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
)

const (
	queueSize     = 4096
	maxBatchMsgs  = 256
	maxBatchBytes = 4 << 20
	snapChunk     = 1 << 20
	maxBackoff    = time.Second
	// snapshotTimeout bounds one snapshot stream.
	snapshotTimeout = 10 * time.Minute
)

// Resolver finds the gRPC address of a store.
type Resolver interface {
	StoreAddress(ctx context.Context, storeID uint64) (string, error)
}

// Transport implements raftstore.Transport over gRPC, and serves
// kvpb.RaftServer for the messages other stores send.
type Transport struct {
	kvpb.UnimplementedRaftServer
	clusterID uint64
	storeID   uint64
	resolve   Resolver
	log       *slog.Logger
	dialOpts  []grpc.DialOption

	mu       sync.Mutex
	store    *raftstore.Store
	splitter Splitter // split.go
	senders  map[uint64]*sender
	closed   bool
	stop     chan struct{}
	wg       sync.WaitGroup
}

// New returns a transport for store storeID of cluster clusterID. The
// store is attached with SetStore once opened (it needs the transport to
// open).
func New(clusterID, storeID uint64, resolve Resolver, log *slog.Logger, dialOpts ...grpc.DialOption) *Transport {
	if log == nil {
		log = slog.Default()
	}
	return &Transport{
		clusterID: clusterID,
		storeID:   storeID,
		resolve:   resolve,
		log:       log,
		dialOpts:  append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dialOpts...),
		senders:   map[uint64]*sender{},
		stop:      make(chan struct{}),
	}
}

// SetStore attaches the local store: messages received are stepped into
// it, and send failures are reported to it.
func (t *Transport) SetStore(s *raftstore.Store) {
	t.mu.Lock()
	t.store = s
	t.mu.Unlock()
}

func (t *Transport) getStore() *raftstore.Store {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.store
}

// Close stops every sender and closes their connections.
func (t *Transport) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	close(t.stop)
	t.mu.Unlock()
	t.wg.Wait()
}

// Send implements raftstore.Transport.
func (t *Transport) Send(msgs []*kvpb.RaftMessage) {
	for _, m := range msgs {
		to := m.ToPeer.GetStoreId()
		if m.Snapshot {
			t.sendSnapshot(m)
			continue
		}
		s := t.sender(to)
		if s == nil {
			return
		}
		select {
		case s.queue <- m:
		default:
			metricDropped.Inc()
			if st := t.getStore(); st != nil {
				st.ReportUnreachable(m.RegionId, m.ToPeer.GetId())
			}
		}
	}
}

// sender returns the sender to store id, starting it if needed; nil once
// the transport is closed.
func (t *Transport) sender(id uint64) *sender {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	s, ok := t.senders[id]
	if !ok {
		s = &sender{t: t, to: id, queue: make(chan *kvpb.RaftMessage, queueSize)}
		t.senders[id] = s
		t.wg.Add(1)
		go s.run()
	}
	return s
}

// sender streams the messages for one destination store.
type sender struct {
	t     *Transport
	to    uint64
	queue chan *kvpb.RaftMessage
}

func (s *sender) run() {
	defer s.t.wg.Done()
	backoff := 10 * time.Millisecond
	for {
		select {
		case <-s.t.stop:
			return
		default:
		}
		err := s.stream()
		if errors.Is(err, context.Canceled) {
			return
		}
		if err != nil {
			s.t.log.Debug("transport: stream to store failed", "store", s.to, "err", err)
		}
		// While the peer is unreachable, messages queued for it are
		// reported and dropped, so the queue does not hold stale ones.
		s.dropQueued()
		select {
		case <-s.t.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// watch tells the raft store as soon as a ready connection to the
// destination fails (raftstore.Store.StoreLost): the store may be gone;
// the replicas it led wake if they hibernate, and one of each region's
// other voters campaigns as soon as the rest can vote. A store that is
// still there keeps its leaders: its followers, still in their leases,
// ignore the votes, and its next message ends the campaign.
func (s *sender) watch(ctx context.Context, conn *grpc.ClientConn) {
	ready := false
	for state := conn.GetState(); ; state = conn.GetState() {
		switch state {
		case connectivity.Ready:
			ready = true
		case connectivity.TransientFailure, connectivity.Idle:
			if ready {
				if st := s.t.getStore(); st != nil && ctx.Err() == nil {
					st.StoreLost(s.to)
				}
				ready = false
			}
		case connectivity.Shutdown:
			return
		}
		if !conn.WaitForStateChange(ctx, state) {
			return
		}
	}
}

func (s *sender) dropQueued() {
	st := s.t.getStore()
	for {
		select {
		case m := <-s.queue:
			if st != nil {
				st.ReportUnreachable(m.RegionId, m.ToPeer.GetId())
			}
		default:
			return
		}
	}
}

// stream connects and sends batches until the stream fails or the
// transport stops.
func (s *sender) stream() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	conn, err := s.t.dial(ctx, s.to)
	if err != nil {
		return err
	}
	defer conn.Close()
	go s.watch(ctx, conn)
	cl, err := kvpb.NewRaftClient(conn).Raft(ctx)
	if err != nil {
		return err
	}
	st := s.t.getStore()
	for {
		var first *kvpb.RaftMessage
		select {
		case <-ctx.Done():
			return ctx.Err()
		case first = <-s.queue:
		}
		batch := &kvpb.RaftMessageBatch{ClusterId: s.t.clusterID, FromStore: s.t.storeID, Msgs: []*kvpb.RaftMessage{first}}
		size := len(first.Message)
	fill:
		for len(batch.Msgs) < maxBatchMsgs && size < maxBatchBytes {
			select {
			case m := <-s.queue:
				batch.Msgs = append(batch.Msgs, m)
				size += len(m.Message)
			default:
				break fill
			}
		}
		if err := cl.Send(batch); err != nil {
			if st != nil {
				for _, m := range batch.Msgs {
					st.ReportUnreachable(m.RegionId, m.ToPeer.GetId())
				}
			}
			return err
		}
		metricSentBatches.Inc()
		metricSentMsgs.Add(float64(len(batch.Msgs)))
	}
}

func (t *Transport) dial(ctx context.Context, storeID uint64) (*grpc.ClientConn, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addr, err := t.resolve.StoreAddress(rctx, storeID)
	if err != nil {
		return nil, fmt.Errorf("resolve store %d: %w", storeID, err)
	}
	return grpc.NewClient(addr, t.dialOpts...)
}

// sendSnapshot streams a snapshot in the background and reports the
// outcome to raft.
func (t *Transport) sendSnapshot(m *kvpb.RaftMessage) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		err := t.streamSnapshot(m)
		st := t.getStore()
		if err != nil {
			t.log.Warn("transport: sending a snapshot failed", "region", m.RegionId, "store", m.ToPeer.GetStoreId(), "err", err)
			metricSnapshotsSent.WithLabelValues("failed").Inc()
		} else {
			metricSnapshotsSent.WithLabelValues("ok").Inc()
		}
		if st != nil {
			st.ReportSnapshot(m.RegionId, m.ToPeer.GetId(), err == nil)
		}
	}()
}

func (t *Transport) streamSnapshot(m *kvpb.RaftMessage) error {
	st := t.getStore()
	if st == nil {
		return errors.New("no store")
	}
	pm := &pb.Message{}
	if err := proto.Unmarshal(m.Message, pm); err != nil {
		return err
	}
	h := &kvpb.SnapshotHeader{}
	if err := proto.Unmarshal(pm.GetSnapshot().GetData(), h); err != nil {
		return err
	}
	files, err := st.SnapshotFiles(h)
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	go func() {
		select {
		case <-t.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	conn, err := t.dial(ctx, m.ToPeer.GetStoreId())
	if err != nil {
		return err
	}
	defer conn.Close()
	cl, err := kvpb.NewRaftClient(conn).Snapshot(ctx)
	if err != nil {
		return err
	}
	if err := cl.Send(&kvpb.SnapshotChunk{ClusterId: t.clusterID, Message: m}); err != nil {
		return err
	}
	buf := make([]byte, snapChunk)
	for _, f := range files {
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if err := cl.Send(&kvpb.SnapshotChunk{Data: buf[:n]}); err != nil {
					return err
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
	}
	_, err = cl.CloseAndRecv()
	return err
}

// Raft implements kvpb.RaftServer: the messages of one sending store.
func (t *Transport) Raft(stream kvpb.Raft_RaftServer) error {
	for {
		batch, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&kvpb.RaftDone{})
		}
		if err != nil {
			return err
		}
		if batch.ClusterId != t.clusterID {
			return fmt.Errorf("store %d belongs to cluster %d, not %d", t.storeID, t.clusterID, batch.ClusterId)
		}
		st := t.getStore()
		if st == nil {
			continue
		}
		for _, m := range batch.Msgs {
			if err := st.Receive(m); err != nil && !errors.Is(err, raftstore.ErrStaleMessage) {
				t.log.Debug("transport: message refused", "region", m.RegionId, "err", err)
			}
		}
		metricReceivedMsgs.Add(float64(len(batch.Msgs)))
	}
}

// Snapshot implements kvpb.RaftServer: one snapshot, its files written to
// the store's receive directory before the message reaches the store.
func (t *Transport) Snapshot(stream kvpb.Raft_SnapshotServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.ClusterId != t.clusterID {
		return fmt.Errorf("store %d belongs to cluster %d, not %d", t.storeID, t.clusterID, first.ClusterId)
	}
	st := t.getStore()
	if st == nil || first.Message == nil {
		return errors.New("transport: store not ready for snapshots")
	}
	pm := &pb.Message{}
	if err := proto.Unmarshal(first.Message.Message, pm); err != nil {
		return err
	}
	h := &kvpb.SnapshotHeader{}
	if err := proto.Unmarshal(pm.GetSnapshot().GetData(), h); err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			st.DiscardReceived(h.Id)
		}
	}()
	var pending []byte
	for _, f := range h.Files {
		if f.Name == "" {
			continue
		}
		w, err := st.WriteSnapshotFile(h, f)
		if err != nil {
			return err
		}
		left := f.Size
		for left > 0 {
			if len(pending) == 0 {
				c, err := stream.Recv()
				if err != nil {
					w.Close()
					return fmt.Errorf("snapshot %s: %w", h.Id, err)
				}
				pending = c.Data
				if len(pending) == 0 {
					continue
				}
			}
			n := min(uint64(len(pending)), left)
			if _, err := w.Write(pending[:n]); err != nil {
				w.Close()
				return err
			}
			pending, left = pending[n:], left-n
		}
		if err := w.Close(); err != nil {
			return err
		}
		if err := st.CheckSnapshotFile(h, f); err != nil {
			return err
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("snapshot %s: %d bytes past its files", h.Id, len(pending))
	}
	if err := st.Receive(first.Message); err != nil {
		return err
	}
	ok = true
	metricSnapshotsReceived.Inc()
	return stream.SendAndClose(&kvpb.RaftDone{})
}
