// Package kvpb holds the protobuf messages and gRPC services of Strata's KV
// and placement-driver APIs (see kvpb.proto).
package kvpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative kvpb.proto raftmsg.proto
