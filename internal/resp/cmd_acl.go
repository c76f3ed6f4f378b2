package resp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	"github.com/strata-db/strata/internal/audit"
)

func init() {
	register(&command{name: "acl", arity: -2, flags: flagNoScript | flagLoading | flagStale, acl: []string{"@slow"}, run: cmdACL})
}

func cmdACL(x *call) error {
	sub := strings.ToLower(string(x.args[1]))
	args := x.args[2:]
	arity := func(ok bool) error {
		if ok {
			return nil
		}
		return replyError(fmt.Sprintf("ERR wrong number of arguments for 'acl|%s' command", sub))
	}
	switch sub {
	case "whoami":
		if err := arity(len(args) == 0); err != nil {
			return err
		}
		x.w.WriteBulkString(x.sess.userName())
	case "cat":
		if err := arity(len(args) <= 1); err != nil {
			return err
		}
		if len(args) == 0 {
			x.w.WriteArrayLen(len(aclCategories))
			for _, c := range aclCategories {
				x.w.WriteBulkString(c)
			}
			return nil
		}
		cat := strings.ToLower(string(args[0]))
		if !slices.Contains(aclCategories, cat) {
			return replyError(fmt.Sprintf("ERR Unknown category '%s'", args[0]))
		}
		names := commandsInCategory(cat)
		x.w.WriteArrayLen(len(names))
		for _, n := range names {
			x.w.WriteBulkString(n)
		}
	case "users", "list":
		if err := arity(len(args) == 0); err != nil {
			return err
		}
		snap := x.sess.srv.acl.Load()
		names := make([]string, 0, len(snap.users))
		for n := range snap.users {
			names = append(names, n)
		}
		sort.Strings(names)
		x.w.WriteArrayLen(len(names))
		for _, n := range names {
			if sub == "users" {
				x.w.WriteBulkString(n)
			} else {
				x.w.WriteBulkString(snap.users[n].describe())
			}
		}
	case "getuser":
		if err := arity(len(args) == 1); err != nil {
			return err
		}
		u := x.sess.srv.acl.Load().users[string(args[0])]
		if u == nil {
			x.w.WriteNull()
			return nil
		}
		writeACLUser(x.w, u.aclUser)
	case "setuser":
		if err := arity(len(args) >= 1); err != nil {
			return err
		}
		err := x.sess.srv.aclSetUser(x, string(args[0]), args[1:])
		x.sess.auditACL(x.args, err)
		return err
	case "deluser":
		if err := arity(len(args) >= 1); err != nil {
			return err
		}
		err := x.sess.srv.aclDelUser(x, args)
		x.sess.auditACL(x.args, err)
		return err
	case "log":
		if err := arity(len(args) <= 1); err != nil {
			return err
		}
		count := int64(10)
		if len(args) == 1 {
			if strings.EqualFold(string(args[0]), "reset") {
				x.sess.srv.aclLog.reset()
				x.w.WriteSimple("OK")
				return nil
			}
			n, ok := parseInt(args[0])
			if !ok {
				return errNotInteger
			}
			count = max(n, 0) // Redis answers an empty log for a negative count

		}
		writeACLLog(x.w, x.sess.srv.aclLog.recent(int(min(count, aclLogMaxLen))), x.sess.srv.cfg.Now())
	case "dryrun":
		if err := arity(len(args) >= 2); err != nil {
			return err
		}
		u := x.sess.srv.acl.Load().users[string(args[0])]
		if u == nil {
			return replyError(fmt.Sprintf("ERR User '%s' not found", args[0]))
		}
		cmd := lookupCommand(args[1])
		if cmd == nil {
			return replyError(fmt.Sprintf("ERR Command '%s' not found", args[1]))
		}
		if !cmd.arityOK(len(args) - 1) {
			return errArity(cmd.name)
		}
		d := u.check(cmd, args[1:])
		switch {
		case d == nil:
			x.w.WriteSimple("OK")
		case d.key:
			x.w.WriteBulkString(fmt.Sprintf("This user has no permissions to access the '%s' key", d.object))
		default:
			x.w.WriteBulkString(fmt.Sprintf("This user has no permissions to run the '%s' command", d.object))
		}
	case "genpass":
		bits := int64(256)
		if len(args) > 1 {
			return arity(false)
		}
		if len(args) == 1 {
			n, ok := parseInt(args[0])
			if !ok || n <= 0 || n > 4096 {
				return replyError("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
			}
			bits = n
		}
		b := make([]byte, (bits+7)/8)
		rand.Read(b)
		x.w.WriteBulkString(hex.EncodeToString(b)[:(bits+3)/4])
	case "help":
		writeHelp(x.w, "ACL", "CAT [<category>]", "DELUSER <username> [<username> ...]", "DRYRUN <username> <command> [<arg> ...]",
			"GENPASS [<bits>]", "GETUSER <username>", "LIST", "LOG [<count> | RESET]", "USERS",
			"SETUSER <username> <attribute> [<attribute> ...]", "WHOAMI")
	default:
		return errUnknownSubcommand("acl", x.args[1])
	}
	return nil
}

func writeACLUser(w *Writer, u *aclUser) {
	w.WriteMapLen(6)
	w.WriteBulkString("flags")
	flags := []string{map[bool]string{true: "on", false: "off"}[u.On]}
	if u.NoPass {
		flags = append(flags, "nopass")
	}
	w.WriteArrayLen(len(flags))
	for _, f := range flags {
		w.WriteBulkString(f)
	}
	w.WriteBulkString("passwords")
	w.WriteArrayLen(len(u.Passwords))
	for _, p := range u.Passwords {
		w.WriteBulkString(p)
	}
	w.WriteBulkString("commands")
	w.WriteBulkString(u.commandRules())
	w.WriteBulkString("keys")
	w.WriteBulkString(strings.Join(u.Keys, " "))
	w.WriteBulkString("channels")
	w.WriteBulkString(strings.Join(u.Channels, " "))
	w.WriteBulkString("selectors")
	w.WriteArrayLen(len(u.Selectors))
	for _, sel := range u.Selectors {
		w.WriteMapLen(3)
		w.WriteBulkString("commands")
		w.WriteBulkString(strings.Join(sel.Commands, " "))
		w.WriteBulkString("keys")
		w.WriteBulkString(strings.Join(sel.Keys, " "))
		w.WriteBulkString("channels")
		w.WriteBulkString(strings.Join(sel.Channels, " "))
	}
}

func validUserName(name string) error {
	if name == "" || strings.ContainsAny(name, " \x00") {
		return replyError("ERR Usernames can't contain spaces or null characters")
	}
	return nil
}

// aclSetUser creates or changes a user: every rule applies, or none.
func (s *Server) aclSetUser(x *call, name string, rules [][]byte) error {
	if err := validUserName(name); err != nil {
		return err
	}
	merged, err := mergeSelectorArgs(rules)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommandTimeout)
	defer cancel()
	err = s.changeACL(ctx, func(cur map[string]*aclUser) (map[string]*aclUser, error) {
		u := cur[name]
		switch {
		case u != nil:
			u = u.clone()
		case name == "default":
			// The implicit default user, made explicit by this change.
			u = s.defaultACLUser().aclUser.clone()
			if s.cfg.Password != "" {
				h, err := hashACLPassword(sha256Hex(s.cfg.Password))
				if err != nil {
					return nil, err
				}
				u.Passwords = []string{h}
			}
		default:
			u = newACLUser(name)
		}
		for _, r := range merged {
			if err := u.apply(r); err != nil {
				return nil, err
			}
		}
		return map[string]*aclUser{name: u}, nil
	})
	if err != nil {
		if ae, ok := err.(*aclError); ok {
			return replyError(ae.Error())
		}
		return err
	}
	x.w.WriteSimple("OK")
	return nil
}

// aclDelUser deletes users and replies how many existed; their
// connections are closed (session.refreshUser).
func (s *Server) aclDelUser(x *call, names [][]byte) error {
	for _, n := range names {
		if string(n) == "default" {
			return replyError("ERR The 'default' user cannot be removed")
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommandTimeout)
	defer cancel()
	deleted := 0
	err := s.changeACL(ctx, func(cur map[string]*aclUser) (map[string]*aclUser, error) {
		deleted = 0
		changes := map[string]*aclUser{}
		for _, n := range names {
			if _, ok := cur[string(n)]; ok {
				if _, dup := changes[string(n)]; !dup {
					deleted++
				}
				changes[string(n)] = nil
			}
		}
		return changes, nil
	})
	if err != nil {
		return err
	}
	x.w.WriteInt(int64(deleted))
	return nil
}

// audit records e for this connection in the audit log, if one is kept.
func (s *session) audit(e audit.Event) {
	if s.srv.cfg.Audit == nil {
		return
	}
	e.Protocol, e.ConnID = "redis", uint64(s.id)
	e.Host, _, _ = net.SplitHostPort(s.raw.RemoteAddr().String())
	if e.User == "" {
		e.User = s.userName()
	}
	s.srv.cfg.Audit.Log(e)
}

// auditACL records an ACL change with its rules, passwords and hashes
// replaced by ?.
func (s *session) auditACL(args [][]byte, err error) {
	if s.srv.cfg.Audit == nil {
		return
	}
	words := make([]string, len(args))
	for i, a := range args {
		w := string(a)
		if i >= 3 && len(w) > 0 && strings.ContainsRune("><#!", rune(w[0])) {
			w = w[:1] + "?"
		}
		if i < 2 {
			w = strings.ToUpper(w)
		}
		words[i] = w
	}
	text := strings.Join(words, " ")
	sum := sha256.Sum256([]byte(text))
	e := audit.Event{Event: "statement", Class: "dcl", Statement: text, Digest: hex.EncodeToString(sum[:]), Outcome: "success"}
	if err != nil {
		e.Outcome, e.Reason = "failure", err.Error()
	}
	s.audit(e)
}

// userName is the user the connection is authenticated as.
func (s *session) userName() string {
	if s.user == nil {
		return "default"
	}
	return s.user.Name
}

// setUser makes the connection authenticated as u.
func (s *session) setUser(u *aclCompiled, ver int64) {
	s.user, s.aclVer = u, ver
	s.uname.Store(&u.Name)
	s.authed = true
	s.r.SetUnauthenticated(false)
}

// refreshUser picks up a change of the users: the connection's user is
// recompiled, or the connection is closed if its user was deleted (as
// Redis does). It reports whether the connection may go on.
func (s *session) refreshUser(snap *aclSnapshot) bool {
	s.aclVer = snap.version
	if s.user == nil {
		return true
	}
	u := snap.users[s.user.Name]
	if u == nil {
		s.closing = true
		return false
	}
	s.user = u
	return true
}

// authenticate checks user (nil: default) and password and makes the
// connection that user's.
func (s *session) authenticate(user, pass []byte) error {
	snap := s.srv.acl.Load()
	name := "default"
	if user != nil {
		name = string(user)
	}
	u := snap.users[name]
	if user == nil && u != nil && u.On && u.NoPass {
		return replyError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	}
	host, _, _ := net.SplitHostPort(s.raw.RemoteAddr().String())
	// Before PBKDF2: a client guessing passwords waits here (loginguard).
	s.srv.guard.Wait(name, host)
	if u == nil || !u.On || (!u.NoPass && !s.srv.auth.verify(u, pass)) {
		s.srv.guard.Failed(name, host)
		metricAuthFailures.Inc()
		s.srv.cfg.Logger.Info("resp: login failed", "user", name, "client", s.raw.RemoteAddr().String())
		s.audit(audit.Event{Event: "login", User: name, Outcome: "failure", Reason: "WRONGPASS"})
		context := "toplevel"
		if s.inMulti {
			context = "multi"
		}
		s.srv.aclLog.add("auth", context, "AUTH", name, strings.TrimSuffix(s.info(), "\n"), s.srv.cfg.Now())
		return errWrongPass
	}
	s.srv.guard.Succeeded(name, host)
	s.setUser(u, snap.version)
	s.audit(audit.Event{Event: "login", User: name, Outcome: "success"})
	return nil
}

// initialUser authenticates a new (or RESET) connection as the default
// user when that user is on and has no password.
func (s *session) initialUser() {
	snap := s.srv.acl.Load()
	s.user, s.authed = nil, false
	if u := snap.users["default"]; u != nil && u.On && u.NoPass {
		s.setUser(u, snap.version)
		return
	}
	s.aclVer = snap.version
	s.uname.Store(nil)
	s.r.SetUnauthenticated(true)
}
