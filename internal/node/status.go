package node

import (
	"strings"

	"context"
	"fmt"
	"github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"net/http"
	"net/url"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// /healthz and /status.

// handleHealth answers 200 once the node serves: every region it holds a
// replica of has a leader somewhere, and PD answers. 503 with the reason
// otherwise.
func (n *Node) handleHealth(w http.ResponseWriter, r *http.Request) {
	for _, p := range n.store.Peers() {
		if p.Initialized() && p.LeaderOf() == 0 {
			http.Error(w, fmt.Sprintf("region %d has no leader\n", p.RegionID()), http.StatusServiceUnavailable)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := n.pd.NextTimestampAnywhere(ctx); err != nil {
		http.Error(w, fmt.Sprintf("the placement driver does not answer: %v\n", err), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// StatusJSON is the cluster's state as /status serves it and `strata
// status` prints it.
type StatusJSON struct {
	ClusterID     string       `json:"cluster_id"`
	Replicas      uint32       `json:"replicas"`
	PDLeaderStore uint64       `json:"pd_leader_store"`
	GCSafePoint   uint64       `json:"gc_safe_point"`
	Nodes         []NodeJSON   `json:"nodes"`
	Regions       []RegionJSON `json:"regions"`
	// Operators are PD's most recent operators, newest last.
	Operators []OperatorJSON `json:"operators,omitempty"`
}

// OperatorJSON is one entry of PD's operator log.
type OperatorJSON struct {
	Time   string `json:"time"`
	Region uint64 `json:"region"`
	Kind   string `json:"kind"`
	Store  uint64 `json:"store,omitempty"` // the store of the peer it adds, promotes, removes or leads
	Reason string `json:"reason"`
}

// NodeJSON is one node (store) in StatusJSON.
type NodeJSON struct {
	ID            uint64 `json:"id"`
	Address       string `json:"address"`
	SQLAddress    string `json:"sql_address,omitempty"`
	RESPAddress   string `json:"redis_address,omitempty"`
	HTTPAddress   string `json:"http_address,omitempty"`
	Version       string `json:"version,omitempty"`
	Up            bool   `json:"up"`
	Since         string `json:"since"`
	LastHeartbeat string `json:"last_heartbeat"`
	Replicas      uint32 `json:"replicas"`
	Leaders       uint32 `json:"leaders"`
	// State: serving, draining, decommissioning or decommissioned.
	State            string `json:"state"`
	RegionSize       uint64 `json:"region_size"` // approximate bytes of its replicas
	ReadBytesPerSec  uint64 `json:"read_bytes_per_sec"`
	WriteBytesPerSec uint64 `json:"write_bytes_per_sec"`
	ReadQPS          uint64 `json:"read_qps"`
	WriteQPS         uint64 `json:"write_qps"`
	Operators        uint32 `json:"operators"` // in flight
}

// RegionJSON is one region in StatusJSON. Keys are URL query-escaped.
type RegionJSON struct {
	ID       uint64 `json:"id"`
	StartKey string `json:"start_key"`
	EndKey   string `json:"end_key"`
	// StartLabel and EndLabel print the boundaries as TiDB does
	// (t_{table}_r_{handle}, t_{table}_i_{index}_..., hex otherwise).
	StartLabel      string         `json:"start_label,omitempty"`
	EndLabel        string         `json:"end_label,omitempty"`
	Version         uint64         `json:"version"`
	ConfVersion     uint64         `json:"conf_version"`
	LeaderStore     uint64         `json:"leader_store"`
	System          bool           `json:"system,omitempty"`
	UnderReplicated bool           `json:"under_replicated"`
	Peers           []RegionPeerJS `json:"peers"`
	ApproximateSize uint64         `json:"approximate_size"`
	ApproximateKeys uint64         `json:"approximate_keys"`
	ReadBytes       uint64         `json:"read_bytes_per_sec"`
	WriteBytes      uint64         `json:"write_bytes_per_sec"`
	ReadQPS         uint64         `json:"read_qps"`
	WriteQPS        uint64         `json:"write_qps"`
}

// RegionPeerJS is one replica in RegionJSON: its role and how many log
// entries it lags its leader's commit index (replication lag).
type RegionPeerJS struct {
	ID    uint64 `json:"id"`
	Store uint64 `json:"store"`
	Role  string `json:"role"`
	Match uint64 `json:"match"`
	Lag   uint64 `json:"lag"`
}

// Status returns the cluster's state from PD's leader.
func (n *Node) Status(ctx context.Context) (*StatusJSON, error) {
	resp, err := n.pd.ClusterStatus(ctx, &kvpb.ClusterStatusRequest{})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("%s", resp.Error.Message)
	}
	out := &StatusJSON{ClusterID: fmt.Sprintf("%016x", resp.ClusterId), Replicas: resp.Replicas,
		PDLeaderStore: resp.PdLeaderStore, GCSafePoint: resp.GcSafePoint}
	for _, s := range resp.Stores {
		out.Nodes = append(out.Nodes, NodeJSON{ID: s.Store.Id, Address: s.Store.Address, SQLAddress: s.Store.SqlAddress,
			RESPAddress: s.Store.RespAddress, HTTPAddress: s.Store.HttpAddress, Version: s.Store.Version, Up: s.Up,
			Since:         time.UnixMilli(s.StateSinceUnixMs).UTC().Format(time.RFC3339),
			LastHeartbeat: time.UnixMilli(s.LastHeartbeatUnixMs).UTC().Format(time.RFC3339),
			Replicas:      s.ReplicaCount, Leaders: s.LeaderCount,
			State: StoreStateName(s.Store.State), RegionSize: s.RegionSize,
			ReadBytesPerSec: s.ReadBytesPerSec, WriteBytesPerSec: s.WriteBytesPerSec, ReadQPS: s.ReadQps, WriteQPS: s.WriteQps,
			Operators: s.Operators})
	}
	for _, o := range resp.Operators {
		out.Operators = append(out.Operators, OperatorJSON{Time: time.UnixMilli(o.UnixMs).UTC().Format(time.RFC3339),
			Region: o.Operator.RegionId, Kind: o.Operator.Kind.String(), Store: o.Operator.Peer.GetStoreId(), Reason: o.Operator.Reason})
	}
	for _, r := range resp.Regions {
		rj := RegionJSON{ID: r.Region.Id, StartKey: url.QueryEscape(string(r.Region.StartKey)),
			EndKey: url.QueryEscape(string(r.Region.EndKey)), Version: r.Region.Epoch.GetVersion(),
			StartLabel: sql.FormatRegionKey(r.Region.StartKey), EndLabel: sql.FormatRegionKey(r.Region.EndKey),
			ConfVersion: r.Region.Epoch.GetConfVer(), LeaderStore: r.Leader.GetStoreId(),
			System: r.Region.Id == 1, UnderReplicated: r.UnderReplicated,
			ApproximateSize: r.ApproximateSize, ApproximateKeys: r.ApproximateKeys, ReadBytes: r.ReadBytesPerSec,
			WriteBytes: r.WriteBytesPerSec, ReadQPS: r.ReadQps, WriteQPS: r.WriteQps}
		match := map[uint64]uint64{}
		for _, pr := range r.Progress {
			match[pr.PeerId] = pr.Match
		}
		for _, p := range r.Region.Peers {
			pj := RegionPeerJS{ID: p.Id, Store: p.StoreId, Role: roleName(p.Role), Match: match[p.Id]}
			if r.CommitIndex > pj.Match {
				pj.Lag = r.CommitIndex - pj.Match
			}
			rj.Peers = append(rj.Peers, pj)
		}
		out.Regions = append(out.Regions, rj)
	}
	return out, nil
}

// StoreStateName is a store state as /status and the CLI spell it.
func StoreStateName(s kvpb.StoreState) string {
	return strings.ToLower(s.String())
}

func roleName(r kvpb.PeerRole) string {
	switch r {
	case kvpb.PeerRole_Learner:
		return "learner"
	case kvpb.PeerRole_IncomingVoter:
		return "incoming-voter"
	case kvpb.PeerRole_DemotingVoter:
		return "demoting-voter"
	}
	return "voter"
}

func (n *Node) handleStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	st, err := n.Status(ctx)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// clusterInfo is the cluster's state for INFORMATION_SCHEMA.CLUSTER_NODES
// and REGIONS.
func (n *Node) clusterInfo() (*infoschema.ClusterInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := n.Status(ctx)
	if err != nil {
		return nil, err
	}
	out := &infoschema.ClusterInfo{}
	for _, nd := range st.Nodes {
		state := "Up"
		if !nd.Up {
			state = "Down"
		}
		out.Nodes = append(out.Nodes, infoschema.ClusterNode{ID: nd.ID, Address: nd.Address, SQLAddress: nd.SQLAddress,
			RedisAddress: nd.RESPAddress, HTTPAddress: nd.HTTPAddress, Version: nd.Version, State: state, Since: nd.Since,
			Replicas: uint64(nd.Replicas), Leaders: uint64(nd.Leaders), PDLeader: nd.ID == st.PDLeaderStore,
			Placement: nd.State, RegionSize: nd.RegionSize, ReadBytesPerSec: nd.ReadBytesPerSec,
			WriteBytesPerSec: nd.WriteBytesPerSec, QPS: nd.ReadQPS + nd.WriteQPS})
	}
	for _, r := range st.Regions {
		cr := infoschema.ClusterRegion{ID: r.ID, StartKey: r.StartKey, EndKey: r.EndKey, LeaderNode: r.LeaderStore,
			Version: r.Version, ConfVersion: r.ConfVersion, UnderReplicated: r.UnderReplicated, System: r.System,
			ApproximateSize: r.ApproximateSize, ApproximateKeys: r.ApproximateKeys, ReadBytesPerSec: r.ReadBytes,
			WriteBytesPerSec: r.WriteBytes, QPS: r.ReadQPS + r.WriteQPS}
		var peers []string
		for _, p := range r.Peers {
			peers = append(peers, fmt.Sprintf("%d:%s", p.Store, p.Role))
			cr.MaxLag = max(cr.MaxLag, p.Lag)
		}
		cr.Peers = strings.Join(peers, " ")
		out.Regions = append(out.Regions, cr)
	}
	return out, nil
}
