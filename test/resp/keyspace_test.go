package resp

import (
	"context"
	"testing"
)

// TestRedisKeysNeverMeetSQLRows: the Redis keyspace and SQL tables share
// one transactional keyspace but never see each other: Redis KEYS does
// not list SQL rows, FLUSHALL leaves tables alone, and a Redis key named
// like a table's internal key is just a Redis key.
func TestRedisKeysNeverMeetSQLRows(t *testing.T) {
	strataOnly(t)
	tg := fresh(t)
	db := tg.node.DB(t, "")
	ctx := context.Background()
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS ks_sep",
		"CREATE TABLE IF NOT EXISTS ks_sep.t (id INT PRIMARY KEY, v VARCHAR(10))",
		"REPLACE INTO ks_sep.t VALUES (1, 'a'), (2, 'b')",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	c := newClient(t, 2)
	noErr(t, c.Set(ctx, "t\x80\x00\x00\x00\x00\x00\x00\x01", "not a row", 0))
	noErr(t, c.Set(ctx, "plain", "x", 0))
	keys := val(t, c.Keys(ctx, "*"))
	sameSet(t, "KEYS *", keys, []string{"t\x80\x00\x00\x00\x00\x00\x00\x01", "plain"})
	eq(t, c.DBSize(ctx), int64(2))
	noErr(t, c.FlushAll(ctx))
	eq(t, c.DBSize(ctx), int64(0))
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ks_sep.t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after FLUSHALL the SQL table has %d rows (%v), want 2", n, err)
	}
	if _, err := db.ExecContext(ctx, "DROP DATABASE ks_sep"); err != nil {
		t.Fatal(err)
	}
}
