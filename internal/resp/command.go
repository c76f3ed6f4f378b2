package resp

import "strings"

type cmdFlags uint32

const (
	// flagData commands run in a transaction over the keyspace.
	flagData cmdFlags = 1 << iota
	flagWrite
	flagReadonly
	flagFast
	flagDenyOOM
	flagAdmin
	// flagNoAuth commands are allowed before AUTH.
	flagNoAuth
	// flagNoQueue commands run at once inside MULTI instead of queueing.
	flagNoQueue
	flagNoScript
	flagLoading
	flagStale
	// flagLatest commands read one key's newest committed value without a
	// transaction (keyspace.go, LatestGetter), when the store can.
	flagLatest
)

var flagNames = []struct {
	f    cmdFlags
	name string
}{
	{flagWrite, "write"}, {flagReadonly, "readonly"}, {flagDenyOOM, "denyoom"}, {flagAdmin, "admin"},
	{flagNoScript, "noscript"}, {flagLoading, "loading"}, {flagStale, "stale"}, {flagFast, "fast"},
	{flagNoAuth, "no_auth"},
}

// command describes one Redis command: what COMMAND INFO reports and the
// handler.
type command struct {
	name  string // lower case
	arity int    // Redis convention: n exact, -n at least n (name included)
	flags cmdFlags
	// Key positions for COMMAND INFO: first, last (-1: last argument) and
	// step; 0,0,0 when the command takes no keys.
	firstKey, lastKey, step int
	acl                     []string
	summary                 string
	run                     func(*call) error
}

func (c *command) arityOK(n int) bool {
	if c.arity >= 0 {
		return n == c.arity
	}
	return n >= -c.arity
}

// keys returns the key arguments of an invocation, by the command's key
// positions.
func (c *command) keys(args [][]byte) [][]byte {
	if c.firstKey == 0 || c.firstKey >= len(args) {
		return nil
	}
	last := c.lastKey
	if last < 0 {
		last += len(args)
	}
	var out [][]byte
	for i := c.firstKey; i <= last && i < len(args); i += c.step {
		out = append(out, args[i])
	}
	return out
}

var commands = map[string]*command{}

func register(cs ...*command) {
	for _, c := range cs {
		commands[c.name] = c
	}
}

// lookupCommand finds a command by name, in any letter case, without
// allocating for names up to 32 bytes.
func lookupCommand(name []byte) *command {
	var buf [32]byte
	if len(name) > len(buf) {
		return commands[strings.ToLower(string(name))]
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return commands[string(buf[:len(name)])]
}

// equalFold reports whether b equals the lower-case ASCII word s in any
// letter case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
