package pd

import (
	"context"
	"strings"

	"github.com/strata-db/strata/internal/deadlock"
	"github.com/strata-db/strata/kvpb"
)

// Deadlock detection. The cluster's wait-for graph (package deadlock) is
// kept by PD's leader: one node every node can find, as TiKV keeps it with
// the leader of its first region. Lock waiters on every store call Detect
// on their own PD server (the node wires it in as the KV service's
// detector); a server that is not the leader forwards the request like any
// PD request. A new leader starts with an empty graph, which waiters
// refill within a wait slice.

var _ deadlock.Service = (*Server)(nil)

// Detect runs a deadlock request on PD's leader's detector, forwarding it
// there from other nodes.
func (s *Server) Detect(ctx context.Context, req *kvpb.DeadlockRequest) (*kvpb.DeadlockResponse, error) {
	st, err := s.leading(ctx)
	if err == nil {
		return st.detector.Detect(ctx, req)
	}
	if hops(ctx) >= maxHops {
		return &kvpb.DeadlockResponse{Error: ErrNotLeader.Error()}, nil
	}
	last := ErrNotLeader.Error()
	for _, addr := range s.fwd.candidates() {
		cc, err := s.fwd.clientConn(addr)
		if err != nil {
			last = err.Error()
			continue
		}
		fctx, cancel := context.WithTimeout(forwarded(ctx), forwardTimeout)
		resp, err := kvpb.NewDeadlockDetectorClient(cc).Detect(fctx, req)
		cancel()
		if err == nil && !strings.Contains(resp.Error, ErrNotLeader.Error()) {
			return resp, nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = resp.Error
		}
		if ctx.Err() != nil {
			break
		}
	}
	s.fwd.dropHint()
	return &kvpb.DeadlockResponse{Error: last}, nil
}

// DeadlockService is the server as a kvpb.DeadlockDetectorServer, to
// register with gRPC.
func (s *Server) DeadlockService() kvpb.DeadlockDetectorServer { return deadlockService{s: s} }

type deadlockService struct {
	kvpb.UnimplementedDeadlockDetectorServer
	s *Server
}

func (d deadlockService) Detect(ctx context.Context, req *kvpb.DeadlockRequest) (*kvpb.DeadlockResponse, error) {
	return d.s.Detect(ctx, req)
}
