package resp

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestHashesGoRedis(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		eq(t, c.HSet(ctx, "h", "a", "1", "b", "2"), int64(2))
		eq(t, c.HSet(ctx, "h", map[string]any{"b": "20", "c": "3"}), int64(1))
		eq(t, c.HGet(ctx, "h", "b"), "20")
		isNil(t, c.HGet(ctx, "h", "zz"))
		isNil(t, c.HGet(ctx, "nohash", "a"))
		eq(t, c.HMGet(ctx, "h", "a", "zz", "c"), []any{"1", nil, "3"})
		eq(t, c.HGetAll(ctx, "h"), map[string]string{"a": "1", "b": "20", "c": "3"})
		eq(t, c.HGetAll(ctx, "nohash"), map[string]string{})
		eq(t, c.HLen(ctx, "h"), int64(3))
		eq(t, c.HExists(ctx, "h", "a"), true)
		eq(t, c.HExists(ctx, "h", "zz"), false)
		eq(t, c.HSetNX(ctx, "h", "a", "x"), false)
		eq(t, c.HSetNX(ctx, "h", "d", "4"), true)
		sameSet(t, "HKEYS", val(t, c.HKeys(ctx, "h")), []string{"a", "b", "c", "d"})
		sameSet(t, "HVALS", val(t, c.HVals(ctx, "h")), []string{"1", "20", "3", "4"})
		eq(t, c.HDel(ctx, "h", "d", "zz"), int64(1))
		eq(t, c.HIncrBy(ctx, "h", "a", 10), int64(11))
		eq(t, c.HIncrBy(ctx, "h", "new", -3), int64(-3))
		eq(t, c.HIncrByFloat(ctx, "h", "fl", 2.5), 2.5)
		eq(t, c.HIncrByFloat(ctx, "h", "fl", 0.25), 2.75)
		eq(t, c.HGet(ctx, "h", "fl"), "2.75")
		isErr(t, c.HIncrBy(ctx, "h", "fl", 1), "ERR hash value is not an integer")
		isErr(t, c.Do(ctx, "HINCRBYFLOAT", "h", "b", "+inf"), "ERR value is NaN or Infinity")
		eq(t, c.HDel(ctx, "h", "a", "b", "c", "new", "fl"), int64(5))
		eq(t, c.Exists(ctx, "h"), int64(0))
		eq(t, c.HLen(ctx, "h"), int64(0))
		eq(t, c.HKeys(ctx, "h"), []string{})
	})
}

// hscanAll follows HSCAN cursors and returns the field/value pairs.
func hscanAll(t *testing.T, c *redis.Client, key, match string, count int64) map[string]string {
	t.Helper()
	got := map[string]string{}
	var cursor uint64
	for round := 0; ; round++ {
		if round > 100000 {
			t.Fatalf("HSCAN %s did not finish", key)
		}
		kvs, next, err := c.HScan(t.Context(), key, cursor, match, count).Result()
		if err != nil {
			t.Fatalf("HSCAN %s %d MATCH %q COUNT %d: %v", key, cursor, match, count, err)
		}
		if len(kvs)%2 != 0 {
			t.Fatalf("HSCAN returned an odd number of elements: %q", kvs)
		}
		for i := 0; i < len(kvs); i += 2 {
			if _, dup := got[kvs[i]]; dup {
				t.Errorf("HSCAN returned field %q twice", kvs[i])
			}
			got[kvs[i]] = kvs[i+1]
		}
		if cursor = next; cursor == 0 {
			return got
		}
	}
}

func TestHScan(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		// A small hash and one big enough for Redis to answer in several
		// batches.
		noErr(t, c.HSet(ctx, "small", "a", "1", "b", "2"))
		want := map[string]string{}
		var args []any
		for i := 0; i < 1000; i++ {
			f, v := fmt.Sprintf("field:%d", i), fmt.Sprintf("value:%d", i)
			want[f] = v
			args = append(args, f, v)
		}
		noErr(t, c.HSet(ctx, "big", args...))
		eq(t, c.HLen(ctx, "big"), int64(1000))

		small := hscanAll(t, c, "small", "", 0)
		if len(small) != 2 || small["a"] != "1" || small["b"] != "2" {
			t.Errorf("HSCAN small: %v", small)
		}
		for _, count := range []int64{0, 10, 333, 5000} {
			got := hscanAll(t, c, "big", "", count)
			if len(got) != len(want) {
				t.Errorf("HSCAN COUNT %d: %d fields, want %d", count, len(got), len(want))
			}
			for f, v := range want {
				if got[f] != v {
					t.Errorf("HSCAN COUNT %d: %s = %q, want %q", count, f, got[f], v)
					break
				}
			}
		}
		got := hscanAll(t, c, "big", "field:99*", 50)
		wantMatch := map[string]string{"field:99": "value:99"}
		for i := 0; i < 10; i++ {
			wantMatch[fmt.Sprintf("field:99%d", i)] = fmt.Sprintf("value:99%d", i)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantMatch) {
			t.Errorf("HSCAN MATCH field:99*: got %v, want %v", got, wantMatch)
		}
		if got := hscanAll(t, c, "nohash", "", 10); len(got) != 0 {
			t.Errorf("HSCAN of a missing key: %v", got)
		}
		isErr(t, c.Do(ctx, "HSCAN", "big", "notacursor"), "ERR invalid cursor")
		isErr(t, c.Do(ctx, "HSCAN", "big", "0", "COUNT", "0"), "ERR syntax error")
	})
}
