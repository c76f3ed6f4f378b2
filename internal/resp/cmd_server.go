package resp

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CompatVersion is the Redis version whose commands and replies the
// gateway follows; clients read it from HELLO and INFO.
const CompatVersion = "7.0.0"

func init() {
	conn := []string{"@connection"}
	srv := []string{"@admin", "@dangerous"}
	register(
		&command{name: "ping", arity: -1, flags: flagFast | flagStale, acl: conn, run: cmdPing},
		&command{name: "echo", arity: 2, flags: flagFast | flagStale, acl: conn, run: cmdEcho},
		&command{name: "hello", arity: -1, flags: flagNoAuth | flagFast | flagNoScript | flagLoading | flagStale, acl: conn, run: cmdHello},
		&command{name: "auth", arity: -2, flags: flagNoAuth | flagFast | flagNoScript | flagLoading | flagStale, acl: conn, run: cmdAuth},
		&command{name: "select", arity: 2, flags: flagFast | flagLoading | flagStale, acl: conn, run: cmdSelect},
		&command{name: "quit", arity: -1, flags: flagNoAuth | flagNoQueue | flagFast | flagNoScript | flagLoading | flagStale, acl: conn, run: cmdQuit},
		&command{name: "reset", arity: 1, flags: flagNoAuth | flagNoQueue | flagFast | flagNoScript | flagLoading | flagStale, acl: conn, run: cmdReset},
		&command{name: "client", arity: -2, flags: flagNoScript | flagLoading | flagStale, acl: conn, run: cmdClient},
		&command{name: "info", arity: -1, flags: flagLoading | flagStale, acl: []string{"@slow", "@dangerous"}, run: cmdInfo},
		&command{name: "command", arity: -1, flags: flagLoading | flagStale, acl: []string{"@slow", "@connection"}, run: cmdCommand},
		&command{name: "config", arity: -2, flags: flagAdmin | flagNoScript | flagLoading | flagStale, acl: srv, run: cmdConfig},
		&command{name: "time", arity: 1, flags: flagFast | flagLoading | flagStale, acl: []string{"@fast"}, run: cmdTime},
	)
}

func cmdPing(x *call) error {
	switch len(x.args) {
	case 1:
		x.w.WriteSimple("PONG")
	case 2:
		x.w.WriteBulk(x.args[1])
	default:
		return errArity("ping")
	}
	return nil
}

func cmdEcho(x *call) error {
	x.w.WriteBulk(x.args[1])
	return nil
}

func cmdTime(x *call) error {
	now := time.Now()
	x.w.WriteArrayLen(2)
	x.w.WriteBulk(strconv.AppendInt(nil, now.Unix(), 10))
	x.w.WriteBulk(strconv.AppendInt(nil, int64(now.Nanosecond()/1000), 10))
	return nil
}

func cmdAuth(x *call) error {
	var user, pass []byte
	switch len(x.args) {
	case 2:
		pass = x.args[1]
	case 3:
		user, pass = x.args[1], x.args[2]
	default:
		return errSyntax
	}
	if err := x.sess.authenticate(user, pass); err != nil {
		return err
	}
	x.w.WriteSimple("OK")
	return nil
}

func cmdHello(x *call) error {
	s := x.sess
	proto := s.w.Proto()
	args := x.args[1:]
	if len(args) > 0 {
		v, ok := parseInt(args[0])
		if !ok {
			return replyError("ERR Protocol version is not an integer or out of range")
		}
		if v != 2 && v != 3 {
			return replyError("NOPROTO unsupported protocol version")
		}
		proto = int(v)
		args = args[1:]
	}
	var name []byte
	authed := false
	for len(args) > 0 {
		switch {
		case equalFold(args[0], "auth") && len(args) >= 3:
			if err := s.authenticate(args[1], args[2]); err != nil {
				return err
			}
			authed = true
			args = args[3:]
		case equalFold(args[0], "setname") && len(args) >= 2:
			if err := validClientName(args[1]); err != nil {
				return err
			}
			name = args[1]
			args = args[2:]
		default:
			return replyError(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", args[0]))
		}
	}
	if !s.authed && !authed {
		return replyError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	}
	if name != nil {
		s.name = string(name)
	}
	s.w.SetProto(proto)
	x.w.SetProto(proto)
	x.w.WriteMapLen(7)
	x.w.WriteBulkString("server")
	x.w.WriteBulkString("redis")
	x.w.WriteBulkString("version")
	x.w.WriteBulkString(CompatVersion)
	x.w.WriteBulkString("proto")
	x.w.WriteInt(int64(proto))
	x.w.WriteBulkString("id")
	x.w.WriteInt(s.id)
	x.w.WriteBulkString("mode")
	x.w.WriteBulkString("standalone")
	x.w.WriteBulkString("role")
	x.w.WriteBulkString("master")
	x.w.WriteBulkString("modules")
	x.w.WriteArrayLen(0)
	return nil
}

func cmdSelect(x *call) error {
	n, ok := parseInt(x.args[1])
	if !ok {
		return errNotInteger
	}
	if n != 0 {
		return errDBIndex
	}
	x.w.WriteSimple("OK")
	return nil
}

func cmdQuit(x *call) error {
	x.w.WriteSimple("OK")
	x.sess.closing = true
	return nil
}

func cmdReset(x *call) error {
	s := x.sess
	s.endMulti()
	s.name = ""
	s.w.SetProto(2)
	s.initialUser()
	s.w.WriteSimple("RESET")
	return nil
}

func validClientName(b []byte) error {
	for _, c := range b {
		if c < '!' || c > '~' {
			return replyError("ERR Client names cannot contain spaces, newlines or special characters.")
		}
	}
	return nil
}

func (s *session) info() string {
	now := time.Now()
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=0 name=%s age=%d idle=0 flags=%s db=0 sub=0 psub=0 ssub=0 multi=%d qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=%s user=%s redir=-1 resp=%d\n",
		s.id, s.raw.RemoteAddr(), s.raw.LocalAddr(), s.name, int(now.Sub(s.created).Seconds()),
		map[bool]string{true: "x", false: "N"}[s.inMulti], multiLen(s), clientCmdName(s.lastCmd), s.userName(), s.w.Proto())
}

func multiLen(s *session) int {
	if !s.inMulti {
		return -1
	}
	return len(s.queued)
}

func clientCmdName(c string) string {
	if c == "" {
		return "NULL"
	}
	return c
}

func cmdClient(x *call) error {
	s := x.sess
	sub := x.args[1]
	switch {
	case equalFold(sub, "setname") && len(x.args) == 3:
		if err := validClientName(x.args[2]); err != nil {
			return err
		}
		s.name = string(x.args[2])
		x.w.WriteSimple("OK")
	case equalFold(sub, "getname") && len(x.args) == 2:
		if s.name == "" {
			x.w.WriteNull()
		} else {
			x.w.WriteBulkString(s.name)
		}
	case equalFold(sub, "id") && len(x.args) == 2:
		x.w.WriteInt(s.id)
	case equalFold(sub, "info") && len(x.args) == 2:
		x.w.WriteVerbatim("txt", s.info())
	case equalFold(sub, "list"):
		s.srv.mu.Lock()
		var b strings.Builder
		for other := range s.srv.sessions {
			if other == s {
				b.WriteString(s.info())
			} else {
				user := "default"
				if n := other.uname.Load(); n != nil {
					user = *n
				}
				fmt.Fprintf(&b, "id=%d addr=%s name=%s user=%s\n", other.id, other.raw.RemoteAddr(), "", user)
			}
		}
		s.srv.mu.Unlock()
		x.w.WriteVerbatim("txt", b.String())
	case equalFold(sub, "setinfo") && len(x.args) == 4:
		// lib-name / lib-ver, sent by clients on connect.
		if !equalFold(x.args[2], "lib-name") && !equalFold(x.args[2], "lib-ver") {
			return replyError(fmt.Sprintf("ERR Unrecognized option '%s'", x.args[2]))
		}
		x.w.WriteSimple("OK")
	case (equalFold(sub, "no-evict") || equalFold(sub, "no-touch")) && len(x.args) == 3:
		x.w.WriteSimple("OK")
	case equalFold(sub, "help"):
		writeHelp(x.w, "CLIENT", "GETNAME", "ID", "INFO", "LIST", "SETNAME <name>", "SETINFO <LIB-NAME|LIB-VER> <value>")
	default:
		if lookupSub(sub, "setname", "getname", "id", "info", "setinfo", "no-evict", "no-touch") {
			return replyError(fmt.Sprintf("ERR wrong number of arguments for 'client|%s' command", strings.ToLower(string(sub))))
		}
		return errUnknownSubcommand("client", sub)
	}
	return nil
}

func lookupSub(sub []byte, names ...string) bool {
	for _, n := range names {
		if equalFold(sub, n) {
			return true
		}
	}
	return false
}

func writeHelp(w *Writer, cmd string, lines ...string) {
	w.WriteArrayLen(len(lines) + 1)
	w.WriteSimple(cmd + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range lines {
		w.WriteSimple(l)
	}
}

// configParams are the settings CONFIG GET reports: what clients and
// tools probe (redis-benchmark reads save and appendonly).
func (s *Server) configParams() map[string]string {
	port := ""
	if i := strings.LastIndexByte(s.cfg.Addr, ':'); i >= 0 {
		port = s.cfg.Addr[i+1:]
	}
	return map[string]string{
		"save":                   "",
		"appendonly":             "yes",
		"appendfsync":            "always",
		"databases":              "1",
		"maxmemory":              "0",
		"maxmemory-policy":       "noeviction",
		"timeout":                "0",
		"proto-max-bulk-len":     strconv.Itoa(s.cfg.MaxValueSize),
		"port":                   port,
		"bind":                   strings.TrimSuffix(s.cfg.Addr, ":"+port),
		"cluster-enabled":        "no",
		"replica-read-only":      "yes",
		"slave-read-only":        "yes",
		"maxclients":             "10000",
		"notify-keyspace-events": "",
		"io-threads":             "1",
	}
}

func cmdConfig(x *call) error {
	sub := x.args[1]
	switch {
	case equalFold(sub, "get") && len(x.args) >= 3:
		params := x.sess.srv.configParams()
		names := make([]string, 0, len(params))
		for name := range params {
			for _, p := range x.args[2:] {
				if globMatch([]byte(strings.ToLower(string(p))), []byte(name)) {
					names = append(names, name)
					break
				}
			}
		}
		sort.Strings(names)
		x.w.WriteMapLen(len(names))
		for _, n := range names {
			x.w.WriteBulkString(n)
			x.w.WriteBulkString(params[n])
		}
	case equalFold(sub, "set") && len(x.args) >= 4:
		return replyError(fmt.Sprintf("ERR Unknown option or number of arguments for CONFIG SET - '%s'", x.args[2]))
	case equalFold(sub, "resetstat") && len(x.args) == 2:
		x.w.WriteSimple("OK")
	case equalFold(sub, "help"):
		writeHelp(x.w, "CONFIG", "GET <pattern>", "RESETSTAT")
	default:
		if lookupSub(sub, "get", "set", "resetstat") {
			return replyError(fmt.Sprintf("ERR wrong number of arguments for 'config|%s' command", strings.ToLower(string(sub))))
		}
		return errUnknownSubcommand("config", sub)
	}
	return nil
}

func cmdInfo(x *call) error {
	s := x.sess.srv
	want := map[string]bool{}
	for _, a := range x.args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["default"] || want["everything"]
	show := func(sec string) bool { return all || want[sec] }
	var b strings.Builder
	section := func(name string, kv ...any) {
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s\r\n", name)
		for i := 0; i+1 < len(kv); i += 2 {
			fmt.Fprintf(&b, "%s:%v\r\n", kv[i], kv[i+1])
		}
	}
	up := time.Since(s.started)
	if show("server") {
		section("Server", "redis_version", CompatVersion, "strata_version", "0.1.0-dev", "redis_mode", "standalone",
			"os", runtime.GOOS, "arch_bits", 64, "process_id", os.Getpid(), "tcp_port", s.configParams()["port"],
			"uptime_in_seconds", int(up.Seconds()), "uptime_in_days", int(up.Hours()/24))
	}
	if show("clients") {
		s.mu.Lock()
		n := len(s.sessions)
		s.mu.Unlock()
		section("Clients", "connected_clients", n, "maxclients", 10000)
	}
	if show("memory") {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		section("Memory", "used_memory", ms.HeapAlloc, "used_memory_human", fmt.Sprintf("%.2fM", float64(ms.HeapAlloc)/(1<<20)),
			"used_memory_rss", ms.Sys, "maxmemory", 0, "maxmemory_policy", "noeviction")
	}
	if show("persistence") {
		section("Persistence", "loading", 0, "aof_enabled", 1, "rdb_changes_since_last_save", 0)
	}
	if show("stats") {
		section("Stats", "total_connections_received", s.stats.connections.Load(),
			"total_commands_processed", s.stats.commands.Load(), "expired_keys", s.stats.expired.Load(),
			"strata_txn_retries", s.stats.retries.Load())
	}
	if show("replication") {
		section("Replication", "role", "master", "connected_slaves", 0)
	}
	if show("keyspace") {
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommandTimeout)
		defer cancel()
		var keys, expires int64
		err := s.retry(ctx, func() error {
			keys, expires = 0, 0
			return s.attempt(ctx, func(ks *keyspace) (bool, error) {
				return false, ks.eachKey(nil, func(_ []byte, m meta) error {
					keys++
					if m.expireAt != 0 {
						expires++
					}
					return nil
				})
			})
		})
		if err != nil {
			return err
		}
		if keys > 0 {
			section("Keyspace", "db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=0", keys, expires))
		} else {
			section("Keyspace")
		}
	}
	x.w.WriteVerbatim("txt", b.String())
	return nil
}

var commandGroups = map[string]string{"@string": "string", "@keyspace": "generic", "@hash": "hash",
	"@transaction": "transactions", "@connection": "connection", "@admin": "server", "@slow": "server", "@fast": "server"}

func writeCommandInfo(w *Writer, c *command) {
	w.WriteArrayLen(10)
	w.WriteBulkString(c.name)
	w.WriteInt(int64(c.arity))
	var flags []string
	for _, f := range flagNames {
		if c.flags&f.f != 0 {
			flags = append(flags, f.name)
		}
	}
	w.WriteSetLen(len(flags))
	for _, f := range flags {
		w.WriteSimple(f)
	}
	w.WriteInt(int64(c.firstKey))
	w.WriteInt(int64(c.lastKey))
	w.WriteInt(int64(c.step))
	w.WriteSetLen(len(c.acl))
	for _, a := range c.acl {
		w.WriteSimple(a)
	}
	w.WriteArrayLen(0) // tips
	w.WriteArrayLen(0) // key specs
	w.WriteArrayLen(0) // subcommands
}

func sortedCommands() []*command {
	out := make([]*command, 0, len(commands))
	for _, c := range commands {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func cmdCommand(x *call) error {
	if len(x.args) == 1 {
		cs := sortedCommands()
		x.w.WriteArrayLen(len(cs))
		for _, c := range cs {
			writeCommandInfo(x.w, c)
		}
		return nil
	}
	sub := x.args[1]
	switch {
	case equalFold(sub, "count") && len(x.args) == 2:
		x.w.WriteInt(int64(len(commands)))
	case equalFold(sub, "info"):
		names := x.args[2:]
		if len(names) == 0 {
			cs := sortedCommands()
			x.w.WriteArrayLen(len(cs))
			for _, c := range cs {
				writeCommandInfo(x.w, c)
			}
			return nil
		}
		x.w.WriteArrayLen(len(names))
		for _, n := range names {
			if c := lookupCommand(n); c != nil {
				writeCommandInfo(x.w, c)
			} else {
				x.w.WriteNull()
			}
		}
	case equalFold(sub, "docs"):
		var cs []*command
		if len(x.args) == 2 {
			cs = sortedCommands()
		} else {
			for _, n := range x.args[2:] {
				if c := lookupCommand(n); c != nil {
					cs = append(cs, c)
				}
			}
		}
		x.w.WriteMapLen(len(cs))
		for _, c := range cs {
			x.w.WriteBulkString(c.name)
			x.w.WriteMapLen(3)
			x.w.WriteBulkString("summary")
			x.w.WriteBulkString(c.summary)
			x.w.WriteBulkString("since")
			x.w.WriteBulkString("1.0.0")
			x.w.WriteBulkString("group")
			group := "generic"
			if len(c.acl) > 0 {
				if g, ok := commandGroups[c.acl[0]]; ok {
					group = g
				}
			}
			x.w.WriteBulkString(group)
		}
	case equalFold(sub, "list") && len(x.args) == 2:
		cs := sortedCommands()
		x.w.WriteArrayLen(len(cs))
		for _, c := range cs {
			x.w.WriteBulkString(c.name)
		}
	case equalFold(sub, "help"):
		writeHelp(x.w, "COMMAND", "(no subcommand)", "COUNT", "DOCS [<command-name> ...]", "INFO [<command-name> ...]", "LIST")
	default:
		if equalFold(sub, "count") || equalFold(sub, "list") {
			return replyError(fmt.Sprintf("ERR wrong number of arguments for 'command|%s' command", strings.ToLower(string(sub))))
		}
		return errUnknownSubcommand("command", sub)
	}
	return nil
}
