// Package driver connects the workloads to the systems they measure. A
// Store keeps the records of one workload (a YCSB usertable or the KV
// workload's key space) in a server reached through one of four client
// libraries, so that one client program measures Strata and its peers:
//
//   - resp: the Redis protocol (github.com/redis/go-redis/v9), for Strata's
//     --resp-addr listener and for Redis itself;
//   - sql: the MySQL protocol (github.com/go-sql-driver/mysql), for Strata's
//     --sql-addr listener or any MySQL server;
//   - etcd: etcd's gRPC API (go.etcd.io/etcd/client/v3), linearizable reads;
//   - strata: Strata's Go client (package client), which sends each request
//     to its key's region leader (as TiKV's go-ycsb driver does), for a
//     Strata cluster's --grpc-addr; records in the resp layout.
//
// How records are laid out (the choice matters for a fair comparison):
//
//   - sql: a table with one VARCHAR(64) primary key column and one
//     VARCHAR column per field (YCSB's usertable(YCSB_KEY, FIELD0..FIELDn)).
//     An update sets one column; a read selects every column.
//   - etcd: a record is one key whose value holds every field
//     (EncodeRecord). etcd has no partial update, so an update writes the
//     whole record: one Put of fields x length bytes.
//   - resp, --resp-records=value (the default): the same layout as etcd, one
//     string value per record (GET/SET), so Strata-over-RESP, Redis and etcd
//     do the same work per operation.
//   - resp, --resp-records=hash: a record is a hash (HSET/HGETALL), YCSB's
//     Redis binding; an update sets one field (HSET key fieldN value).
//
// A workload with one field (KV) stores the bare value under the key in
// every layout but sql.
//
// Contract: a Store is safe for concurrent use by every worker of a run.
// Operations return an error for anything the server refused or the
// connection lost; none is retried (go-redis's retries are off), so the
// run counts every failure. Reads report a missing record as found=false,
// not as an error; the workload decides what that means.
package driver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Schema describes the records of a workload.
type Schema struct {
	// Table is the SQL table ("usertable", "kv").
	Table string
	// KeyColumn is the SQL primary key column ("YCSB_KEY").
	KeyColumn string
	// Columns are the SQL field columns ("FIELD0".."FIELD9").
	Columns []string
	// HashFields are the field names in Redis hashes ("field0".."field9").
	HashFields []string
	// KeyPrefix starts every key of the workload ("user"); init --drop
	// deletes the keys with this prefix from etcd and Redis-protocol stores.
	KeyPrefix string
	// FieldLength is the length of every field value (the SQL column width).
	FieldLength int
}

// Fields is the number of fields of a record.
func (s Schema) Fields() int { return len(s.Columns) }

// Store is the set of operations the workloads need. fields always has
// Schema.Fields() values.
type Store interface {
	// Init prepares the store for loading: it creates the SQL database and
	// table if they are missing, after deleting every record of the
	// workload when drop is set.
	Init(ctx context.Context, drop bool) error
	// Check reports, with a message saying what to do, why the store cannot
	// run the workload (for example a missing SQL table); nil when it can.
	Check(ctx context.Context) error
	// Insert stores a new record.
	Insert(ctx context.Context, key string, fields [][]byte) error
	// InsertBatch stores new records in as few round trips as the protocol
	// allows; it is the load phase's insert.
	InsertBatch(ctx context.Context, keys []string, fields [][][]byte) error
	// Read reads every field of a record.
	Read(ctx context.Context, key string) (found bool, err error)
	// Update sets field i of an existing record to fields[i] (every field
	// when i < 0). A store with WholeRecordUpdates writes all of fields.
	Update(ctx context.Context, key string, i int, fields [][]byte) error
	// Write stores the record whether or not it exists (an upsert).
	Write(ctx context.Context, key string, fields [][]byte) error
	// Scan reads up to n records in key order starting at the first key >=
	// start, and returns how many it read.
	Scan(ctx context.Context, start string, n int) (int, error)
	// WholeRecordUpdates says whether an update rewrites every field (so
	// the caller must supply them all).
	WholeRecordUpdates() bool
	// Close releases the connections.
	Close() error
}

// Config says which server to reach and how.
type Config struct {
	// Driver is "resp", "sql", "etcd" or "strata".
	Driver string
	// Addr is host:port of a resp or sql server. For resp it may list
	// several, comma-separated: nodes of one cluster that serve the same
	// keys (Strata's), which the operations visit in turn.
	Addr string
	// Endpoints are etcd's client URLs or host:port pairs (strata: the
	// nodes' gRPC addresses).
	Endpoints []string
	// User and Password authenticate (sql: the MySQL user; resp: AUTH;
	// etcd: the etcd user).
	User, Password string
	// Database holds the sql driver's table.
	Database string
	// Conns is the number of connections: for resp and sql the pool size
	// (one per worker is right), for etcd the number of gRPC clients the
	// workers share round robin.
	Conns int
	// RESPRecords is "value" (one string per record) or "hash".
	RESPRecords string
	// Timeout bounds each operation (and connecting).
	Timeout time.Duration
}

// Drivers lists the driver names.
var Drivers = []string{"resp", "sql", "etcd", "strata"}

// DefaultAddr is the address a driver reaches when none is given: Strata's
// own listeners for resp and sql, etcd's default client port.
func DefaultAddr(driver string) string {
	switch driver {
	case "resp":
		return "127.0.0.1:6380"
	case "sql":
		return "127.0.0.1:4000"
	case "etcd":
		return "127.0.0.1:2379"
	case "strata":
		return "127.0.0.1:20160"
	}
	return ""
}

// OrderedScans reports whether a driver can run range scans in key order,
// and if not, why, in words for the user.
func OrderedScans(cfg Config) error {
	if cfg.Driver == "resp" {
		return errors.New("the resp driver cannot scan a range of keys in order: a Redis keyspace is a hash table, " +
			"SCAN walks it in no key order and may return a key twice, so YCSB's \"read N records from key K on\" has " +
			"no Redis command (YCSB's own Redis binding fakes it with a sorted-set index it maintains beside the data); " +
			"run workload e with --driver sql or --driver etcd")
	}
	return nil
}

// Open connects to the server and checks that it answers.
func Open(ctx context.Context, cfg Config, schema Schema) (Store, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Conns <= 0 {
		cfg.Conns = 1
	}
	switch cfg.Driver {
	case "resp":
		return openRESP(ctx, cfg, schema)
	case "sql":
		return openSQL(ctx, cfg, schema)
	case "etcd":
		return openEtcd(ctx, cfg, schema)
	case "strata":
		return openStrata(ctx, cfg, schema)
	}
	return nil, fmt.Errorf("unknown driver %q (want one of %s)", cfg.Driver, strings.Join(Drivers, ", "))
}

// EncodeRecord packs the fields of a record into one value: each field as
// its uvarint length and its bytes. A one-field record is its bare value.
func EncodeRecord(fields [][]byte) []byte {
	if len(fields) == 1 {
		return fields[0]
	}
	n := 0
	for _, f := range fields {
		n += binary.MaxVarintLen32 + len(f)
	}
	b := make([]byte, 0, n)
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// DecodeRecord splits a value made by EncodeRecord into its n fields.
func DecodeRecord(v []byte, n int) ([][]byte, error) {
	if err := CheckRecord(v, n); err != nil {
		return nil, err
	}
	if n == 1 {
		return [][]byte{v}, nil
	}
	fields := make([][]byte, n)
	for i := range fields {
		l, k := binary.Uvarint(v)
		fields[i] = v[k : k+int(l)]
		v = v[k+int(l):]
	}
	return fields, nil
}

// CheckRecord verifies that v is a record of n fields as EncodeRecord makes
// them.
func CheckRecord(v []byte, n int) error {
	if n == 1 {
		return nil
	}
	for i := 0; i < n; i++ {
		l, k := binary.Uvarint(v)
		if k <= 0 || uint64(len(v)-k) < l {
			return fmt.Errorf("malformed record: field %d of %d is cut short", i, n)
		}
		v = v[k+int(l):]
	}
	if len(v) != 0 {
		return fmt.Errorf("malformed record: %d bytes after its %d fields", len(v), n)
	}
	return nil
}
