package pd

import (
	"google.golang.org/protobuf/proto"

	"github.com/strata-db/strata/kvpb"
)

// ApplyOperator returns region r as it is once its leader carried op out
// (a copy; r is not changed): the model of a leader that the scheduler
// tests and the simulator (cmd/strata-sim) run the schedulers against. A
// new learner has not caught up (no progress) until the caller says so.
func ApplyOperator(r *kvpb.RegionStat, op *kvpb.Operator) *kvpb.RegionStat {
	out := proto.Clone(r).(*kvpb.RegionStat)
	reg := out.Region
	bump := func() { reg.Epoch.ConfVer++ }
	find := func(id uint64) *kvpb.Peer {
		for _, p := range reg.Peers {
			if p.Id == id {
				return p
			}
		}
		return nil
	}
	switch op.Kind {
	case kvpb.OperatorKind_AddLearner:
		reg.Peers = append(reg.Peers, &kvpb.Peer{Id: op.Peer.Id, StoreId: op.Peer.StoreId, Role: kvpb.PeerRole_Learner})
		bump()
	case kvpb.OperatorKind_PromoteLearner:
		if p := find(op.Peer.Id); p != nil {
			p.Role = kvpb.PeerRole_IncomingVoter
			bump()
		}
	case kvpb.OperatorKind_DemoteVoter:
		if p := find(op.Peer.Id); p != nil {
			p.Role = kvpb.PeerRole_DemotingVoter
			bump()
		}
	case kvpb.OperatorKind_LeaveJoint:
		for _, p := range reg.Peers {
			switch p.Role {
			case kvpb.PeerRole_IncomingVoter:
				p.Role = kvpb.PeerRole_Voter
			case kvpb.PeerRole_DemotingVoter:
				p.Role = kvpb.PeerRole_Learner
			}
		}
		bump()
	case kvpb.OperatorKind_RemovePeer:
		keep := reg.Peers[:0]
		for _, p := range reg.Peers {
			if p.Id != op.Peer.Id {
				keep = append(keep, p)
			}
		}
		reg.Peers = keep
		prog := out.Progress[:0]
		for _, pr := range out.Progress {
			if pr.PeerId != op.Peer.Id {
				prog = append(prog, pr)
			}
		}
		out.Progress = prog
		bump()
	case kvpb.OperatorKind_TransferLeader:
		if p := find(op.Peer.Id); p != nil {
			out.Leader = p
		}
	}
	return out
}
