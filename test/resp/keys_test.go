package resp

import (
	"fmt"
	"path"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestKeysGoRedis(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		noErr(t, c.MSet(ctx, "a", "1", "b", "2", "c", "3", "d", "4"))
		noErr(t, c.HSet(ctx, "h", "f", "v"))
		eq(t, c.DBSize(ctx), int64(5))
		eq(t, c.Exists(ctx, "a", "a", "h", "nope"), int64(3))
		eq(t, c.Type(ctx, "a"), "string")
		eq(t, c.Type(ctx, "h"), "hash")
		eq(t, c.Type(ctx, "nope"), "none")
		eq(t, c.Del(ctx, "a", "h", "nope"), int64(2))
		eq(t, c.Unlink(ctx, "b", "nope"), int64(1))
		eq(t, c.Exists(ctx, "a", "b", "h"), int64(0))
		eq(t, c.Rename(ctx, "c", "cc"), "OK")
		eq(t, c.Get(ctx, "cc"), "3")
		eq(t, c.Exists(ctx, "c"), int64(0))
		eq(t, c.Rename(ctx, "cc", "d"), "OK") // overwrites
		eq(t, c.Get(ctx, "d"), "3")
		isErr(t, c.Rename(ctx, "c", "x"), "ERR no such key")
		eq(t, c.DBSize(ctx), int64(1))

		noErr(t, c.MSet(ctx, "user:1", "a", "user:2", "b", "user:10", "c", "item:1", "d"))
		sameSet(t, "KEYS user:*", val(t, c.Keys(ctx, "user:*")), []string{"user:1", "user:2", "user:10"})
		sameSet(t, "KEYS user:?", val(t, c.Keys(ctx, "user:?")), []string{"user:1", "user:2"})
		sameSet(t, "KEYS *:1", val(t, c.Keys(ctx, "*:1")), []string{"user:1", "item:1"})
		sameSet(t, "KEYS *", val(t, c.Keys(ctx, "*")), []string{"d", "user:1", "user:2", "user:10", "item:1"})
		eq(t, c.FlushDB(ctx), "OK")
		eq(t, c.DBSize(ctx), int64(0))
		noErr(t, c.Set(ctx, "x", "1", 0))
		eq(t, c.FlushAll(ctx), "OK")
		eq(t, c.DBSize(ctx), int64(0))
		eq(t, c.Keys(ctx, "*"), []string{})
	})
}

// scanAll follows SCAN cursors from 0 until the server returns 0 and
// returns every key it got; it fails the test after too many rounds.
func scanAll(t *testing.T, c *redis.Client, match string, count int64, typ string) []string {
	t.Helper()
	var all []string
	var cursor uint64
	for round := 0; ; round++ {
		if round > 100000 {
			t.Fatalf("SCAN MATCH %q COUNT %d TYPE %q did not finish", match, count, typ)
		}
		var keys []string
		var err error
		if typ == "" {
			keys, cursor, err = c.Scan(t.Context(), cursor, match, count).Result()
		} else {
			keys, cursor, err = c.ScanType(t.Context(), cursor, match, count, typ).Result()
		}
		if err != nil {
			t.Fatalf("SCAN %d MATCH %q COUNT %d TYPE %q: %v", cursor, match, count, typ, err)
		}
		all = append(all, keys...)
		if cursor == 0 {
			return all
		}
	}
}

// distinct checks that a full SCAN returned exactly the keys of want (Redis
// may return a key twice when its table is resized during the scan; nothing
// is resized here, so duplicates are an error too).
func distinct(t *testing.T, what string, got []string, want map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, k := range got {
		if seen[k] {
			t.Errorf("%s: %q returned twice", what, k)
		}
		seen[k] = true
		if !want[k] {
			t.Errorf("%s: unexpected key %q", what, k)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("%s: key %q missing", what, k)
		}
	}
}

func TestScan(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		strs, hashes, all := map[string]bool{}, map[string]bool{}, map[string]bool{}
		var pairs []any
		for i := 0; i < 400; i++ {
			k := fmt.Sprintf("s:%d", i)
			strs[k], all[k] = true, true
			pairs = append(pairs, k, i)
		}
		noErr(t, c.MSet(ctx, pairs...))
		pipe := c.Pipeline()
		for i := 0; i < 100; i++ {
			k := fmt.Sprintf("h:%d", i)
			hashes[k], all[k] = true, true
			pipe.HSet(ctx, k, "f", i)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}

		distinct(t, "SCAN", scanAll(t, c, "", 0, ""), all)
		distinct(t, "SCAN COUNT 7", scanAll(t, c, "", 7, ""), all)
		distinct(t, "SCAN COUNT 1000", scanAll(t, c, "", 1000, ""), all)
		distinct(t, "SCAN TYPE hash", scanAll(t, c, "", 50, "hash"), hashes)
		distinct(t, "SCAN TYPE string", scanAll(t, c, "", 50, "string"), strs)
		distinct(t, "SCAN TYPE nosuchtype", scanAll(t, c, "", 50, "nosuchtype"), map[string]bool{})
		want := map[string]bool{}
		for k := range all {
			if ok, _ := path.Match("s:1?", k); ok {
				want[k] = true
			}
		}
		distinct(t, "SCAN MATCH s:1?", scanAll(t, c, "s:1?", 20, ""), want)
		want = map[string]bool{}
		for k := range hashes {
			if ok, _ := path.Match("h:[2-3]*", k); ok {
				want[k] = true
			}
		}
		distinct(t, "SCAN MATCH h:[2-3]* TYPE hash", scanAll(t, c, "h:[2-3]*", 30, "hash"), want)
		distinct(t, "SCAN MATCH h:[2-3]* TYPE string", scanAll(t, c, "h:[2-3]*", 30, "string"), map[string]bool{})

		// The iterator go-redis users write.
		var n int
		it := c.Scan(ctx, 0, "s:*", 100).Iterator()
		for it.Next(ctx) {
			n++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if n != 400 {
			t.Errorf("Scan iterator over s:* returned %d keys, want 400", n)
		}

		// A key that exists during the whole scan is returned even if
		// other keys are deleted and added meanwhile.
		var got []string
		var cursor uint64
		for round := 0; ; round++ {
			keys, next, err := c.Scan(ctx, cursor, "", 25).Result()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, keys...)
			if round == 2 {
				noErr(t, c.Del(ctx, "h:0", "h:1", "h:2"))
				noErr(t, c.Set(ctx, "added", "1", 0))
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		seen := map[string]bool{}
		for _, k := range got {
			seen[k] = true
		}
		for k := range all {
			if !seen[k] && k != "h:0" && k != "h:1" && k != "h:2" {
				t.Errorf("SCAN with concurrent changes missed %q", k)
			}
		}
	})
}
