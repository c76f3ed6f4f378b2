package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-db/strata/kvpb"
)

// Connect returns a client of the cluster that the nodes at endpoints (the
// gRPC addresses of any of its nodes, --advertise-addr) belong to. Any
// node serves the placement driver's API, forwarding to PD's leader, so
// one reachable endpoint is enough; the others are tried in turn when
// connecting. Close closes the connections too.
func Connect(ctx context.Context, endpoints []string, opts Options) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("client: no endpoints")
	}
	var last error
	for _, ep := range endpoints {
		conn, err := grpc.NewClient(ep, append(WindowDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			last = err
			continue
		}
		pd := kvpb.NewPDClient(conn)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := pd.Tso(pctx, &kvpb.TsoRequest{Count: 1})
		cancel()
		if err == nil && resp.Error != nil {
			err = errors.New(resp.Error.Message)
		}
		if err != nil {
			conn.Close()
			last = fmt.Errorf("%s: %w", ep, err)
			continue
		}
		router := NewGRPCRouter(pd)
		c := New(pd, router, opts)
		c.closers = append(c.closers, func() { router.Close() }, func() { conn.Close() })
		return c, nil
	}
	return nil, fmt.Errorf("client: no endpoint answered: %w", last)
}
