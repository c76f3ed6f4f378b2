package resp

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The string commands through go-redis's typed API, over RESP2 and RESP3.
// Exact reply types and the rarer errors are in testdata/transcripts.

func TestStringsGoRedis(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		isNil(t, c.Get(ctx, "k"))
		eq(t, c.Set(ctx, "k", "v", 0), "OK")
		eq(t, c.Get(ctx, "k"), "v")
		eq(t, c.StrLen(ctx, "k"), int64(1))

		// NX / XX, also as SetArgs, and SET ... GET.
		eq(t, c.SetNX(ctx, "k", "x", 0), false)
		eq(t, c.SetNX(ctx, "n", "x", 0), true)
		eq(t, c.SetXX(ctx, "k", "v2", 0), true)
		eq(t, c.SetXX(ctx, "absent", "v", 0), false)
		isNil(t, c.Get(ctx, "absent"))
		eq(t, c.SetArgs(ctx, "k", "v3", redis.SetArgs{Get: true}), "v2")
		isNil(t, c.SetArgs(ctx, "fresh", "v", redis.SetArgs{Get: true}))
		eq(t, c.Get(ctx, "fresh"), "v")
		isNil(t, c.SetArgs(ctx, "k", "no", redis.SetArgs{Mode: "NX"}))
		eq(t, c.SetArgs(ctx, "k", "v4", redis.SetArgs{Mode: "XX"}), "OK")
		eq(t, c.Get(ctx, "k"), "v4")

		// Expiring variants; the TTLs themselves are in ttl_test.go.
		eq(t, c.SetEx(ctx, "ex", "1", time.Hour), "OK")
		eq(t, c.Do(ctx, "PSETEX", "px", 3600000, "2"), any("OK"))
		eq(t, c.Set(ctx, "pxset", "3", 90*time.Second), "OK")
		eq(t, c.MGet(ctx, "ex", "px", "pxset"), []any{"1", "2", "3"})
		within(t, "TTL ex", val(t, c.TTL(ctx, "ex")), 3590*time.Second, time.Hour)

		eq(t, c.GetSet(ctx, "k", "v5"), "v4")
		isNil(t, c.GetSet(ctx, "gs", "first"))
		eq(t, c.Get(ctx, "gs"), "first")
		eq(t, c.GetDel(ctx, "gs"), "first")
		isNil(t, c.GetDel(ctx, "gs"))
		eq(t, c.Exists(ctx, "gs"), int64(0))
		eq(t, c.GetEx(ctx, "k", time.Minute), "v5")
		within(t, "TTL after GETEX", val(t, c.TTL(ctx, "k")), 50*time.Second, time.Minute)
		eq(t, c.GetEx(ctx, "k", 0), "v5") // PERSIST
		eq(t, c.TTL(ctx, "k"), time.Duration(-1))
		isNil(t, c.GetEx(ctx, "missing", time.Minute))

		eq(t, c.MSet(ctx, "a", "1", "b", "2"), "OK")
		eq(t, c.MSet(ctx, map[string]any{"c": "3"}), "OK")
		eq(t, c.MGet(ctx, "a", "b", "c", "nope"), []any{"1", "2", "3", nil})
		eq(t, c.MSetNX(ctx, "a", "9", "d", "4"), false)
		isNil(t, c.Get(ctx, "d"))
		eq(t, c.MSetNX(ctx, "d", "4", "e", "5"), true)
		eq(t, c.MGet(ctx, "a", "d", "e"), []any{"1", "4", "5"})

		eq(t, c.Incr(ctx, "ctr"), int64(1))
		eq(t, c.IncrBy(ctx, "ctr", 41), int64(42))
		eq(t, c.Decr(ctx, "ctr"), int64(41))
		eq(t, c.DecrBy(ctx, "ctr", 50), int64(-9))
		eq(t, c.Get(ctx, "ctr"), "-9")
		eq(t, c.IncrByFloat(ctx, "fl", 10.5), 10.5)
		eq(t, c.IncrByFloat(ctx, "fl", 0.1), 10.6)
		eq(t, c.Get(ctx, "fl"), "10.6")
		eq(t, c.IncrByFloat(ctx, "ctr", 0.5), -8.5)

		eq(t, c.Append(ctx, "ap", "Hello"), int64(5))
		eq(t, c.Append(ctx, "ap", " World"), int64(11))
		eq(t, c.GetRange(ctx, "ap", 0, 4), "Hello")
		eq(t, c.GetRange(ctx, "ap", -5, -1), "World")
		eq(t, c.GetRange(ctx, "ap", 20, 30), "")
		eq(t, c.SetRange(ctx, "ap", 6, "Redis"), int64(11))
		eq(t, c.Get(ctx, "ap"), "Hello Redis")
		eq(t, c.SetRange(ctx, "zero", 3, "x"), int64(4))
		eq(t, c.Get(ctx, "zero"), "\x00\x00\x00x")
		eq(t, c.StrLen(ctx, "missing"), int64(0))
	})
}

// TestErrorsKeepConnection checks the exact error texts go-redis receives
// and that the connection that got them keeps serving (same CLIENT ID).
func TestErrorsKeepConnection(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		conn := c.Conn()
		defer conn.Close()
		id := val(t, conn.ClientID(ctx))
		noErr(t, conn.HSet(ctx, "h", "f", "v"))
		noErr(t, conn.Set(ctx, "s", "abc", 0))
		noErr(t, conn.Set(ctx, "max", "9223372036854775807", 0))

		const wrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"
		isErr(t, conn.Get(ctx, "h"), wrongType)
		isErr(t, conn.Incr(ctx, "h"), wrongType)
		isErr(t, conn.HGet(ctx, "s", "f"), wrongType)
		isErr(t, conn.Do(ctx, "GET"), "ERR wrong number of arguments for 'get' command")
		isErr(t, conn.Do(ctx, "get", "a", "b"), "ERR wrong number of arguments for 'get' command")
		isErr(t, conn.Do(ctx, "HSET", "h", "f"), "ERR wrong number of arguments for 'hset' command")
		isErr(t, conn.Do(ctx, "foo", "bar", "baz"), "ERR unknown command 'foo', with args beginning with: 'bar' 'baz' ")
		isErr(t, conn.Do(ctx, "FOO"), "ERR unknown command 'FOO', with args beginning with: ")
		isErr(t, conn.Incr(ctx, "s"), "ERR value is not an integer or out of range")
		isErr(t, conn.Incr(ctx, "max"), "ERR increment or decrement would overflow")
		isErr(t, conn.IncrByFloat(ctx, "s", 1), "ERR value is not a valid float")
		isErr(t, conn.Do(ctx, "SET", "k", "v", "NX", "XX"), "ERR syntax error")
		isErr(t, conn.Do(ctx, "SET", "k", "v", "EX", "0"), "ERR invalid expire time in 'set' command")
		isErr(t, conn.Rename(ctx, "nosuch", "x"), "ERR no such key")
		isErr(t, conn.HIncrBy(ctx, "h", "f", 1), "ERR hash value is not an integer")
		isErr(t, conn.Do(ctx, "SELECT", "1"), "ERR DB index is out of range")
		// Nothing was half-applied by the failed commands.
		eq(t, conn.Exists(ctx, "k", "x"), int64(0))
		eq(t, conn.Get(ctx, "s"), "abc")
		eq(t, conn.Get(ctx, "max"), "9223372036854775807")
		eq(t, conn.HGetAll(ctx, "h"), map[string]string{"f": "v"})
		eq(t, conn.ClientID(ctx), id)
		eq(t, conn.Ping(ctx), "PONG")
	})
}

// TestBinarySafe stores every byte value in keys, values, hash fields and
// hash values through go-redis and reads them back.
func TestBinarySafe(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		var all strings.Builder
		for b := 0; b < 256; b++ {
			all.WriteByte(byte(b))
		}
		s := all.String()
		for b := 0; b < 256; b++ {
			k := "k" + string([]byte{byte(b)})
			noErr(t, c.Set(ctx, k, s[b:]+s[:b], 0))
		}
		for b := 0; b < 256; b++ {
			k := "k" + string([]byte{byte(b)})
			eq(t, c.Get(ctx, k), s[b:]+s[:b])
		}
		noErr(t, c.Set(ctx, s, s, 0))
		eq(t, c.Get(ctx, s), s)
		eq(t, c.StrLen(ctx, s), int64(256))
		noErr(t, c.HSet(ctx, "h"+s, s, s, "\x00", "\r\n"))
		eq(t, c.HGetAll(ctx, "h"+s), map[string]string{s: s, "\x00": "\r\n"})
		eq(t, c.DBSize(ctx), int64(258))
		keys := val(t, c.Keys(ctx, "*"))
		if len(keys) != 258 {
			t.Errorf("KEYS * returned %d keys, want 258", len(keys))
		}
	})
}
