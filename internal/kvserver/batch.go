package kvserver

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/strata-db/strata/kvpb"
)

// Batched commands: a client with several requests in flight to this
// store sends them on one stream (KvBatchCommands) instead of one RPC
// each, as TiKV's BatchCommands does. Every request runs in its own
// goroutine (a pessimistic lock may wait for seconds; it must not hold up
// the others), and the responses go back batched as they complete.

// batchMethod runs one request of a batch.
type batchMethod func(s *Server, ctx context.Context, req []byte) (proto.Message, error)

func method[Req proto.Message, Resp proto.Message](newReq func() Req, fn func(*Server, context.Context, Req) (Resp, error)) batchMethod {
	return func(s *Server, ctx context.Context, data []byte) (proto.Message, error) {
		req := newReq()
		if err := proto.Unmarshal(data, req); err != nil {
			return nil, err
		}
		return fn(s, ctx, req)
	}
}

var batchMethods = map[string]batchMethod{
	"KvGet":                 method(func() *kvpb.GetRequest { return &kvpb.GetRequest{} }, (*Server).KvGet),
	"KvBatchGet":            method(func() *kvpb.BatchGetRequest { return &kvpb.BatchGetRequest{} }, (*Server).KvBatchGet),
	"KvScan":                method(func() *kvpb.ScanRequest { return &kvpb.ScanRequest{} }, (*Server).KvScan),
	"KvPrewrite":            method(func() *kvpb.PrewriteRequest { return &kvpb.PrewriteRequest{} }, (*Server).KvPrewrite),
	"KvCommit":              method(func() *kvpb.CommitRequest { return &kvpb.CommitRequest{} }, (*Server).KvCommit),
	"KvBatchRollback":       method(func() *kvpb.BatchRollbackRequest { return &kvpb.BatchRollbackRequest{} }, (*Server).KvBatchRollback),
	"KvCheckTxnStatus":      method(func() *kvpb.CheckTxnStatusRequest { return &kvpb.CheckTxnStatusRequest{} }, (*Server).KvCheckTxnStatus),
	"KvResolveLock":         method(func() *kvpb.ResolveLockRequest { return &kvpb.ResolveLockRequest{} }, (*Server).KvResolveLock),
	"KvPessimisticLock":     method(func() *kvpb.PessimisticLockRequest { return &kvpb.PessimisticLockRequest{} }, (*Server).KvPessimisticLock),
	"KvPessimisticRollback": method(func() *kvpb.PessimisticRollbackRequest { return &kvpb.PessimisticRollbackRequest{} }, (*Server).KvPessimisticRollback),
	"KvTxnHeartBeat":        method(func() *kvpb.TxnHeartBeatRequest { return &kvpb.TxnHeartBeatRequest{} }, (*Server).KvTxnHeartBeat),
	"KvDestroyRange":        method(func() *kvpb.DestroyRangeRequest { return &kvpb.DestroyRangeRequest{} }, (*Server).KvDestroyRange),
	"KvImport":              method(func() *kvpb.ImportRequest { return &kvpb.ImportRequest{} }, (*Server).KvImport),
	"KvCoprocessor":         method(func() *kvpb.CopRequest { return &kvpb.CopRequest{} }, (*Server).KvCoprocessor),
	"KvScanLock":            method(func() *kvpb.ScanLockRequest { return &kvpb.ScanLockRequest{} }, (*Server).KvScanLock),
}

// maxBatchResponses bounds the responses sent in one message.
const maxBatchResponses = 128

// KvBatchCommands implements kvpb.KvServer.
func (s *Server) KvBatchCommands(stream kvpb.Kv_KvBatchCommandsServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	out := make(chan *kvpb.BatchResponseEntry, 1024)
	sendErr := make(chan error, 1)
	go func() {
		for {
			var first *kvpb.BatchResponseEntry
			select {
			case <-ctx.Done():
				sendErr <- nil
				return
			case first = <-out:
			}
			batch := &kvpb.BatchResponse{Entries: []*kvpb.BatchResponseEntry{first}}
		fill:
			for len(batch.Entries) < maxBatchResponses {
				select {
				case e := <-out:
					batch.Entries = append(batch.Entries, e)
				default:
					break fill
				}
			}
			if err := stream.Send(batch); err != nil {
				sendErr <- err
				cancel()
				return
			}
		}
	}()
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range req.Entries {
			go func(e *kvpb.BatchRequestEntry) {
				resp := &kvpb.BatchResponseEntry{Id: e.Id}
				m, ok := batchMethods[e.Method]
				if !ok {
					resp.Error = fmt.Sprintf("unknown method %q", e.Method)
				} else if r, err := m(s, ctx, e.Request); err != nil {
					resp.Error = err.Error()
				} else if resp.Response, err = proto.Marshal(r); err != nil {
					resp.Error = err.Error()
				}
				select {
				case out <- resp:
				case <-ctx.Done():
				}
			}(e)
		}
		select {
		case err := <-sendErr:
			return err
		default:
		}
	}
}
