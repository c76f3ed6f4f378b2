package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-db/strata/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Membership changes. A region's membership is its descriptor's peers and
// their roles (kvpb.PeerRole); the Raft configuration (raftpb.ConfState)
// is derived from them (confStateOf), so the two never disagree.
//
// A change is proposed as an etcd raft ConfChangeV2 whose context carries
// the command header (proposal id, the epoch it was decided under) and the
// store of every peer it adds. The changes the placement driver makes, in
// TiKV's order:
//
//	add a learner                simple change: AddLearnerNode
//	promote learners / demote    joint consensus, left explicitly: enter
//	  voters                     with AddNode / AddLearnerNode (learner ->
//	                             IncomingVoter, voter -> DemotingVoter),
//	                             then an empty change leaves the joint
//	                             state (IncomingVoter -> Voter,
//	                             DemotingVoter -> Learner)
//	remove a learner             simple change: RemoveNode
//
// So a replica votes only once it is a voter of a configuration, and
// every configuration in between is one etcd raft's joint consensus makes
// safe: votes only from voters. Each applied change bumps the epoch's
// conf version; a change decided under an older conf version is refused
// at apply on every replica alike (not passed to ApplyConfChange, which
// etcd raft allows), and its proposer gets EpochNotMatch.

// ChangeKind is one step of a membership change.
type ChangeKind int

// The membership changes ChangePeers accepts.
const (
	// AddLearner adds a new replica as a learner.
	AddLearner ChangeKind = iota
	// PromoteLearner makes a learner a voter (joint consensus).
	PromoteLearner
	// DemoteVoter makes a voter a learner (joint consensus).
	DemoteVoter
	// RemovePeer removes a learner (or, as a simple change, a voter).
	RemovePeer
	// LeaveJoint leaves the joint state a promotion or demotion entered.
	LeaveJoint
)

func (k ChangeKind) String() string {
	return [...]string{"add-learner", "promote", "demote", "remove", "leave-joint"}[k]
}

// PeerChange is one change of a ChangePeers call.
type PeerChange struct {
	Kind ChangeKind
	Peer *kvpb.Peer // id and store; nil for LeaveJoint
}

// confChangeCmd is the decoded context of a conf change entry.
type confChangeCmd struct {
	id               uint64
	confVer, version uint64
	// stores maps every peer the change names to its store.
	stores map[uint64]uint64
}

// encodeConfChangeContext: cmdConfChange | id | conf_ver | version | n (4) | n x (peer id, store id)
func encodeConfChangeContext(id, confVer, version uint64, peers []*kvpb.Peer) []byte {
	data := make([]byte, 0, cmdHeaderLen+2*8+4+16*len(peers))
	data = append(data, cmdConfChange)
	data = binary.BigEndian.AppendUint64(data, id)
	data = binary.BigEndian.AppendUint64(data, confVer)
	data = binary.BigEndian.AppendUint64(data, version)
	data = binary.BigEndian.AppendUint32(data, uint32(len(peers)))
	for _, p := range peers {
		data = binary.BigEndian.AppendUint64(data, p.Id)
		data = binary.BigEndian.AppendUint64(data, p.StoreId)
	}
	return data
}

func decodeConfChangeContext(data []byte) (confChangeCmd, error) {
	if len(data) < cmdHeaderLen+2*8+4 || data[0] != cmdConfChange {
		return confChangeCmd{}, fmt.Errorf("raftstore: conf change context of %d bytes", len(data))
	}
	c := confChangeCmd{
		id:      binary.BigEndian.Uint64(data[1:9]),
		confVer: binary.BigEndian.Uint64(data[9:17]),
		version: binary.BigEndian.Uint64(data[17:25]),
		stores:  map[uint64]uint64{},
	}
	n := binary.BigEndian.Uint32(data[25:29])
	body := data[29:]
	if uint64(len(body)) != 16*uint64(n) {
		return confChangeCmd{}, fmt.Errorf("raftstore: conf change %d: context is truncated", c.id)
	}
	for i := 0; i < int(n); i++ {
		c.stores[binary.BigEndian.Uint64(body[16*i:])] = binary.BigEndian.Uint64(body[16*i+8:])
	}
	return c, nil
}

// buildConfChange turns PeerChanges into the raft change to propose.
// Promotions and demotions enter a joint configuration that must be left
// explicitly (LeaveJoint), so the caller sees the joint state in the
// descriptor and the placement driver finishes it even after a leader
// change.
func buildConfChange(changes []PeerChange) (*pb.ConfChangeV2, []*kvpb.Peer, error) {
	cc := &pb.ConfChangeV2{}
	var peers []*kvpb.Peer
	joint := false
	for _, c := range changes {
		var t pb.ConfChangeType
		switch c.Kind {
		case LeaveJoint:
			if len(changes) != 1 {
				return nil, nil, errors.New("raftstore: leaving the joint state is a change of its own")
			}
			return cc, nil, nil
		case AddLearner:
			t = pb.ConfChangeType_ConfChangeAddLearnerNode
		case PromoteLearner:
			t, joint = pb.ConfChangeType_ConfChangeAddNode, true
		case DemoteVoter:
			t, joint = pb.ConfChangeType_ConfChangeAddLearnerNode, true
		case RemovePeer:
			t = pb.ConfChangeType_ConfChangeRemoveNode
		}
		if c.Peer == nil || c.Peer.Id == 0 || c.Peer.StoreId == 0 {
			return nil, nil, fmt.Errorf("raftstore: %v needs a peer id and store", c.Kind)
		}
		cc.Changes = append(cc.Changes, &pb.ConfChangeSingle{Type: t.Enum(), NodeId: proto.Uint64(c.Peer.Id)})
		peers = append(peers, c.Peer)
	}
	if len(cc.Changes) == 0 {
		return nil, nil, errors.New("raftstore: no membership change")
	}
	if joint {
		cc.Transition = pb.ConfChangeTransition_ConfChangeTransitionJointExplicit.Enum()
	} else if len(cc.Changes) > 1 {
		return nil, nil, errors.New("raftstore: adding or removing several peers needs one change each")
	}
	return cc, peers, nil
}

// InJoint reports whether r's membership is in a joint configuration.
func InJoint(r *kvpb.Region) bool {
	for _, p := range r.Peers {
		if p.Role == kvpb.PeerRole_IncomingVoter || p.Role == kvpb.PeerRole_DemotingVoter {
			return true
		}
	}
	return false
}

// IsVoter reports whether p votes in the region's incoming configuration.
func IsVoter(p *kvpb.Peer) bool {
	return p.Role == kvpb.PeerRole_Voter || p.Role == kvpb.PeerRole_IncomingVoter
}

// confStateOf is the Raft configuration r's peers and roles describe.
func confStateOf(r *kvpb.Region) *pb.ConfState {
	cs := &pb.ConfState{}
	joint := InJoint(r)
	for _, p := range r.Peers {
		switch p.Role {
		case kvpb.PeerRole_Voter:
			cs.Voters = append(cs.Voters, p.Id)
			if joint {
				cs.VotersOutgoing = append(cs.VotersOutgoing, p.Id)
			}
		case kvpb.PeerRole_Learner:
			cs.Learners = append(cs.Learners, p.Id)
		case kvpb.PeerRole_IncomingVoter:
			cs.Voters = append(cs.Voters, p.Id)
		case kvpb.PeerRole_DemotingVoter:
			cs.VotersOutgoing = append(cs.VotersOutgoing, p.Id)
			cs.LearnersNext = append(cs.LearnersNext, p.Id)
		}
	}
	for _, s := range [][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		slices.Sort(s)
	}
	return cs
}

// sameConfState compares two configurations as sets.
func sameConfState(a, b *pb.ConfState) bool {
	norm := func(s []uint64) []uint64 { s = slices.Clone(s); slices.Sort(s); return s }
	return slices.Equal(norm(a.Voters), norm(b.Voters)) && slices.Equal(norm(a.Learners), norm(b.Learners)) &&
		slices.Equal(norm(a.VotersOutgoing), norm(b.VotersOutgoing)) && slices.Equal(norm(a.LearnersNext), norm(b.LearnersNext))
}

// applyConfChangeToRegion computes the descriptor a conf change leaves
// region with, or why it must be refused. Deterministic: every replica
// decides the same from the same region and entry. The roles follow etcd
// raft's confchange package, so confStateOf(result) is the configuration
// raft reaches by ApplyConfChange (the store checks it).
func applyConfChangeToRegion(region *kvpb.Region, cc *pb.ConfChangeV2, c confChangeCmd) (*kvpb.Region, error) {
	e := region.GetEpoch()
	if c.confVer != e.GetConfVer() || c.version != e.GetVersion() {
		return nil, errEpochChanged
	}
	out := proto.Clone(region).(*kvpb.Region)
	out.Epoch.ConfVer++
	find := func(id uint64) int {
		return slices.IndexFunc(out.Peers, func(p *kvpb.Peer) bool { return p.Id == id })
	}
	if cc.LeaveJoint() {
		if !InJoint(region) {
			return nil, fmt.Errorf("%w: region %d is not in a joint configuration", ErrInvalidConfChange, region.Id)
		}
		for _, p := range out.Peers {
			switch p.Role {
			case kvpb.PeerRole_IncomingVoter:
				p.Role = kvpb.PeerRole_Voter
			case kvpb.PeerRole_DemotingVoter:
				p.Role = kvpb.PeerRole_Learner
			}
		}
		return out, nil
	}
	if InJoint(region) {
		return nil, fmt.Errorf("%w: region %d is in a joint configuration; leave it first", ErrInvalidConfChange, region.Id)
	}
	_, joint := cc.EnterJoint()
	for _, ch := range cc.Changes {
		id := ch.GetNodeId()
		i := find(id)
		switch ch.GetType() {
		case pb.ConfChangeType_ConfChangeAddNode:
			switch {
			case i < 0 && !joint:
				out.Peers = append(out.Peers, &kvpb.Peer{Id: id, StoreId: c.stores[id], Role: kvpb.PeerRole_Voter})
			case i >= 0 && out.Peers[i].Role == kvpb.PeerRole_Learner:
				if joint {
					out.Peers[i].Role = kvpb.PeerRole_IncomingVoter
				} else {
					out.Peers[i].Role = kvpb.PeerRole_Voter
				}
			default:
				return nil, fmt.Errorf("%w: peer %d of region %d cannot become a voter", ErrInvalidConfChange, id, region.Id)
			}
		case pb.ConfChangeType_ConfChangeAddLearnerNode:
			switch {
			case i < 0 && !joint:
				out.Peers = append(out.Peers, &kvpb.Peer{Id: id, StoreId: c.stores[id], Role: kvpb.PeerRole_Learner})
			case i >= 0 && out.Peers[i].Role == kvpb.PeerRole_Voter && joint:
				out.Peers[i].Role = kvpb.PeerRole_DemotingVoter
			default:
				return nil, fmt.Errorf("%w: peer %d of region %d cannot become a learner", ErrInvalidConfChange, id, region.Id)
			}
		case pb.ConfChangeType_ConfChangeRemoveNode:
			if i < 0 || joint {
				return nil, fmt.Errorf("%w: peer %d of region %d cannot be removed", ErrInvalidConfChange, id, region.Id)
			}
			out.Peers = slices.Delete(out.Peers, i, i+1)
		default:
			return nil, fmt.Errorf("%w: unsupported change %v", ErrInvalidConfChange, ch.GetType())
		}
		if c.stores[id] == 0 && i < 0 {
			return nil, fmt.Errorf("%w: peer %d of region %d has no store", ErrInvalidConfChange, id, region.Id)
		}
	}
	voters := 0
	stores := map[uint64]bool{}
	for _, p := range out.Peers {
		if IsVoter(p) {
			voters++
		}
		if stores[p.StoreId] {
			return nil, fmt.Errorf("%w: region %d would have two replicas on store %d", ErrInvalidConfChange, region.Id, p.StoreId)
		}
		stores[p.StoreId] = true
	}
	if voters == 0 {
		return nil, fmt.Errorf("%w: region %d would have no voter", ErrInvalidConfChange, region.Id)
	}
	return out, nil
}

// ErrInvalidConfChange is wrapped by errors for a membership change that
// cannot apply to the region as it is.
var ErrInvalidConfChange = errors.New("raftstore: invalid membership change")
