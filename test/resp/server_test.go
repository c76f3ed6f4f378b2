package resp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// issueCommands is every command issue 3 asks for: COMMAND must list them
// all (clients such as go-redis's cluster client and redis-cli read it).
var issueCommands = strings.Fields(`get set setnx setex psetex getset getdel getex mget mset msetnx
	incr incrby incrbyfloat decr decrby append strlen getrange setrange
	del unlink exists type rename expire pexpire expireat pexpireat ttl pttl persist scan keys dbsize
	flushdb flushall
	hset hsetnx hget hmget hgetall hdel hlen hexists hincrby hincrbyfloat hkeys hvals hscan
	multi exec discard watch unwatch
	ping echo hello select info command client config quit reset auth`)

// TestHello checks HELLO's reply: a RESP3 map after HELLO 3 (go-redis
// Protocol: 3 sends it on connect) and a flat array after HELLO 2.
func TestHello(t *testing.T) {
	fresh(t)
	ctx := t.Context()
	c3 := newClient(t, 3)
	conn := c3.Conn()
	defer conn.Close()
	got, err := conn.Do(ctx, "HELLO", "3").Result()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := got.(map[any]any)
	if !ok {
		t.Fatalf("HELLO 3 returned %T %v, want a map", got, got)
	}
	id := val(t, conn.ClientID(ctx))
	if m["proto"] != int64(3) || m["id"] != id || m["mode"] != "standalone" || m["role"] != "master" {
		t.Errorf("HELLO 3: proto, id, mode, role = %#v %#v %#v %#v, want 3 %d standalone master",
			m["proto"], m["id"], m["mode"], m["role"], id)
	}
	for _, k := range []string{"server", "version"} {
		if s, _ := m[k].(string); s == "" {
			t.Errorf("HELLO 3: %s = %#v, want a non-empty string", k, m[k])
		}
	}
	if _, ok := m["modules"].([]any); !ok {
		t.Errorf("HELLO 3: modules = %#v, want an array", m["modules"])
	}
	// The connection now speaks RESP3: HGETALL is a map.
	noErr(t, conn.HSet(ctx, "h", "f", "v"))
	if rep, _ := conn.Do(ctx, "HGETALL", "h").Result(); fmt.Sprint(rep) != "map[f:v]" {
		t.Errorf("HGETALL after HELLO 3: %#v, want a map", rep)
	}

	c2 := newClient(t, 2)
	got, err = c2.Do(ctx, "HELLO", "2").Result()
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := got.([]any)
	if !ok || len(arr) != 14 {
		t.Fatalf("HELLO 2 returned %#v, want an array of 7 pairs", got)
	}
	fields := map[any]any{}
	for i := 0; i < len(arr); i += 2 {
		fields[arr[i]] = arr[i+1]
	}
	if fields["proto"] != int64(2) || fields["mode"] != "standalone" {
		t.Errorf("HELLO 2: %#v", fields)
	}
	if rep, _ := c2.Do(ctx, "HGETALL", "h").Result(); fmt.Sprint(rep) != "[f v]" {
		t.Errorf("HGETALL over RESP2: %#v, want a flat array", rep)
	}

	// go-redis passes ClientName as HELLO's SETNAME option.
	named := newClientOpts(t, &redis.Options{Addr: tgt(t).addr, Protocol: 3, ClientName: "app-1"})
	eq(t, named.ClientGetName(ctx), "app-1")
}

func TestClientCommands(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		a, b := c.Conn(), c.Conn()
		defer a.Close()
		defer b.Close()
		ida, idb := val(t, a.ClientID(ctx)), val(t, b.ClientID(ctx))
		if ida <= 0 || idb <= 0 || ida == idb {
			t.Errorf("CLIENT ID of two connections: %d and %d, want distinct positive ids", ida, idb)
		}
		isNil(t, a.ClientGetName(ctx))
		eq(t, a.ClientSetName(ctx, "conn-a"), true)
		eq(t, a.ClientGetName(ctx), "conn-a")
		isNil(t, b.ClientGetName(ctx))
		info := val(t, a.ClientInfo(ctx)) // go-redis parses every field
		if info.ID != ida || info.Name != "conn-a" || info.DB != 0 {
			t.Errorf("CLIENT INFO: id %d name %q db %d, want %d conn-a 0", info.ID, info.Name, info.DB, ida)
		}
		eq(t, a.Select(ctx, 0), "OK")
		isErr(t, a.Select(ctx, 1), "ERR DB index is out of range")
		eq(t, a.ClientID(ctx), ida)
	})

	// CLIENT INFO's addr is the client's own address, as the server sees
	// it; id matches CLIENT ID.
	fresh(t)
	w := dialWire(t)
	id := w.do(t, "CLIENT", "ID")
	w.expect(t, "+OK", "CLIENT", "SETNAME", "raw")
	info := w.do(t, "CLIENT", "INFO")
	if info.kind != '$' || !strings.HasSuffix(info.str, "\n") {
		t.Fatalf("CLIENT INFO: %s, want a bulk string ending in a newline", info)
	}
	fields := map[string]string{}
	for _, f := range strings.Fields(info.str) {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	if fields["id"] != id.str || fields["addr"] != w.c.LocalAddr().String() || fields["name"] != "raw" || fields["db"] != "0" {
		t.Errorf("CLIENT INFO %q: want id=%s addr=%s name=raw db=0", info.str, id.str, w.c.LocalAddr())
	}
}

func TestConfigGet(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		eq(t, c.ConfigGet(ctx, "databases"), map[string]string{"databases": "1"})
		eq(t, c.ConfigGet(ctx, "no-such-parameter"), map[string]string{})
		// What redis-benchmark (save, appendonly) and common clients and
		// tools (maxmemory, maxmemory-policy) ask for.
		for _, p := range []string{"save", "appendonly", "maxmemory", "maxmemory-policy", "databases"} {
			if _, ok := val(t, c.ConfigGet(ctx, p))[p]; !ok {
				t.Errorf("CONFIG GET %s: parameter missing", p)
			}
		}
	})
}

func TestCommandCommand(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		// go-redis's strict parser of the COMMAND reply (used by its
		// cluster and ring clients).
		cmds := val(t, c.Command(ctx))
		for _, name := range issueCommands {
			if cmds[name] == nil {
				t.Errorf("COMMAND does not list %s", name)
			}
		}
		check := func(name string, arity, first, last, step int8, readOnly bool) {
			ci := cmds[name]
			if ci == nil {
				return
			}
			if ci.Name != name || ci.Arity != arity || ci.FirstKeyPos != first || ci.LastKeyPos != last ||
				ci.StepCount != step || ci.ReadOnly != readOnly {
				t.Errorf("COMMAND %s: name %q arity %d keys %d..%d step %d readonly %v, want %s %d %d..%d %d %v",
					name, ci.Name, ci.Arity, ci.FirstKeyPos, ci.LastKeyPos, ci.StepCount, ci.ReadOnly,
					name, arity, first, last, step, readOnly)
			}
		}
		check("get", 2, 1, 1, 1, true)
		check("set", -3, 1, 1, 1, false)
		check("mget", -2, 1, -1, 1, true)
		check("mset", -3, 1, -1, 2, false)
		check("del", -2, 1, -1, 1, false)
		check("rename", 3, 1, 2, 1, false)
		check("hset", -4, 1, 1, 1, false)
		check("hgetall", 2, 1, 1, 1, true)
		check("ping", -1, 0, 0, 0, false)

		count, err := c.Do(ctx, "COMMAND", "COUNT").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if count != int64(len(cmds)) {
			t.Errorf("COMMAND COUNT %d, but COMMAND lists %d commands", count, len(cmds))
		}

		info := val(t, c.Do(ctx, "COMMAND", "INFO", "get", "nosuchcommand", "HSET"))
		arr, ok := info.([]any)
		if !ok || len(arr) != 3 || arr[1] != nil {
			t.Fatalf("COMMAND INFO get nosuchcommand HSET: %#v, want [get-entry nil hset-entry]", info)
		}
		for i, want := range map[int]string{0: "get", 2: "hset"} {
			e, ok := arr[i].([]any)
			if !ok || len(e) < 6 || e[0] != want {
				t.Errorf("COMMAND INFO entry %d: %#v, want an entry named %s", i, arr[i], want)
			}
		}

		docs := val(t, c.Do(ctx, "COMMAND", "DOCS", "get"))
		var doc any
		switch d := docs.(type) {
		case map[any]any: // RESP3
			doc = d["get"]
		case []any: // RESP2: name, doc pairs
			if len(d) == 2 && d[0] == "get" {
				doc = d[1]
			}
		}
		fields := map[any]any{}
		switch d := doc.(type) {
		case map[any]any:
			fields = d
		case []any:
			for i := 0; i+1 < len(d); i += 2 {
				fields[d[i]] = d[i+1]
			}
		default:
			t.Fatalf("COMMAND DOCS get: %#v, want the docs of get", docs)
		}
		if s, _ := fields["summary"].(string); s == "" || fields["group"] != "string" {
			t.Errorf("COMMAND DOCS get: summary %#v group %#v, want a summary and group string", fields["summary"], fields["group"])
		}
	})
}

func TestInfo(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		all := val(t, c.Info(ctx))
		if !strings.HasPrefix(all, "# Server\r\n") || !strings.Contains(all, "\r\nredis_version:") {
			t.Errorf("INFO does not start with the Server section holding redis_version:\n%s", all)
		}
		m := val(t, c.InfoMap(ctx, "server"))
		if m["Server"]["redis_version"] == "" {
			t.Errorf("INFO server parsed by go-redis: %v", m)
		}
		if len(m) != 1 {
			t.Errorf("INFO server returned sections %v, want only Server", m)
		}
	})
}

func TestPingEchoSelectReset(t *testing.T) {
	eachProto(t, func(t *testing.T, c *redis.Client) {
		ctx := t.Context()
		eq(t, c.Ping(ctx), "PONG")
		eq(t, c.Do(ctx, "PING", "hi"), any("hi"))
		eq(t, c.Echo(ctx, "hello\r\nworld"), "hello\r\nworld")
		conn := c.Conn()
		defer conn.Close()
		eq(t, conn.Select(ctx, 0), "OK")
		noErr(t, conn.ClientSetName(ctx, "before-reset"))
		eq(t, conn.Do(ctx, "RESET"), any("RESET"))
		isNil(t, conn.ClientGetName(ctx))
		eq(t, conn.Ping(ctx), "PONG")
	})
	// A client configured for database 1 fails on connect, as against a
	// Redis with one database.
	fresh(t)
	c := newClientOpts(t, &redis.Options{Addr: tgt(t).addr, DB: 1})
	isErr(t, c.Ping(t.Context()), "ERR DB index is out of range")
}
