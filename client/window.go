package client

import "google.golang.org/grpc"

// Flow-control windows of the gRPC connections between nodes and from
// clients (KV requests, PD calls, Raft messages and snapshots).
//
// Without a window of its own, grpc-go sizes a connection's window with a
// bandwidth-delay estimator that sends a PING whenever a DATA frame
// arrives and none is outstanding. With small batched requests that is a
// PING and its ack, two more socket writes and two more wake-ups, on
// nearly every round trip. A fixed window at least the default 64 KiB
// turns the estimator off; these are large enough that a snapshot stream
// is not held back by flow control on a LAN.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// WindowDialOptions are the dial options that fix the flow-control
// windows (see above). NewGRPCRouter and Connect include them.
func WindowDialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(connWindow)}
}

// WindowServerOptions are the server side of WindowDialOptions.
func WindowServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(connWindow)}
}
