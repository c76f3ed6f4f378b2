package driver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-db/strata/internal/workload/driver"
	"github.com/strata-db/strata/internal/workload/driver/drivertest"
)

func TestRecordEncoding(t *testing.T) {
	fields := [][]byte{[]byte("a"), {}, bytes.Repeat([]byte("z"), 300)}
	v := driver.EncodeRecord(fields)
	got, err := driver.DecodeRecord(v, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fields {
		if !bytes.Equal(got[i], fields[i]) {
			t.Errorf("field %d = %q", i, got[i])
		}
	}
	for _, bad := range [][]byte{v[:len(v)-1], append(append([]byte(nil), v...), 'x'), {}, {0x80}} {
		if err := driver.CheckRecord(bad, 3); err == nil {
			t.Errorf("CheckRecord accepted %q", bad)
		}
	}
	if err := driver.CheckRecord(v, 4); err == nil {
		t.Errorf("a three-field record passed as four")
	}
	// One field: the bare value.
	if v := driver.EncodeRecord([][]byte{[]byte("raw")}); string(v) != "raw" {
		t.Errorf("one-field record encoded as %q", v)
	}
}

func openStore(t *testing.T, cfg driver.Config) driver.Store {
	t.Helper()
	cfg.Timeout = 5 * time.Second
	cfg.Conns = 4
	s, err := driver.Open(drivertest.Context(t), cfg, drivertest.Schema())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func redisNative(c *redis.Client, hash bool) drivertest.Native {
	schema := drivertest.Schema()
	return drivertest.Native{
		Peek: func(ctx context.Context, key string) ([][]byte, error) {
			if hash {
				m, err := c.HGetAll(ctx, key).Result()
				if err != nil || len(m) == 0 {
					return nil, err
				}
				var f [][]byte
				for _, name := range schema.HashFields {
					f = append(f, []byte(m[name]))
				}
				return f, nil
			}
			v, err := c.Get(ctx, key).Bytes()
			if errors.Is(err, redis.Nil) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return driver.DecodeRecord(v, schema.Fields())
		},
		PutRaw: func(ctx context.Context, key string, v []byte) error { return c.Set(ctx, key, v, 0).Err() },
		Exists: func(ctx context.Context, key string) (bool, error) {
			n, err := c.Exists(ctx, key).Result()
			return n == 1, err
		},
	}
}

func TestRESPConformanceRedis(t *testing.T) {
	srv := drivertest.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2})
	defer c.Close()
	t.Run("value", func(t *testing.T) {
		s := openStore(t, driver.Config{Driver: "resp", Addr: srv.Addr})
		if !s.WholeRecordUpdates() {
			t.Fatal("value records must be rewritten whole")
		}
		drivertest.Conformance(t, s, redisNative(c, false))
	})
	t.Run("hash", func(t *testing.T) {
		s := openStore(t, driver.Config{Driver: "resp", Addr: srv.Addr, RESPRecords: "hash"})
		if s.WholeRecordUpdates() {
			t.Fatal("hash records update one field")
		}
		drivertest.Conformance(t, s, redisNative(c, true))
	})
}

// With several addresses the resp driver sends each operation to the next
// server in turn: two separate Redis servers each receive half the inserts.
func TestRESPSeveralAddresses(t *testing.T) {
	a, b := drivertest.StartRedis(t), drivertest.StartRedis(t)
	s := openStore(t, driver.Config{Driver: "resp", Addr: a.Addr + ", " + b.Addr})
	ctx := drivertest.Context(t)
	for i := 0; i < 10; i++ {
		if err := s.Insert(ctx, fmt.Sprintf("user%d", i), drivertest.Fields(4, 10, "x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, srv := range []*drivertest.Server{a, b} {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2})
		n, err := c.DBSize(ctx).Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n != 5 {
			t.Errorf("%s holds %d of the 10 records, want 5", srv.Addr, n)
		}
	}
	// Every address is checked when the store opens.
	bad := drivertest.FreeAddr(t)
	cfg := driver.Config{Driver: "resp", Addr: a.Addr + "," + bad, Timeout: time.Second}
	if _, err := driver.Open(ctx, cfg, drivertest.Schema()); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("open with an unreachable second address: %v (want an error naming %s)", err, bad)
	}
}

func TestEtcdConformance(t *testing.T) {
	srv := drivertest.StartEtcd(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get := func(ctx context.Context, key string) ([]byte, bool, error) {
		r, err := c.Get(ctx, key)
		if err != nil || len(r.Kvs) == 0 {
			return nil, false, err
		}
		return r.Kvs[0].Value, true, nil
	}
	s := openStore(t, driver.Config{Driver: "etcd", Endpoints: []string{srv.Addr}})
	drivertest.Conformance(t, s, drivertest.Native{
		Peek: func(ctx context.Context, key string) ([][]byte, error) {
			v, ok, err := get(ctx, key)
			if !ok {
				return nil, err
			}
			return driver.DecodeRecord(v, drivertest.Schema().Fields())
		},
		PutRaw: func(ctx context.Context, key string, v []byte) error {
			_, err := c.Put(ctx, key, string(v))
			return err
		},
		Exists: func(ctx context.Context, key string) (bool, error) {
			_, ok, err := get(ctx, key)
			return ok, err
		},
		Scans: true,
	})
}

// A server that goes away turns operations into errors; nothing reports
// success or "not found".
func TestOperationsFailWhenTheServerDies(t *testing.T) {
	for _, name := range []string{"resp", "etcd"} {
		t.Run(name, func(t *testing.T) {
			var srv *drivertest.Server
			cfg := driver.Config{Driver: name}
			if name == "resp" {
				srv = drivertest.StartRedis(t)
				cfg.Addr = srv.Addr
			} else {
				srv = drivertest.StartEtcd(t)
				cfg.Endpoints = []string{srv.Addr}
			}
			cfg.Timeout = 2 * time.Second
			s := openStore(t, cfg)
			ctx := drivertest.Context(t)
			fields := drivertest.Fields(4, 10, "x")
			if err := s.Insert(ctx, "user1", fields); err != nil {
				t.Fatal(err)
			}
			srv.Kill()
			if found, err := s.Read(ctx, "user1"); err == nil {
				t.Errorf("read after the server died: found=%v, no error", found)
			}
			if err := s.Update(ctx, "user1", 0, fields); err == nil {
				t.Errorf("update after the server died: no error")
			}
		})
	}
}

func TestOpenReportsUnreachableServer(t *testing.T) {
	addr := drivertest.FreeAddr(t) // nothing listens there
	for _, name := range driver.Drivers {
		cfg := driver.Config{Driver: name, Addr: addr, Database: "ycsb", Timeout: time.Second}
		_, err := driver.Open(context.Background(), cfg, drivertest.Schema())
		if err == nil || !strings.Contains(err.Error(), addr) {
			t.Errorf("%s: open of an unreachable server: %v (want an error naming %s)", name, err, addr)
		}
	}
	if _, err := driver.Open(context.Background(), driver.Config{Driver: "nosuch"}, drivertest.Schema()); err == nil {
		t.Errorf("unknown driver accepted")
	}
	if err := driver.OrderedScans(driver.Config{Driver: "resp"}); err == nil || !strings.Contains(err.Error(), "--driver sql or --driver etcd") {
		t.Errorf("resp scans: %v", err)
	}
	for _, name := range []string{"sql", "etcd"} {
		if err := driver.OrderedScans(driver.Config{Driver: name}); err != nil {
			t.Errorf("%s scans: %v", name, err)
		}
	}
}
