package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// respStore keeps records in a Redis-protocol server (Strata or Redis).
// With several addresses (Config.Addr "host:port,host:port,..."), the
// nodes of one cluster that all serve every key, as every Strata node
// does, each operation goes to the next server in turn, as the etcd
// driver's requests go round the endpoints; the servers must share one
// keyspace (separate Redis servers do not).
type respStore struct {
	clients []*redis.Client
	next    atomic.Uint64
	schema  Schema
	hash    bool // records are hashes, not one string value each
}

// c returns the client of the server the next operation goes to.
func (s *respStore) c() *redis.Client {
	if len(s.clients) == 1 {
		return s.clients[0]
	}
	return s.clients[s.next.Add(1)%uint64(len(s.clients))]
}

// respAddrs splits Config.Addr into its comma-separated addresses.
func respAddrs(addr string) []string {
	var addrs []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// quietLogger swallows go-redis's own log lines ("failed to dial after 5
// attempts"): the same failures reach the run as operation errors, counted
// and reported there.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

var silenceRedisLog = sync.OnceFunc(func() { redis.SetLogger(quietLogger{}) })

func openRESP(ctx context.Context, cfg Config, schema Schema) (Store, error) {
	silenceRedisLog()
	var hash bool
	switch cfg.RESPRecords {
	case "", "value":
	case "hash":
		hash = schema.Fields() > 1
	default:
		return nil, fmt.Errorf("--resp-records must be value or hash, not %q", cfg.RESPRecords)
	}
	addrs := respAddrs(cfg.Addr)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resp: no server address given")
	}
	// A worker has one operation in flight, so the workers together keep
	// at most Conns connections busy, spread evenly over the servers: each
	// keeps its share open between operations, and may open more up to
	// Conns when the turns bunch up.
	idle := (cfg.Conns + len(addrs) - 1) / len(addrs)
	s := &respStore{schema: schema, hash: hash}
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{
			Addr:     addr,
			Username: cfg.User,
			Password: cfg.Password,
			// RESP2, as redis-benchmark speaks: the same bytes on the wire
			// for every server, no HELLO round trip.
			Protocol:        2,
			DisableIdentity: true, // no CLIENT SETINFO on connect
			MaintNotificationsConfig: &maintnotifications.Config{
				Mode: maintnotifications.ModeDisabled,
			},
			// Every failure is the run's to count; a retried command would
			// hide it and be measured as one slow success.
			MaxRetries:   -1,
			DialTimeout:  cfg.Timeout,
			ReadTimeout:  cfg.Timeout,
			WriteTimeout: cfg.Timeout,
			PoolSize:     cfg.Conns,
			// Keep every worker's connection open between operations.
			MinIdleConns: idle,
			MaxIdleConns: cfg.Conns,
		})
		s.clients = append(s.clients, c)
		if err := c.Ping(ctx).Err(); err != nil {
			s.Close()
			return nil, fmt.Errorf("resp server at %s: %w", addr, err)
		}
	}
	return s, nil
}

func (s *respStore) WholeRecordUpdates() bool { return !s.hash }

func (s *respStore) Init(ctx context.Context, drop bool) error {
	if !drop {
		return nil
	}
	// Delete the workload's keys only, never the rest of the keyspace.
	var cursor uint64
	for {
		keys, next, err := s.clients[0].Scan(ctx, cursor, s.schema.KeyPrefix+"*", 1000).Result()
		if err != nil {
			return fmt.Errorf("scan for %s* keys to drop: %w", s.schema.KeyPrefix, err)
		}
		if len(keys) > 0 {
			if err := s.clients[0].Del(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("drop %s* keys: %w", s.schema.KeyPrefix, err)
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

func (s *respStore) Check(context.Context) error { return nil }

func (s *respStore) hashArgs(fields [][]byte) []any {
	args := make([]any, 0, 2*len(fields))
	for i, f := range fields {
		args = append(args, s.schema.HashFields[i], f)
	}
	return args
}

func (s *respStore) set(ctx context.Context, p redis.Cmdable, key string, fields [][]byte) error {
	if s.hash {
		return p.HSet(ctx, key, s.hashArgs(fields)...).Err()
	}
	return p.Set(ctx, key, EncodeRecord(fields), 0).Err()
}

func (s *respStore) Insert(ctx context.Context, key string, fields [][]byte) error {
	return s.set(ctx, s.c(), key, fields)
}

func (s *respStore) Write(ctx context.Context, key string, fields [][]byte) error {
	return s.set(ctx, s.c(), key, fields)
}

// InsertBatch pipelines the writes: one round trip, not atomic.
func (s *respStore) InsertBatch(ctx context.Context, keys []string, fields [][][]byte) error {
	cmds, err := s.c().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			s.set(ctx, p, k, fields[i])
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (s *respStore) Read(ctx context.Context, key string) (bool, error) {
	if s.hash {
		m, err := s.c().HGetAll(ctx, key).Result()
		if err != nil {
			return false, err
		}
		if len(m) == 0 {
			return false, nil
		}
		if len(m) != s.schema.Fields() {
			return true, fmt.Errorf("record %s has %d fields, want %d", key, len(m), s.schema.Fields())
		}
		return true, nil
	}
	v, err := s.c().Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := CheckRecord(v, s.schema.Fields()); err != nil {
		return true, fmt.Errorf("record %s: %w", key, err)
	}
	return true, nil
}

func (s *respStore) Update(ctx context.Context, key string, i int, fields [][]byte) error {
	if s.hash && i >= 0 {
		return s.c().HSet(ctx, key, s.schema.HashFields[i], fields[i]).Err()
	}
	return s.set(ctx, s.c(), key, fields)
}

func (s *respStore) Scan(context.Context, string, int) (int, error) {
	return 0, OrderedScans(Config{Driver: "resp"})
}

func (s *respStore) Close() error {
	var first error
	for _, c := range s.clients {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
