package driver

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdTxnOps is etcd's default limit of operations in one transaction
// (--max-txn-ops); load batches are split to fit.
const etcdTxnOps = 128

// etcdStore keeps each record as one etcd key. Reads are linearizable (the
// client's default), as Strata's are.
type etcdStore struct {
	clients []*clientv3.Client
	next    atomic.Uint64
	schema  Schema
	opTime  func(ctx context.Context) (context.Context, context.CancelFunc)
}

func openEtcd(ctx context.Context, cfg Config, schema Schema) (Store, error) {
	endpoints := cfg.Endpoints
	if len(endpoints) == 0 {
		endpoints = []string{cfg.Addr}
	}
	s := &etcdStore{schema: schema}
	s.opTime = func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, cfg.Timeout)
	}
	for i := 0; i < cfg.Conns; i++ {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   endpoints,
			DialTimeout: cfg.Timeout, // blocks until connected or timed out
			Username:    cfg.User,
			Password:    cfg.Password,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("etcd at %s: %w", strings.Join(endpoints, ","), err)
		}
		s.clients = append(s.clients, c)
	}
	pctx, cancel := s.opTime(ctx)
	defer cancel()
	if _, err := s.clients[0].Get(pctx, schema.KeyPrefix, clientv3.WithCountOnly()); err != nil {
		s.Close()
		return nil, fmt.Errorf("etcd at %s: %w", strings.Join(endpoints, ","), err)
	}
	return s, nil
}

func (s *etcdStore) client() *clientv3.Client {
	return s.clients[s.next.Add(1)%uint64(len(s.clients))]
}

func (s *etcdStore) WholeRecordUpdates() bool { return true }

func (s *etcdStore) Init(ctx context.Context, drop bool) error {
	if !drop {
		return nil
	}
	_, err := s.client().Delete(ctx, s.schema.KeyPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("drop %s* keys: %w", s.schema.KeyPrefix, err)
	}
	return nil
}

func (s *etcdStore) Check(context.Context) error { return nil }

func (s *etcdStore) put(ctx context.Context, key string, fields [][]byte) error {
	ctx, cancel := s.opTime(ctx)
	defer cancel()
	_, err := s.client().Put(ctx, key, string(EncodeRecord(fields)))
	return err
}

func (s *etcdStore) Insert(ctx context.Context, key string, fields [][]byte) error {
	return s.put(ctx, key, fields)
}

func (s *etcdStore) Write(ctx context.Context, key string, fields [][]byte) error {
	return s.put(ctx, key, fields)
}

func (s *etcdStore) Update(ctx context.Context, key string, _ int, fields [][]byte) error {
	return s.put(ctx, key, fields)
}

// InsertBatch writes the records in transactions of up to 128 puts.
func (s *etcdStore) InsertBatch(ctx context.Context, keys []string, fields [][][]byte) error {
	for len(keys) > 0 {
		n := min(len(keys), etcdTxnOps)
		ops := make([]clientv3.Op, n)
		for i := 0; i < n; i++ {
			ops[i] = clientv3.OpPut(keys[i], string(EncodeRecord(fields[i])))
		}
		tctx, cancel := s.opTime(ctx)
		_, err := s.client().Txn(tctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return err
		}
		keys, fields = keys[n:], fields[n:]
	}
	return nil
}

func (s *etcdStore) Read(ctx context.Context, key string) (bool, error) {
	ctx, cancel := s.opTime(ctx)
	defer cancel()
	resp, err := s.client().Get(ctx, key)
	if err != nil {
		return false, err
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	if err := CheckRecord(resp.Kvs[0].Value, s.schema.Fields()); err != nil {
		return true, fmt.Errorf("record %s: %w", key, err)
	}
	return true, nil
}

// Scan reads the keys from start to the end of the workload's prefix, in
// etcd's byte order, up to n of them, linearizably.
func (s *etcdStore) Scan(ctx context.Context, start string, n int) (int, error) {
	ctx, cancel := s.opTime(ctx)
	defer cancel()
	end := clientv3.GetPrefixRangeEnd(s.schema.KeyPrefix)
	resp, err := s.client().Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(int64(n)))
	if err != nil {
		return 0, err
	}
	for _, kv := range resp.Kvs {
		if err := CheckRecord(kv.Value, s.schema.Fields()); err != nil {
			return 0, fmt.Errorf("record %s: %w", kv.Key, err)
		}
	}
	return len(resp.Kvs), nil
}

func (s *etcdStore) Close() error {
	var first error
	for _, c := range s.clients {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
