package raftstore

import (
	"encoding/binary"
	"fmt"

	"github.com/strata-db/strata/kvpb"
)

// Commands are the payloads of normal Raft entries. Every command starts
// with its type byte and an 8-byte proposal id (which wakes the proposer on
// the replica that proposed it); the rest depends on the type:
//
//	cmdWriteBatch  1 | id | batch repr                      (older logs; no epoch check)
//	cmdSplit       2 | id | conf_ver | version | new region id | peer count (4) | peer ids | split key
//	cmdWrite       3 | id | version | batch repr
//	cmdConfChange  4 | id | ...                             (the context of a ConfChangeV2 entry; conf.go)
//	cmdPrepareMerge  5 | id | conf_ver | version | min index | target region   (merge.go)
//	cmdCommitMerge   6 | id | conf_ver | version | prepare index | source len (4) | source region |
//	                 entry count (4) | entries, each length (4) | entry
//	cmdRollbackMerge 7 | id | prepare index
//
// A write carries the region epoch version it was computed under; it is
// applied only if the region still has that version when the entry is
// applied, so a write proposed before a split and committed after it is
// rejected (EpochNotMatch) on every replica alike instead of landing in a
// range the region no longer owns.
const (
	cmdWriteBatch byte = 1
	cmdSplit      byte = 2
	cmdWrite      byte = 3
	cmdConfChange byte = 4

	cmdPrepareMerge  byte = 5
	cmdCommitMerge   byte = 6
	cmdRollbackMerge byte = 7
)

const cmdHeaderLen = 9 // type + proposal id

// command is a decoded entry payload. Slices alias the entry's data.
type command struct {
	kind byte
	id   uint64
	// version is the epoch version a cmdWrite was proposed under.
	version uint64
	repr    []byte // cmdWrite, cmdWriteBatch
	split   *splitCmd
	prepare *prepareMergeCmd
	commit  *commitMergeCmd
	// rollback is the PrepareMerge index a cmdRollbackMerge undoes.
	rollback uint64
}

// splitCmd splits a region at splitKey: the region keeps [start, splitKey),
// a new region newRegionID gets [splitKey, end). Its ids were allocated
// before proposing, so that every replica creates the same region.
type splitCmd struct {
	// epoch the split was proposed under; it applies only if unchanged.
	confVer, version uint64
	newRegionID      uint64
	// newPeerIDs[i] is the new region's replica on the store of the
	// parent's Peers[i].
	newPeerIDs []uint64
	splitKey   []byte
}

func encodeWrite(id, version uint64, repr []byte) []byte {
	data := make([]byte, cmdHeaderLen+8+len(repr))
	data[0] = cmdWrite
	binary.BigEndian.PutUint64(data[1:9], id)
	binary.BigEndian.PutUint64(data[9:17], version)
	copy(data[17:], repr)
	return data
}

func encodeSplit(id uint64, c *splitCmd) []byte {
	data := make([]byte, 0, cmdHeaderLen+3*8+4+8*len(c.newPeerIDs)+len(c.splitKey))
	data = append(data, cmdSplit)
	data = binary.BigEndian.AppendUint64(data, id)
	data = binary.BigEndian.AppendUint64(data, c.confVer)
	data = binary.BigEndian.AppendUint64(data, c.version)
	data = binary.BigEndian.AppendUint64(data, c.newRegionID)
	data = binary.BigEndian.AppendUint32(data, uint32(len(c.newPeerIDs)))
	for _, p := range c.newPeerIDs {
		data = binary.BigEndian.AppendUint64(data, p)
	}
	return append(data, c.splitKey...)
}

// decodeCommand parses an entry payload. A malformed payload is an error:
// the log holds only what this store or its peers proposed, so it means
// corruption or a version skew, and the replica must stop.
func decodeCommand(data []byte) (command, error) {
	if len(data) < cmdHeaderLen {
		return command{}, fmt.Errorf("raftstore: command of %d bytes", len(data))
	}
	c := command{kind: data[0], id: binary.BigEndian.Uint64(data[1:9])}
	body := data[cmdHeaderLen:]
	switch c.kind {
	case cmdWriteBatch:
		c.repr = body
	case cmdWrite:
		if len(body) < 8 {
			return command{}, fmt.Errorf("raftstore: write command %d is truncated", c.id)
		}
		c.version = binary.BigEndian.Uint64(body[:8])
		c.repr = body[8:]
	case cmdSplit:
		if len(body) < 3*8+4 {
			return command{}, fmt.Errorf("raftstore: split command %d is truncated", c.id)
		}
		s := &splitCmd{
			confVer:     binary.BigEndian.Uint64(body[0:8]),
			version:     binary.BigEndian.Uint64(body[8:16]),
			newRegionID: binary.BigEndian.Uint64(body[16:24]),
		}
		n := binary.BigEndian.Uint32(body[24:28])
		body = body[28:]
		if uint64(len(body)) < 8*uint64(n) {
			return command{}, fmt.Errorf("raftstore: split command %d is truncated", c.id)
		}
		s.newPeerIDs = make([]uint64, n)
		for i := range s.newPeerIDs {
			s.newPeerIDs[i] = binary.BigEndian.Uint64(body[8*i:])
		}
		s.splitKey = body[8*n:]
		c.split = s
	case cmdPrepareMerge:
		pm, err := decodePrepareMerge(body)
		if err != nil {
			return command{}, fmt.Errorf("raftstore: prepare-merge command %d: %w", c.id, err)
		}
		c.prepare = pm
	case cmdCommitMerge:
		cm, err := decodeCommitMerge(body)
		if err != nil {
			return command{}, fmt.Errorf("raftstore: commit-merge command %d: %w", c.id, err)
		}
		c.commit = cm
	case cmdRollbackMerge:
		if len(body) != 8 {
			return command{}, fmt.Errorf("raftstore: rollback-merge command %d is truncated", c.id)
		}
		c.rollback = binary.BigEndian.Uint64(body)
	default:
		return command{}, fmt.Errorf("raftstore: unknown command type %d", c.kind)
	}
	return c, nil
}

// splitRegion computes the two regions a split produces from parent, or
// why it cannot apply. It is deterministic (every replica decides the same
// from the same parent and command), and a refusal is returned to the
// proposer, not treated as a replica failure.
func splitRegion(parent *kvpb.Region, c *splitCmd) (left, right *kvpb.Region, err error) {
	e := parent.GetEpoch()
	if c.confVer != e.GetConfVer() || c.version != e.GetVersion() {
		return nil, nil, errEpochChanged
	}
	if err := validSplitKey(parent, c.splitKey); err != nil {
		return nil, nil, err
	}
	if InJoint(parent) {
		return nil, nil, fmt.Errorf("raftstore: split of region %d: its membership is in a joint configuration", parent.Id)
	}
	if c.newRegionID == 0 || c.newRegionID == parent.Id {
		return nil, nil, fmt.Errorf("raftstore: split of region %d: bad new region id %d", parent.Id, c.newRegionID)
	}
	if len(c.newPeerIDs) != len(parent.Peers) {
		return nil, nil, fmt.Errorf("raftstore: split of region %d: %d new peer ids for %d peers", parent.Id, len(c.newPeerIDs), len(parent.Peers))
	}
	epoch := &kvpb.RegionEpoch{ConfVer: e.GetConfVer(), Version: e.GetVersion() + 1}
	key := append([]byte(nil), c.splitKey...)
	right = &kvpb.Region{Id: c.newRegionID, StartKey: key, EndKey: parent.EndKey, Epoch: epoch}
	seen := make(map[uint64]bool, len(c.newPeerIDs))
	for i, pp := range parent.Peers {
		id := c.newPeerIDs[i]
		if id == 0 || seen[id] {
			return nil, nil, fmt.Errorf("raftstore: split of region %d: bad new peer id %d", parent.Id, id)
		}
		seen[id] = true
		right.Peers = append(right.Peers, &kvpb.Peer{Id: id, StoreId: pp.StoreId, Role: pp.Role})
	}
	left = &kvpb.Region{Id: parent.Id, StartKey: parent.StartKey, EndKey: key,
		Epoch: &kvpb.RegionEpoch{ConfVer: epoch.ConfVer, Version: epoch.Version}, Peers: parent.Peers}
	return left, right, nil
}

// validSplitKey checks that key falls strictly inside r, so that both
// halves are non-empty.
func validSplitKey(r *kvpb.Region, key []byte) error {
	if len(key) == 0 || string(key) <= string(r.StartKey) {
		return fmt.Errorf("%w: %q is not above the start %q of region %d", ErrInvalidSplitKey, key, r.StartKey, r.Id)
	}
	if len(r.EndKey) > 0 && string(key) >= string(r.EndKey) {
		return fmt.Errorf("%w: %q is not below the end %q of region %d", ErrInvalidSplitKey, key, r.EndKey, r.Id)
	}
	return nil
}
