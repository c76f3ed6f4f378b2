package raftstore

import (
	"context"
	"encoding/binary"
	"time"

	"go.etcd.io/raft/v3"
)

// Reads on the leader. A leader serves reads from its applied state; it
// must first know it is still the leader, or a newer leader may have
// acknowledged writes it has not seen. Two ways to know:
//
// Lease. etcd raft with CheckQuorum makes a follower ignore votes (and
// pre-votes) for electionTicks ticks after it last heard from its leader,
// unless the vote comes from a leadership transfer. A replica that sent
// something at store-clock time t and had it acknowledged by a quorum
// therefore knows that no other replica can win an election before every
// member of that quorum has ticked electionTicks times after t: each had
// reset its election clock at or after t. Ticks come every tickInterval at
// most as fast as the clock (a paused or slow process ticks later, never
// earlier), so (electionTicks-1) x tickInterval after t is safe, the -1
// because a tick may fall just after the message. The lease is that, less
// a margin for clock-rate differences between nodes:
//
//	lease = t + (electionTicks-1) x tickInterval - leaseMargin = t + 700 ms
//
// Every write the leader proposed and saw committed in its term renews the
// lease from its proposal time; so does the leader's first entry of the
// term (from the moment it became leader), and every ReadIndex round
// (from the moment it was requested). The lease is given up when a
// leadership transfer starts (the transferee's votes bypass the followers'
// lease check) and on every membership change, and is never renewed while
// a transfer is in flight. A region whose only voter is this replica
// cannot elect anyone else, so its leader holds the lease for as long as
// it leads.
//
// ReadIndex. Without a valid lease, a read asks raft for a ReadIndex (a
// heartbeat round that a quorum must acknowledge, ReadOnlySafe) and waits
// until the replica has applied up to the index it returns. Reads that
// arrive before a round is requested share it.
const (
	leaseMargin   = 200 * time.Millisecond
	leaseDuration = (electionTicks-1)*tickInterval - leaseMargin
)

// readQueue holds the reads of one replica waiting for leadership to be
// confirmed. p.mu guards it.
type readQueue struct {
	// waiting arrived since the last ReadIndex request.
	waiting []chan error
	// renew asks for a ReadIndex round with no reader waiting, to renew a
	// lease close to its end.
	renew bool
	// inflight are requested rounds, by their request context.
	inflight map[uint64]*readRound
	// ready know their index and wait for the apply to reach it.
	ready []*readRound
	seq   uint64
}

type readRound struct {
	at      time.Duration // store clock when requested
	index   uint64
	waiters []chan error
}

// leaseValid reports whether p may serve a read from its applied state
// without a Raft round trip.
func (p *Peer) leaseValid() bool {
	if !p.leaderReady.Load() {
		return false
	}
	if onlyVoter(p.Region(), p.id) {
		return true
	}
	return int64(p.store.now()) < p.leaseUntil.Load()
}

// renewLeaseLocked extends the lease to at + leaseDuration, where at is a
// store-clock time before something a quorum acknowledged was sent. p.mu
// held (so that a transfer started since cannot be missed).
func (p *Peer) renewLeaseLocked(at time.Duration) {
	if !p.isLeader || at < p.leaderSince || onlyVoter(p.Region(), p.id) {
		return // a region this replica alone votes in needs no lease
	}
	if p.rn.BasicStatus().LeadTransferee != 0 {
		return
	}
	until := int64(at + leaseDuration)
	for {
		cur := p.leaseUntil.Load()
		if until <= cur || p.leaseUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// revokeLeaseLocked gives the lease up. Renewals from proposals made
// before now are ignored afterwards (leaderSince moves to now). p.mu held.
func (p *Peer) revokeLeaseLocked() {
	p.leaseUntil.Store(0)
	if now := p.store.now(); now > p.leaderSince {
		p.leaderSince = now
	}
}

// ReadReady returns once a read from p's applied state would see every
// write acknowledged before the call: at once under a valid lease,
// otherwise after a ReadIndex round and the apply that follows it. A
// *RegionErr (NotLeader) means the read must go elsewhere.
func (s *Store) ReadReady(ctx context.Context, p *Peer) error {
	p.touch()
	if p.leaseValid() {
		if p.leaseUntil.Load()-int64(s.now()) < int64(leaseDuration/3) && !onlyVoter(p.Region(), p.id) {
			// Renew before it runs out, so that a steady read load never
			// waits for a round.
			p.mu.Lock()
			p.reads.renew = true
			p.mu.Unlock()
			s.poke(p)
		}
		return nil
	}
	ch := make(chan error, 1)
	p.mu.Lock()
	if !p.isLeader || p.removed.Load() {
		p.mu.Unlock()
		return p.notLeaderError()
	}
	p.reads.waiting = append(p.reads.waiting, ch)
	p.mu.Unlock()
	s.poke(p)
	select {
	case err := <-ch:
		return err
	case <-s.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// requestReadIndexLocked starts a ReadIndex round for the reads waiting on
// p, if any (or a lease renewal was asked for). Store loop, p.mu held.
func (p *Peer) requestReadIndexLocked() {
	q := &p.reads
	if len(q.waiting) == 0 && !q.renew {
		return
	}
	if !p.isLeader {
		p.failReadsLocked(p.notLeaderError())
		return
	}
	q.seq++
	if q.inflight == nil {
		q.inflight = make(map[uint64]*readRound)
	}
	q.inflight[q.seq] = &readRound{at: p.store.now(), waiters: q.waiting}
	q.waiting, q.renew = nil, false
	p.wakeLocked()
	p.touch()
	p.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, q.seq))
	metricReadIndex.Inc()
}

// onReadStates records the indexes raft confirmed for read rounds. Store
// loop, p.mu held.
func (p *Peer) onReadStatesLocked(states []raft.ReadState) {
	q := &p.reads
	for _, rs := range states {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		seq := binary.BigEndian.Uint64(rs.RequestCtx)
		r, ok := q.inflight[seq]
		if !ok {
			continue
		}
		delete(q.inflight, seq)
		r.index = rs.Index
		p.renewLeaseLocked(r.at)
		q.ready = append(q.ready, r)
	}
}

// releaseReadsLocked wakes the reads whose index the replica has applied.
// p.mu held.
func (p *Peer) releaseReadsLocked(applied uint64) {
	q := &p.reads
	n := 0
	for _, r := range q.ready {
		if r.index <= applied {
			for _, ch := range r.waiters {
				ch <- nil
			}
			continue
		}
		q.ready[n] = r
		n++
	}
	clear(q.ready[n:])
	q.ready = q.ready[:n]
}

// failReadsLocked fails every read waiting on p (it lost leadership).
// p.mu held.
func (p *Peer) failReadsLocked(err error) {
	q := &p.reads
	fail := func(ws []chan error) {
		for _, ch := range ws {
			ch <- err
		}
	}
	fail(q.waiting)
	for _, r := range q.inflight {
		fail(r.waiters)
	}
	for _, r := range q.ready {
		fail(r.waiters)
	}
	q.waiting, q.inflight, q.ready, q.renew = nil, nil, nil, false
}
