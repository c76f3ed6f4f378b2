package infoschema

import (
	"github.com/strata-db/strata/internal/sql/types"
)

// The cluster's own tables: INFORMATION_SCHEMA.CLUSTER_NODES (every node,
// its addresses, liveness and replica and leader counts) and
// INFORMATION_SCHEMA.REGIONS (every region, its range, leader, replicas,
// replication lag, size and traffic), the same data as `strata status` and /status.
// Their rows come from the placement driver when a statement runs, not
// from the catalog.

// ClusterNode is a row of CLUSTER_NODES.
type ClusterNode struct {
	ID                                 uint64
	Address, SQLAddress, RedisAddress  string
	HTTPAddress, Version, State, Since string
	Replicas, Leaders                  uint64
	PDLeader                           bool
	// Placement: serving, draining, decommissioning or decommissioned.
	Placement                         string
	RegionSize                        uint64
	ReadBytesPerSec, WriteBytesPerSec uint64
	QPS                               uint64
}

// ClusterRegion is a row of REGIONS.
type ClusterRegion struct {
	ID                                uint64
	StartKey, EndKey                  string
	LeaderNode                        uint64
	Peers                             string // node:role, space separated
	Version, ConfVersion              uint64
	MaxLag                            uint64 // log entries the slowest replica lags the leader's commit index
	UnderReplicated, System           bool
	ApproximateSize, ApproximateKeys  uint64
	ReadBytesPerSec, WriteBytesPerSec uint64
	QPS                               uint64
}

// ClusterInfo is what a ClusterSource returns.
type ClusterInfo struct {
	Nodes   []ClusterNode
	Regions []ClusterRegion
}

// ClusterSource reads the cluster's state (from PD's leader).
type ClusterSource func() (*ClusterInfo, error)

// clusterTableDefs are the cluster tables' columns (in tableDefs).
var clusterTableDefs = map[string][]colDef{
	"CLUSTER_NODES": {n("NODE_ID"), s("ADDRESS"), s("SQL_ADDRESS"), s("REDIS_ADDRESS"), s("HTTP_ADDRESS"),
		s("VERSION"), s("STATE"), s("SINCE"), n("REPLICAS"), n("LEADERS"), s("IS_PD_LEADER"),
		s("PLACEMENT_STATE"), n("REGION_SIZE"), n("READ_BYTES_PER_SEC"), n("WRITE_BYTES_PER_SEC"), n("QPS")},
	"REGIONS": {n("REGION_ID"), s("START_KEY"), s("END_KEY"), n("LEADER_NODE"), s("PEERS"), n("VERSION"),
		n("CONF_VERSION"), n("REPLICATION_LAG"), s("UNDER_REPLICATED"), s("IS_SYSTEM"),
		n("APPROXIMATE_SIZE"), n("APPROXIMATE_KEYS"), n("READ_BYTES_PER_SEC"), n("WRITE_BYTES_PER_SEC"), n("QPS")},
	// PROCESSLIST: the sessions of the node running the statement, as
	// SHOW FULL PROCESSLIST lists them (rows from a ProcessSource).
	"PROCESSLIST": {n("ID"), s("USER"), s("HOST"), s("DB"), s("COMMAND"), n("TIME"), s("STATE"), s("INFO")},
}

// ProcessSource returns the rows of PROCESSLIST now.
type ProcessSource func() [][]types.Datum

// IsProcessTable reports whether name is PROCESSLIST, whose rows come from
// the node's sessions.
func IsProcessTable(name string) bool { return upper(name) == "PROCESSLIST" }

// IsClusterTable reports whether an INFORMATION_SCHEMA table's rows come
// from the cluster rather than the catalog.
func IsClusterTable(name string) bool {
	switch upper(name) {
	case "CLUSTER_NODES", "REGIONS":
		return true
	}
	return false
}

// ClusterRows returns the rows of a cluster table now. Without a source
// (an engine outside a node) the tables are empty; an error reading the
// cluster leaves them empty too.
func ClusterRows(src ClusterSource, name string) [][]types.Datum {
	b := &builder{}
	if src == nil {
		return nil
	}
	info, err := src()
	if err != nil || info == nil {
		return nil
	}
	switch upper(name) {
	case "CLUSTER_NODES":
		for _, n := range info.Nodes {
			b.add(int64(n.ID), n.Address, n.SQLAddress, n.RedisAddress, n.HTTPAddress, n.Version, n.State, n.Since,
				int64(n.Replicas), int64(n.Leaders), yesNo(n.PDLeader), n.Placement, int64(n.RegionSize),
				int64(n.ReadBytesPerSec), int64(n.WriteBytesPerSec), int64(n.QPS))
		}
	case "REGIONS":
		for _, r := range info.Regions {
			b.add(int64(r.ID), r.StartKey, r.EndKey, int64(r.LeaderNode), r.Peers, int64(r.Version), int64(r.ConfVersion),
				int64(r.MaxLag), yesNo(r.UnderReplicated), yesNo(r.System), int64(r.ApproximateSize),
				int64(r.ApproximateKeys), int64(r.ReadBytesPerSec), int64(r.WriteBytesPerSec), int64(r.QPS))
		}
	}
	return b.rows
}

func yesNo(v bool) string {
	if v {
		return "YES"
	}
	return "NO"
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
