package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/internal/transport"
	"github.com/strata-db/strata/kvpb"
)

// ErrInvalidSplitKey is wrapped by SplitRegion errors for a key that cannot
// split a region: empty, or already the start of a region.
var ErrInvalidSplitKey = errors.New("node: invalid split key")

// splitAttempts bounds how often SplitRegion looks the region up again
// when a concurrent split changed it first.
const splitAttempts = 3

// SplitRegion splits the data region containing key at key: the region
// keeps the keys below key and a new region (ids from PD's allocator) gets
// key and the keys above it. Region keys are user keys, the keys the client
// routes by, and package mvcc stores every lock, version and write record
// of a user key under that key, so a split never separates one key's
// records. It returns once the split is applied and the new region has a
// ready leader (or a bounded wait for one ran out), after reporting both
// regions to PD, so a client that asks PD next sees them.
func (n *Node) SplitRegion(ctx context.Context, key []byte) (left, right *kvpb.Region, err error) {
	if len(key) == 0 {
		return nil, nil, fmt.Errorf("%w: the empty key starts the keyspace", ErrInvalidSplitKey)
	}
	for attempt := 1; ; attempt++ {
		r := n.dataRegion(key)
		if r == nil {
			return nil, nil, fmt.Errorf("node: no data region on this store holds %q", key)
		}
		if bytes.Equal(r.StartKey, key) {
			return nil, nil, fmt.Errorf("%w: %q is already the start of region %d", ErrInvalidSplitKey, key, r.Id)
		}
		p, _ := n.store.Peer(r.Id)
		if rerr := p.CheckRequest(nil); rerr != nil {
			return nil, nil, fmt.Errorf("node: cannot split region %d here: %s", r.Id, rerr.Message)
		}
		first, err := n.pd.AllocIDs(ctx, uint32(1+len(r.Peers)))
		if err != nil {
			return nil, nil, fmt.Errorf("node: allocate ids for a split: %w", err)
		}
		peerIDs := make([]uint64, len(r.Peers))
		for i := range peerIDs {
			peerIDs[i] = first + 1 + uint64(i)
		}
		left, right, err = n.store.Split(ctx, p, r.Epoch, key, first, peerIDs)
		var re *raftstore.RegionErr
		switch {
		case err == nil:
		case errors.As(err, &re) && re.E.EpochNotMatch != nil && attempt < splitAttempts:
			continue // split concurrently: find key's region again
		case errors.Is(err, raftstore.ErrInvalidSplitKey):
			return nil, nil, fmt.Errorf("%w: %v", ErrInvalidSplitKey, err)
		default:
			return nil, nil, fmt.Errorf("node: split region %d at %q: %w", r.Id, key, err)
		}
		break
	}
	n.waitReady(ctx, right.Id, 10*time.Second)
	n.heartbeat(ctx)
	return left, right, nil
}

// splitForPeer carries out a split another node asked for (SPLIT TABLE run
// there): only when this store leads the region holding key.
func (n *Node) splitForPeer(ctx context.Context, key []byte) (left, right *kvpb.Region, err error) {
	r := n.dataRegion(key)
	if r == nil {
		return nil, nil, transport.ErrNotLeader
	}
	if p, ok := n.store.Peer(r.Id); !ok || p.CheckRequest(nil) != nil {
		return nil, nil, transport.ErrNotLeader
	}
	left, right, err = n.SplitRegion(ctx, key)
	if errors.Is(err, ErrInvalidSplitKey) {
		return nil, nil, transport.ErrAlreadyBoundary
	}
	return left, right, err
}

// dataRegion returns the local data region (not PD's system region, which
// spans every key too) containing key.
func (n *Node) dataRegion(key []byte) *kvpb.Region {
	for _, r := range n.store.Regions() {
		if r.Id == pd.SystemRegionID {
			continue
		}
		if bytes.Compare(key, r.StartKey) >= 0 && (len(r.EndKey) == 0 || bytes.Compare(key, r.EndKey) < 0) {
			return r
		}
	}
	return nil
}

// waitReady waits until the local replica of region id is a leader ready
// to serve, for at most max.
func (n *Node) waitReady(ctx context.Context, id uint64, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if p, ok := n.store.Peer(id); ok && p.CheckRequest(nil) == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
	n.log.Warn("node: region split off has no ready leader yet", "region", id)
}

// regionJSON is a region as /admin shows it. Keys are URL query-escaped,
// so that they can be passed back as /admin/split?key=.
type regionJSON struct {
	ID          uint64    `json:"id"`
	StartKey    string    `json:"start_key"`
	EndKey      string    `json:"end_key"` // empty: the end of the keyspace
	Epoch       epochJSON `json:"epoch"`
	LeaderStore uint64    `json:"leader_store"` // 0: no leader known
	System      bool      `json:"system,omitempty"`
}

type epochJSON struct {
	ConfVer uint64 `json:"conf_ver"`
	Version uint64 `json:"version"`
}

func (n *Node) regionJSON(r *kvpb.Region) regionJSON {
	out := regionJSON{
		ID:       r.Id,
		StartKey: url.QueryEscape(string(r.StartKey)),
		EndKey:   url.QueryEscape(string(r.EndKey)),
		Epoch:    epochJSON{ConfVer: r.Epoch.GetConfVer(), Version: r.Epoch.GetVersion()},
		System:   r.Id == pd.SystemRegionID,
	}
	if p, ok := n.store.Peer(r.Id); ok {
		lid := p.LeaderOf()
		for _, rp := range r.Peers {
			if rp.Id == lid {
				out.LeaderStore = rp.StoreId
			}
		}
	}
	return out
}

// registerAdmin adds the admin endpoints to the HTTP listener:
//
//	POST /admin/split?key=<url-escaped user key>  split the data region holding key at key;
//	                                               200 {"left": region, "right": region},
//	                                               400 for a missing key or one that is already a boundary
//	GET  /admin/regions                            every local region, in key order
//	GET  /admin/tables                             table ids -> database, table and index names
//	                                               (the console names key ranges with it)
//	POST /admin/nodes/{id}/{drain|decommission|resume}
//	                                               set a node's state in PD; 200 {"id":, "state":},
//	                                               400 for an unknown node or a refused change
func (n *Node) registerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("POST /admin/split", n.handleSplit)
	mux.HandleFunc("GET /admin/regions", n.handleRegions)
	mux.HandleFunc("GET /admin/tables", n.handleTables) // console.go
	mux.HandleFunc("POST /admin/nodes/{id}/{action}", n.handleNodeState)
}

// SetNodeState drains, decommissions or resumes a node (store) of the
// cluster through PD.
func (n *Node) SetNodeState(ctx context.Context, id uint64, state kvpb.StoreState) (*kvpb.Store, error) {
	resp, err := n.pd.SetStoreState(ctx, &kvpb.SetStoreStateRequest{StoreId: id, State: state})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadRequest, resp.Error.Message)
	}
	return resp.Store, nil
}

// ErrBadRequest marks errors of a request that cannot be carried out as
// asked.
var ErrBadRequest = errors.New("refused")

func (n *Node) handleNodeState(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%q is not a node id", r.PathValue("id"))})
		return
	}
	states := map[string]kvpb.StoreState{"drain": kvpb.StoreState_Draining, "decommission": kvpb.StoreState_Decommissioning,
		"resume": kvpb.StoreState_Serving}
	state, ok := states[r.PathValue("action")]
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the action is drain, decommission or resume"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	st, err := n.SetNodeState(ctx, id, state)
	switch {
	case errors.Is(err, ErrBadRequest):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": strings.TrimPrefix(err.Error(), ErrBadRequest.Error()+": ")})
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"id": st.Id, "state": StoreStateName(st.State)})
	}
}

func (n *Node) handleSplit(w http.ResponseWriter, r *http.Request) {
	vals, ok := r.URL.Query()["key"]
	if !ok || len(vals) != 1 || vals[0] == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want exactly one non-empty key parameter: /admin/split?key=<url-escaped key>"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	left, right, err := n.SplitRegion(ctx, []byte(vals[0]))
	switch {
	case errors.Is(err, ErrInvalidSplitKey):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]regionJSON{"left": n.regionJSON(left), "right": n.regionJSON(right)})
	}
}

func (n *Node) handleRegions(w http.ResponseWriter, r *http.Request) {
	regions := n.store.Regions()
	out := make([]regionJSON, 0, len(regions))
	for _, reg := range regions {
		out = append(out, n.regionJSON(reg))
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
