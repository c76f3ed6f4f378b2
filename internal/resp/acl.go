package resp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/strata-db/strata/internal/sql/privilege"
)

// Redis ACL users (ACL SETUSER and friends, AUTH user pass).
//
// A user is stored in the cluster as an aclUser (acl_store.go) holding its
// rules in the normalised form ACL LIST prints; every node compiles the
// rules into an aclCompiled, which dispatch consults per command. The
// `default` user exists even when nothing is stored: on, nopass (or with
// Config.Password as its only password), ~* &* +@all, which is the
// gateway's behaviour without ACLs. Once `ACL SETUSER default ...` stored
// it, the stored one is used instead.
//
// Selectors, as in Redis 7: `(~temp:* +get +set)` adds a selector, a
// further set of command and key rules; a command runs when the user's
// root rules or any one selector allows both it and all its keys. The
// refusal then reported (NOPERM, ACL LOG) is a key's if some selector
// allowed the command (the latest in the arguments of those refused),
// else the command's. Refusals of commands, keys and
// AUTHs are kept in this node's ACL LOG (acl_log.go).
//
// Key access (%R~, %W~, ~) follows Redis 7's key flags (keyAccess).
//
// Differences from Redis: passwords are stored as salted PBKDF2-SHA256
// hashes of the password's SHA-256 (so `#<sha256 hex>` still adds a
// password), and ACL LIST/GETUSER show those hashes; there are no
// channels, so channel rules are kept and printed but check nothing.

// aclUser is a user as stored: its rules, normalised.
type aclUser struct {
	Name   string `json:"name"`
	On     bool   `json:"on,omitempty"`
	NoPass bool   `json:"nopass,omitempty"`
	// Passwords are salted hashes (hashACLPassword).
	Passwords []string `json:"passwords,omitempty"`
	// Keys are key patterns with their access: "~p", "%R~p", "%W~p".
	Keys []string `json:"keys,omitempty"`
	// Channels are "&p" patterns.
	Channels []string `json:"channels,omitempty"`
	// Commands are command rules in order; the first is "+@all" or "-@all".
	Commands []string `json:"commands,omitempty"`
	// Selectors are further sets of key and command rules (see above).
	Selectors []aclSelector `json:"selectors,omitempty"`
}

// aclSelector is one selector: key, channel and command rules as in
// aclUser.
type aclSelector struct {
	Keys     []string `json:"keys,omitempty"`
	Channels []string `json:"channels,omitempty"`
	Commands []string `json:"commands,omitempty"`
}

// describe is the selector as ACL LIST prints it: "(~k resetchannels -@all +get)".
func (sel aclSelector) describe() string {
	var parts []string
	parts = append(parts, sel.Keys...)
	if len(sel.Channels) == 0 {
		parts = append(parts, "resetchannels")
	}
	parts = append(parts, sel.Channels...)
	parts = append(parts, sel.Commands...)
	return "(" + strings.Join(parts, " ") + ")"
}

func newACLUser(name string) *aclUser {
	return &aclUser{Name: name, Commands: []string{"-@all"}}
}

func (u *aclUser) clone() *aclUser {
	c := *u
	c.Passwords = slices.Clone(u.Passwords)
	c.Keys = slices.Clone(u.Keys)
	c.Channels = slices.Clone(u.Channels)
	c.Commands = slices.Clone(u.Commands)
	c.Selectors = slices.Clone(u.Selectors)
	return &c
}

// describe is the user as ACL LIST prints it (rules ACL SETUSER takes).
func (u *aclUser) describe() string {
	var b strings.Builder
	b.WriteString("user ")
	b.WriteString(u.Name)
	b.WriteString(map[bool]string{true: " on", false: " off"}[u.On])
	if u.NoPass {
		b.WriteString(" nopass")
	}
	for _, p := range u.Passwords {
		b.WriteString(" #" + p)
	}
	for _, k := range u.Keys {
		b.WriteString(" " + k)
	}
	if len(u.Channels) == 0 {
		b.WriteString(" resetchannels")
	}
	for _, c := range u.Channels {
		b.WriteString(" " + c)
	}
	b.WriteString(" " + u.commandRules())
	for _, sel := range u.Selectors {
		b.WriteString(" " + sel.describe())
	}
	return b.String()
}

func (u *aclUser) commandRules() string { return strings.Join(u.Commands, " ") }

// aclError is an error in one ACL SETUSER modifier.
type aclError struct{ op, msg string }

func (e *aclError) Error() string {
	return fmt.Sprintf("ERR Error in ACL SETUSER modifier '%s': %s", e.op, e.msg)
}

// apply changes u by one ACL SETUSER rule.
func (u *aclUser) apply(op string) error {
	bad := func(msg string) error { return &aclError{op, msg} }
	lower := strings.ToLower(op)
	switch lower {
	case "on":
		u.On = true
		return nil
	case "off":
		u.On = false
		return nil
	case "nopass":
		u.NoPass, u.Passwords = true, nil
		return nil
	case "resetpass":
		u.NoPass, u.Passwords = false, nil
		return nil
	case "allkeys":
		u.Keys = []string{"~*"}
		return nil
	case "resetkeys":
		u.Keys = nil
		return nil
	case "allchannels":
		u.Channels = []string{"&*"}
		return nil
	case "resetchannels":
		u.Channels = nil
		return nil
	case "allcommands":
		u.Commands = []string{"+@all"}
		return nil
	case "nocommands":
		u.Commands = []string{"-@all"}
		return nil
	case "reset":
		*u = *newACLUser(u.Name)
		return nil
	case "clearselectors":
		u.Selectors = nil
		return nil
	case "sanitize-payload", "skip-sanitize-payload":
		return nil
	}
	if op == "" {
		return bad("Syntax error")
	}
	switch op[0] {
	case '>':
		h, err := hashACLPassword(sha256Hex(op[1:]))
		if err != nil {
			return err
		}
		u.addPassword(h)
		return nil
	case '#':
		h := op[1:]
		if !isSHA256Hex(h) {
			if _, err := verifyACLHash(h, ""); err != nil {
				return bad("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
			}
			u.addPassword(h) // a stored hash from ACL LIST
			return nil
		}
		sh, err := hashACLPassword(h)
		if err != nil {
			return err
		}
		u.addPassword(sh)
		return nil
	case '<', '!':
		digest := op[1:]
		if op[0] == '<' {
			digest = sha256Hex(op[1:])
		} else if !isSHA256Hex(digest) {
			if i := slices.Index(u.Passwords, digest); i >= 0 {
				u.Passwords = slices.Delete(u.Passwords, i, i+1)
				return nil
			}
			return bad("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
		}
		kept := u.Passwords[:0:0]
		for _, h := range u.Passwords {
			if ok, _ := verifyACLHash(h, digest); !ok {
				kept = append(kept, h)
			}
		}
		if len(kept) == len(u.Passwords) {
			return bad("The password you are trying to remove from the user does not exist")
		}
		u.Passwords = kept
		return nil
	case '~', '%':
		access, pat, ok := parseKeyRule(op)
		if !ok {
			return bad("Syntax error")
		}
		if slices.Contains(u.Keys, "~*") {
			return bad("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")
		}
		if access == "" && pat == "*" {
			u.Keys = []string{"~*"}
			return nil
		}
		rule := "%" + access + "~" + pat
		if access == "RW" {
			rule = "~" + pat
		}
		if !slices.Contains(u.Keys, rule) {
			u.Keys = append(u.Keys, rule)
		}
		return nil
	case '&':
		if slices.Contains(u.Channels, "&*") {
			return bad("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels")
		}
		if op == "&*" {
			u.Channels = []string{"&*"}
		} else if !slices.Contains(u.Channels, op) {
			u.Channels = append(u.Channels, op)
		}
		return nil
	case '+', '-':
		target := strings.ToLower(op[1:])
		if target == "@all" {
			u.Commands = []string{string(op[0]) + "@all"}
			return nil
		}
		if !validACLTarget(target) {
			return bad("Unknown command or category name in ACL")
		}
		rule := string(op[0]) + target
		// A later rule on the same target makes earlier ones moot.
		u.Commands = slices.DeleteFunc(u.Commands, func(r string) bool { return r[1:] == target })
		if len(u.Commands) == 0 {
			u.Commands = []string{"-@all"}
		}
		u.Commands = append(u.Commands, rule)
		return nil
	case '(':
		if !strings.HasSuffix(op, ")") {
			return bad(fmt.Sprintf("Unmatched parenthesis in acl selector starting at '%s'.", op))
		}
		sel := &aclUser{Commands: []string{"-@all"}}
		for _, r := range strings.Fields(op[1 : len(op)-1]) {
			switch strings.ToLower(r) {
			case "allkeys", "resetkeys", "allchannels", "resetchannels", "allcommands", "nocommands":
			default:
				if !strings.ContainsRune("~%&+-", rune(r[0])) {
					return bad("Syntax error")
				}
			}
			if err := sel.apply(r); err != nil {
				return bad(err.(*aclError).msg)
			}
		}
		u.Selectors = append(u.Selectors, aclSelector{Keys: sel.Keys, Channels: sel.Channels, Commands: sel.Commands})
		return nil
	}
	return bad("Syntax error")
}

func (u *aclUser) addPassword(h string) {
	u.NoPass = false
	u.Passwords = append(u.Passwords, h)
}

// mergeSelectorArgs joins the arguments of ACL SETUSER that make up one
// selector ("(~x", "+get)" -> "(~x +get)"), as Redis does, so that a
// selector may be given as one argument or several.
func mergeSelectorArgs(args [][]byte) ([]string, error) {
	var out []string
	var open []string
	for _, a := range args {
		r := string(a)
		switch {
		case open != nil:
			open = append(open, r)
			if strings.HasSuffix(r, ")") {
				out = append(out, strings.Join(open, " "))
				open = nil
			}
		case strings.HasPrefix(r, "(") && !strings.HasSuffix(r, ")"):
			open = []string{r}
		default:
			out = append(out, r)
		}
	}
	if open != nil {
		return nil, replyError(fmt.Sprintf("ERR Unmatched parenthesis in acl selector starting at '%s'.", open[0]))
	}
	return out, nil
}

// parseKeyRule splits "~p", "%R~p", "%W~p" and "%RW~p" into access and
// pattern ("" access for plain "~").
func parseKeyRule(op string) (access, pat string, ok bool) {
	if op[0] == '~' {
		return "RW", op[1:], true
	}
	i := strings.IndexByte(op, '~')
	if i < 2 {
		return "", "", false
	}
	r, w := false, false
	for _, c := range strings.ToUpper(op[1:i]) {
		switch c {
		case 'R':
			r = true
		case 'W':
			w = true
		default:
			return "", "", false
		}
	}
	switch {
	case r && w:
		access = "RW"
	case r:
		access = "R"
	default:
		access = "W"
	}
	return access, op[i+1:], true
}

// validACLTarget reports whether t names a category ("@read"), a Redis
// command ("get", one this gateway lacks included, so that rules written
// for Redis apply) or a subcommand of one ("client|setname").
func validACLTarget(t string) bool {
	if cat, ok := strings.CutPrefix(t, "@"); ok {
		return slices.Contains(aclCategories, cat)
	}
	name, _, _ := strings.Cut(t, "|")
	return commands[name] != nil || redisCommandNames[name]
}

// The ACL categories, in the order ACL CAT lists them.
var aclCategories = []string{"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous",
	"connection", "transaction", "scripting"}

// subcommandCategories are the categories of subcommands that differ from
// their command's: the administrative ones.
var subcommandCategories = map[string]map[string][]string{
	"acl": {
		"log": {"admin", "slow", "dangerous"}, "dryrun": {"admin", "slow", "dangerous"},
		"setuser": {"admin", "slow", "dangerous"}, "deluser": {"admin", "slow", "dangerous"},
		"getuser": {"admin", "slow", "dangerous"}, "list": {"admin", "slow", "dangerous"},
		"users": {"admin", "slow", "dangerous"}, "whoami": {"slow"}, "cat": {"slow"},
		"genpass": {"slow"}, "help": {"slow"},
	},
	"client": {
		"list": {"admin", "slow", "dangerous", "connection"}, "no-evict": {"admin", "slow", "dangerous", "connection"},
	},
}

// categoriesOf returns the categories of command c (or of its
// subcommand sub): those it declares and those its flags imply, as Redis
// derives them.
func categoriesOf(c *command, sub string) []string {
	var out []string
	add := func(s string) {
		s = strings.TrimPrefix(s, "@")
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if cats, ok := subcommandCategories[c.name][sub]; ok {
		for _, s := range cats {
			add(s)
		}
		return out
	}
	for _, s := range c.acl {
		add(s)
	}
	if c.flags&flagWrite != 0 {
		add("write")
	}
	if c.flags&flagReadonly != 0 {
		add("read")
	}
	if c.flags&flagAdmin != 0 {
		add("admin")
		add("dangerous")
	}
	if c.flags&flagFast != 0 {
		add("fast")
	} else if !slices.Contains(out, "fast") {
		add("slow")
	}
	return out
}

// commandsInCategory returns the commands (and subcommands, "acl|setuser")
// of category cat, sorted.
func commandsInCategory(cat string) []string {
	var out []string
	for _, c := range commands {
		if subs, ok := subcommandCategories[c.name]; ok {
			for sub, cats := range subs {
				if slices.Contains(cats, cat) {
					out = append(out, c.name+"|"+sub)
				}
			}
		}
		if slices.Contains(categoriesOf(c, ""), cat) {
			out = append(out, c.name)
		}
	}
	sort.Strings(out)
	return out
}

// keyPerm is one key pattern with its access.
type keyPerm struct {
	pat         []byte
	read, write bool
}

// aclCompiled is a user ready to check commands against.
type aclCompiled struct {
	*aclUser
	// allCommands: every command and subcommand is allowed; allKeys: ~*.
	allCommands, allKeys bool
	cmds                 map[string]bool // by command name
	subs                 map[string]bool // "cmd|sub", overriding cmds
	keys                 []keyPerm
	// configPassword is the default user's password from Config.Password
	// when no default user is stored (compared as given, as before ACLs).
	configPassword string
	// selectors are the user's selectors, compiled.
	selectors []*aclCompiled
}

func compileACLUser(u *aclUser) *aclCompiled {
	c := &aclCompiled{aclUser: u, cmds: map[string]bool{}, subs: map[string]bool{}}
	setCmd := func(name string, v bool) {
		c.cmds[name] = v
		for k := range c.subs {
			if strings.HasPrefix(k, name+"|") {
				delete(c.subs, k)
			}
		}
	}
	for _, r := range u.Commands {
		allow, target := r[0] == '+', r[1:]
		switch {
		case target == "@all":
			clear(c.subs)
			for name := range commands {
				c.cmds[name] = allow
			}
		case target[0] == '@':
			cat := target[1:]
			for name, cmd := range commands {
				if subs, ok := subcommandCategories[name]; ok {
					// Subcommands with categories of their own one by
					// one, the others with their command.
					for sub, cats := range subs {
						if slices.Contains(cats, cat) {
							c.subs[name+"|"+sub] = allow
						}
					}
					if slices.Contains(categoriesOf(cmd, ""), cat) {
						c.cmds[name] = allow
					}
					continue
				}
				if slices.Contains(categoriesOf(cmd, ""), cat) {
					setCmd(name, allow)
				}
			}
		case strings.Contains(target, "|"):
			c.subs[target] = allow
		default:
			setCmd(target, allow)
		}
	}
	c.allCommands = len(c.subs) == 0
	for name := range commands {
		if !c.cmds[name] {
			c.allCommands = false
		}
	}
	for _, k := range u.Keys {
		access, pat, _ := parseKeyRule(k)
		if k == "~*" {
			c.allKeys = true
		}
		c.keys = append(c.keys, keyPerm{pat: []byte(pat), read: strings.Contains(access, "R"), write: strings.Contains(access, "W")})
	}
	for _, sel := range u.Selectors {
		c.selectors = append(c.selectors, compileACLUser(&aclUser{Name: u.Name, Keys: sel.Keys, Channels: sel.Channels, Commands: sel.Commands}))
	}
	return c
}

// canRun reports whether the user may run cmd with these arguments
// (args[1] is the subcommand of a container command).
func (c *aclCompiled) canRun(cmd *command, args [][]byte) bool {
	if c.allCommands {
		return true
	}
	if len(c.subs) > 0 && len(args) > 1 {
		// "+client|setname", or a category rule, which sets the
		// subcommands of a container command one by one.
		if v, ok := c.subs[cmd.name+"|"+strings.ToLower(string(args[1]))]; ok {
			return v
		}
	}
	return c.cmds[cmd.name]
}

// canAccess reports whether the user may access key with the given
// needs: a pattern that matches the key and grants them (any pattern that
// matches when neither is needed).
func (c *aclCompiled) canAccess(key []byte, read, write bool) bool {
	if c.allKeys {
		return true
	}
	for _, k := range c.keys {
		if (write && !k.write) || (read && !k.read) {
			continue
		}
		if globMatch(k.pat, key) {
			return true
		}
	}
	return false
}

// Key access, as Redis 7 derives it from each key's flags: read access
// for a key whose data the command returns, write access for a key it
// changes, both for a key it does both to (INCR returns the new value,
// GETDEL the old one), and only a matching pattern for a key it merely
// looks at (EXISTS, TYPE, STRLEN, HLEN).
const (
	keyNeedsNothing = iota + 1
	keyNeedsRead
	keyNeedsWrite
	keyNeedsBoth
)

// keyNeeds are the commands whose keys need other than the default:
// write access for a write command, read access for any other.
var keyNeeds = map[string]int{
	"exists": keyNeedsNothing, "type": keyNeedsNothing, "strlen": keyNeedsNothing,
	"hlen": keyNeedsNothing, "hexists": keyNeedsNothing, "hstrlen": keyNeedsNothing,
	"getset": keyNeedsBoth, "getdel": keyNeedsBoth, "getex": keyNeedsBoth,
	"incr": keyNeedsBoth, "decr": keyNeedsBoth, "incrby": keyNeedsBoth, "decrby": keyNeedsBoth,
	"incrbyfloat": keyNeedsBoth, "hincrby": keyNeedsBoth, "hincrbyfloat": keyNeedsBoth,
}

// keyAccess returns what cmd needs of its i-th key.
func keyAccess(cmd *command, args [][]byte, i int) (read, write bool) {
	need := keyNeeds[cmd.name]
	switch cmd.name {
	case "set":
		// SET ... GET returns the old value.
		for _, a := range args[3:] {
			if strings.EqualFold(string(a), "get") {
				need = keyNeedsBoth
			}
		}
	case "rename", "renamenx":
		if i == 0 {
			need = keyNeedsBoth // the source is read and deleted
		}
	}
	switch need {
	case keyNeedsNothing:
		return false, false
	case keyNeedsBoth:
		return true, true
	}
	if cmd.flags&flagWrite != 0 {
		return false, true
	}
	return true, false
}

// deniedName is the command name NOPERM quotes: "acl|setuser" for a
// subcommand of a container command.
func deniedName(cmd *command, args [][]byte) string {
	if _, ok := subcommandCategories[cmd.name]; ok && len(args) > 1 {
		return cmd.name + "|" + strings.ToLower(string(args[1]))
	}
	return cmd.name
}

func errNoPermCommand(name string) replyError {
	return replyError(fmt.Sprintf("NOPERM this user has no permissions to run the '%s' command", name))
}

const errNoPermKey replyError = "NOPERM this user has no permissions to access one of the keys used as arguments"

// aclDenial is why a command was refused: its name (command) or one of
// its keys (key), for the NOPERM error and ACL LOG.
type aclDenial struct {
	key    bool
	object string
	arg    int // the key's position in the arguments
}

// err is the NOPERM error of d.
func (d *aclDenial) err() error {
	if d.key {
		return errNoPermKey
	}
	return errNoPermCommand(d.object)
}

// check returns why user c may not run cmd with args, or nil: the root
// rules are tried, then each selector.
func (c *aclCompiled) check(cmd *command, args [][]byte) *aclDenial {
	d := c.checkRules(cmd, args)
	if d == nil {
		return nil
	}
	for _, sel := range c.selectors {
		sd := sel.checkRules(cmd, args)
		if sd == nil {
			return nil
		}
		// As Redis: a key refused after the command was allowed says
		// more than a refused command, a later key more than an earlier.
		if sd.key && (!d.key || sd.arg > d.arg) {
			d = sd
		}
	}
	return d
}

// checkRules checks one set of rules (the root ones or a selector's).
func (c *aclCompiled) checkRules(cmd *command, args [][]byte) *aclDenial {
	if !c.canRun(cmd, args) {
		return &aclDenial{object: deniedName(cmd, args)}
	}
	if c.allKeys || cmd.firstKey == 0 {
		return nil
	}
	for i, k := range cmd.keys(args) {
		if read, write := keyAccess(cmd, args, i); !c.canAccess(k, read, write) {
			return &aclDenial{key: true, object: string(k), arg: i}
		}
	}
	return nil
}

// Passwords: a stored password is PBKDF2-SHA256 (privilege.Hash, random
// salt) of the lower-case hex SHA-256 of the password, so that both
// `>password` and `#<sha256>` can set one.

func sha256Hex(pw string) string {
	s := sha256.Sum256([]byte(pw))
	return hex.EncodeToString(s[:])
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func hashACLPassword(digest string) (string, error) {
	return privilege.Hash(privilege.PluginSHA2, digest)
}

// verifyACLHash reports whether digest (a SHA-256 hex) is the one stored
// hash h was made from; the error says h is not a stored hash.
func verifyACLHash(h, digest string) (bool, error) {
	if err := privilege.CheckHash(privilege.PluginSHA2, h); err != nil || h == "" {
		return false, fmt.Errorf("not a password hash")
	}
	return privilege.VerifyPassword(&privilege.Account{Plugin: privilege.PluginSHA2, Auth: h}, digest), nil
}

// authCache remembers, in memory only, the password digests that proved
// right against a stored hash, keyed by an HMAC under a per-process key,
// so that a client opening many connections pays PBKDF2 once. A wrong
// password is never cached and always pays it.
type authCache struct {
	mu   sync.Mutex
	key  [32]byte
	seen map[string]struct{}
}

func newAuthCache() *authCache {
	c := &authCache{seen: map[string]struct{}{}}
	rand.Read(c.key[:])
	return c
}

func (c *authCache) tag(h, digest string) string {
	m := hmac.New(sha256.New, c.key[:])
	m.Write([]byte(h))
	m.Write([]byte{0})
	m.Write([]byte(digest))
	return string(m.Sum(nil))
}

// verify reports whether password is one of u's.
func (c *authCache) verify(u *aclCompiled, password []byte) bool {
	if u.configPassword != "" {
		return hmac.Equal([]byte(u.configPassword), password)
	}
	digest := sha256Hex(string(password))
	for _, h := range u.Passwords {
		t := c.tag(h, digest)
		c.mu.Lock()
		_, ok := c.seen[t]
		c.mu.Unlock()
		if ok {
			return true
		}
		if ok, _ := verifyACLHash(h, digest); ok {
			c.mu.Lock()
			if len(c.seen) >= 1<<16 {
				clear(c.seen)
			}
			c.seen[t] = struct{}{}
			c.mu.Unlock()
			return true
		}
	}
	return false
}
