package resp

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTTLValues checks the TTL every expiring form sets, as TTL and PTTL
// report it (the clock-independent replies are in transcripts/expire).
func TestTTLValues(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		const s = time.Second
		ttl := func(k string, lo, hi time.Duration) {
			t.Helper()
			within(t, "TTL "+k, val(t, c.TTL(ctx, k)), lo, hi)
			within(t, "PTTL "+k, val(t, c.PTTL(ctx, k)), lo-s, hi)
		}
		at := time.Now().Add(100 * s)

		noErr(t, c.Set(ctx, "ex", "v", 100*s))                               // SET EX
		noErr(t, c.Set(ctx, "px", "v", 100500*time.Millisecond))             // SET PX
		noErr(t, c.SetArgs(ctx, "exat", "v", redis.SetArgs{ExpireAt: at}))   // SET EXAT
		noErr(t, c.Do(ctx, "SET", "pxat", "v", "PXAT", at.UnixMilli()))      // SET PXAT
		noErr(t, c.SetEx(ctx, "setex", "v", 100*s))                          // SETEX
		noErr(t, c.Do(ctx, "PSETEX", "psetex", 100000, "v"))                 // PSETEX
		noErr(t, c.Set(ctx, "keep", "v", 100*s))                             //
		noErr(t, c.SetArgs(ctx, "keep", "v2", redis.SetArgs{KeepTTL: true})) // SET KEEPTTL
		for _, k := range []string{"ex", "px", "exat", "pxat", "setex", "psetex", "keep"} {
			ttl(k, 98*s, 101*s)
		}
		eq(t, c.Get(ctx, "keep"), "v2")

		noErr(t, c.MSet(ctx, "e1", "v", "e2", "v", "e3", "v", "e4", "v", "g1", "v", "g2", "v", "g3", "v", "g4", "v"))
		eq(t, c.Expire(ctx, "e1", 100*s), true)
		eq(t, c.PExpire(ctx, "e2", 100000*time.Millisecond), true)
		eq(t, c.ExpireAt(ctx, "e3", at), true)
		eq(t, c.PExpireAt(ctx, "e4", at), true)
		eq(t, c.GetEx(ctx, "g1", 100*s), "v")
		eq(t, c.GetEx(ctx, "g2", 100500*time.Millisecond), "v") // GETEX PX
		eq(t, c.Do(ctx, "GETEX", "g3", "EXAT", at.Unix()), any("v"))
		eq(t, c.Do(ctx, "GETEX", "g4", "PXAT", at.UnixMilli()), any("v"))
		for _, k := range []string{"e1", "e2", "e3", "e4", "g1", "g2", "g3", "g4"} {
			ttl(k, 98*s, 101*s)
		}

		// NX / XX / GT / LT change the TTL only when their condition holds.
		noErr(t, c.Set(ctx, "o", "v", 0))
		eq(t, c.ExpireXX(ctx, "o", 50*s), false)
		eq(t, c.ExpireNX(ctx, "o", 50*s), true)
		eq(t, c.ExpireNX(ctx, "o", 500*s), false)
		ttl("o", 48*s, 50*s)
		eq(t, c.ExpireGT(ctx, "o", 10*s), false)
		eq(t, c.ExpireGT(ctx, "o", 200*s), true)
		ttl("o", 198*s, 200*s)
		eq(t, c.ExpireLT(ctx, "o", 300*s), false)
		eq(t, c.ExpireLT(ctx, "o", 30*s), true)
		ttl("o", 28*s, 30*s)
		eq(t, c.ExpireXX(ctx, "o", 70*s), true)
		ttl("o", 68*s, 70*s)
		eq(t, c.Persist(ctx, "o"), true)
		eq(t, c.TTL(ctx, "o"), time.Duration(-1))
		eq(t, c.Persist(ctx, "o"), false)
		eq(t, c.TTL(ctx, "nope"), time.Duration(-2))

		// A sub-second TTL is kept in milliseconds.
		noErr(t, c.Set(ctx, "ms", "v", 1500*time.Millisecond))
		within(t, "PTTL ms", val(t, c.PTTL(ctx, "ms")), 500*time.Millisecond, 1500*time.Millisecond)
		ttl2 := val(t, c.TTL(ctx, "ms"))
		if ttl2 != time.Second && ttl2 != 2*time.Second {
			t.Errorf("TTL of a key with 1.5s left: %v, want 1s or 2s (rounded)", ttl2)
		}
	})
}

// TestExpiredKeysInvisible lets keys of both types expire and checks that
// no command returns them afterwards, and that writes treat them as
// missing: new keys without the old TTL, hashes without the old fields.
func TestExpiredKeysInvisible(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		const life = 200 * time.Millisecond
		// Everything is created in one round trip, so that it all still
		// exists when the check right after it runs.
		created := time.Now()
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "s", "v", life)
			p.HSet(ctx, "h", "f", "v", "g", "w")
			p.PExpire(ctx, "h", life)
			p.MSet(ctx, "m1", "1", "m2", "2", "live", "3")
			p.PExpire(ctx, "m1", life)
			p.PExpire(ctx, "m2", life)
			p.Set(ctx, "later", "4", time.Hour)
			// Keys the writes below reuse after they expire.
			for _, k := range []string{"w:setnx", "w:incr", "w:append", "w:setxx", "w:getset", "w:msetnx", "w:rename", "w:expire", "w:setget"} {
				p.Set(ctx, k, "old", life)
			}
			for _, k := range []string{"w:hset", "w:hsetnx", "w:hincr"} {
				p.HSet(ctx, k, "f", "old", "n", "41")
				p.PExpire(ctx, k, life)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		exists := val(t, c.Exists(ctx, "s", "h", "m1", "m2", "w:hset"))
		if time.Since(created) < life && exists != 5 {
			t.Errorf("EXISTS s h m1 m2 w:hset before they expire: %d, want 5", exists)
		}

		time.Sleep(life + 150*time.Millisecond)

		// Listing commands first: on Redis they do not delete what they skip.
		sameSet(t, "KEYS *", val(t, c.Keys(ctx, "*")), []string{"live", "later"})
		sameSet(t, "SCAN", scanAll(t, c, "", 10, ""), []string{"live", "later"})
		sameSet(t, "SCAN TYPE hash", scanAll(t, c, "", 10, "hash"), nil)
		eq(t, c.DBSize(ctx), int64(2))
		isNil(t, c.Get(ctx, "s"))
		eq(t, c.Exists(ctx, "s", "h", "m1", "m2", "live"), int64(1))
		eq(t, c.MGet(ctx, "s", "m1", "live", "m2"), []any{nil, nil, "3", nil})
		eq(t, c.Type(ctx, "s"), "none")
		eq(t, c.Type(ctx, "h"), "none")
		eq(t, c.HGetAll(ctx, "h"), map[string]string{})
		isNil(t, c.HGet(ctx, "h", "f"))
		eq(t, c.HMGet(ctx, "h", "f", "g"), []any{nil, nil})
		eq(t, c.HLen(ctx, "h"), int64(0))
		eq(t, c.HExists(ctx, "h", "f"), false)
		eq(t, c.HKeys(ctx, "h"), []string{})
		eq(t, c.HVals(ctx, "h"), []string{})
		if got := hscanAll(t, c, "h", "", 10); len(got) != 0 {
			t.Errorf("HSCAN of an expired hash: %v", got)
		}
		eq(t, c.StrLen(ctx, "m1"), int64(0))
		eq(t, c.GetRange(ctx, "m1", 0, -1), "")
		eq(t, c.TTL(ctx, "m2"), time.Duration(-2))
		eq(t, c.PTTL(ctx, "m2"), time.Duration(-2))
		isNil(t, c.GetDel(ctx, "m2"))
		isNil(t, c.GetEx(ctx, "m2", time.Minute))

		// Writes see the expired keys as missing.
		eq(t, c.SetNX(ctx, "w:setnx", "new", 0), true)
		eq(t, c.Incr(ctx, "w:incr"), int64(1))
		eq(t, c.Append(ctx, "w:append", "ab"), int64(2))
		eq(t, c.SetXX(ctx, "w:setxx", "new", 0), false)
		isNil(t, c.GetSet(ctx, "w:getset", "new"))
		eq(t, c.MSetNX(ctx, "w:msetnx", "new", "w:other", "x"), true)
		isErr(t, c.Rename(ctx, "w:rename", "w:renamed"), "ERR no such key")
		eq(t, c.Expire(ctx, "w:expire", time.Hour), false)
		isNil(t, c.SetArgs(ctx, "w:setget", "new", redis.SetArgs{Get: true}))
		eq(t, c.HSet(ctx, "w:hset", "g", "v"), int64(1))
		eq(t, c.HGetAll(ctx, "w:hset"), map[string]string{"g": "v"})
		eq(t, c.HSetNX(ctx, "w:hsetnx", "f", "new"), true)
		eq(t, c.HIncrBy(ctx, "w:hincr", "n", 1), int64(1))
		for _, k := range []string{"w:setnx", "w:incr", "w:append", "w:getset", "w:msetnx", "w:setget", "w:hset", "w:hsetnx", "w:hincr"} {
			eq(t, c.TTL(ctx, k), time.Duration(-1)) // the old TTL is gone with the old key
		}
		eq(t, c.Exists(ctx, "w:setxx", "w:rename", "w:renamed", "w:expire"), int64(0))
		eq(t, c.MGet(ctx, "w:setnx", "w:incr", "w:append", "w:getset", "w:msetnx", "w:setget"),
			[]any{"new", "1", "ab", "new", "new", "new"})
	})
}

// infoStat returns an integer field of INFO stats.
func infoStat(t *testing.T, c *redis.Client, field string) int64 {
	t.Helper()
	info := val(t, c.Info(t.Context(), "stats"))
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO stats %s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO stats has no %s field:\n%s", field, info)
	return 0
}

// TestExpiredKeysReclaimed checks that expired keys that nobody reads are
// deleted in the background (INFO stats expired_keys counts them, as in
// Redis), that reclaiming never deletes a key written again after it
// expired or whose TTL was removed in time, and that reclaimed keys stay
// gone.
func TestExpiredKeysReclaimed(t *testing.T) {
	fresh(t)
	c := newClient(t, 3)
	ctx := t.Context()
	const life = 200 * time.Millisecond
	// PERSIST must come before "persisted" expires, however slow the
	// machine; the final checks run after that expiry time.
	const persistedLife = 1500 * time.Millisecond
	before := infoStat(t, c, "expired_keys")
	created := time.Now()

	pipe := c.Pipeline()
	for i := 0; i < 50; i++ {
		pipe.Set(ctx, fmt.Sprintf("tmp:%d", i), i, life)
	}
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("tmph:%d", i)
		pipe.HSet(ctx, k, "a", 1, "b", 2, "c", 3)
		pipe.PExpire(ctx, k, life)
	}
	for i := 0; i < 5; i++ {
		pipe.Set(ctx, fmt.Sprintf("keep:%d", i), i, 0)
	}
	// Rewritten after expiry, before the reaper may have run; and saved by
	// PERSIST before expiry.
	pipe.Set(ctx, "rewritten", "old", life)
	pipe.HSet(ctx, "rewrittenh", "old", "x")
	pipe.PExpire(ctx, "rewrittenh", life)
	pipe.Set(ctx, "persisted", "v", persistedLife)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	eq(t, c.Persist(ctx, "persisted"), true)
	time.Sleep(life + 20*time.Millisecond)
	eq(t, c.Set(ctx, "rewritten", "new", 0), "OK")
	eq(t, c.HSet(ctx, "rewrittenh", "new", "y"), int64(1))

	// 60 keys expired that no command touches: they are reclaimed in the
	// background (the two rewritten ones may count as expired too).
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := infoStat(t, c, "expired_keys") - before
		if got >= 60 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expired_keys grew by %d in 10s after 60 keys expired, want >= 60 (no background reclaiming)", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := []string{"keep:0", "keep:1", "keep:2", "keep:3", "keep:4", "rewritten", "rewrittenh", "persisted"}
	// Give the reaper a few more rounds, and "persisted" time to pass its
	// old expiry, then check that nothing came back and nothing live was
	// taken.
	time.Sleep(500 * time.Millisecond)
	time.Sleep(time.Until(created.Add(persistedLife + 200*time.Millisecond)))
	for round := 0; round < 2; round++ {
		eq(t, c.DBSize(ctx), int64(len(want)))
		sameSet(t, "KEYS *", val(t, c.Keys(ctx, "*")), want)
		eq(t, c.Get(ctx, "rewritten"), "new")
		eq(t, c.TTL(ctx, "rewritten"), time.Duration(-1))
		eq(t, c.HGetAll(ctx, "rewrittenh"), map[string]string{"new": "y"})
		eq(t, c.Get(ctx, "persisted"), "v")
		eq(t, c.Exists(ctx, "tmp:0", "tmp:49", "tmph:0", "tmph:9"), int64(0))
		time.Sleep(300 * time.Millisecond)
	}
}
