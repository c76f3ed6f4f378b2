package resp

import (
	"errors"
	"fmt"
	"strings"
)

// replyError is an error reply with Redis's exact text (prefix included).
// Command handlers return it; the executor writes it as the reply and
// leaves the transaction uncommitted, so a failed command changes nothing.
type replyError string

func (e replyError) Error() string { return string(e) }

const (
	errWrongType     replyError = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errSyntax        replyError = "ERR syntax error"
	errNotInteger    replyError = "ERR value is not an integer or out of range"
	errNotFloat      replyError = "ERR value is not a valid float"
	errOverflow      replyError = "ERR increment or decrement would overflow"
	errNaN           replyError = "ERR increment would produce NaN or Infinity"
	errHashNotInt    replyError = "ERR hash value is not an integer"
	errHashNotFloat  replyError = "ERR hash value is not a float"
	errNoSuchKey     replyError = "ERR no such key"
	errOffsetRange   replyError = "ERR offset is out of range"
	errValueTooLarge replyError = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
	errInvalidCursor replyError = "ERR invalid cursor"
	errNoAuth        replyError = "NOAUTH Authentication required."
	errWrongPass     replyError = "WRONGPASS invalid username-password pair or user is disabled."
	errDBIndex       replyError = "ERR DB index is out of range"
)

func errArity(name string) replyError {
	return replyError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(name)))
}

func errInvalidExpire(name string) replyError {
	return replyError(fmt.Sprintf("ERR invalid expire time in '%s' command", strings.ToLower(name)))
}

func errUnknownCommand(args [][]byte) replyError {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%.128s', with args beginning with: ", args[0])
	// Like Redis: arguments are quoted until 128 bytes of them are shown.
	shown := 0
	for _, a := range args[1:] {
		if shown >= 128 {
			break
		}
		a = a[:min(len(a), 128-shown)]
		fmt.Fprintf(&b, "'%s' ", a)
		shown += len(a) + 3
	}
	return replyError(b.String())
}

func errUnknownSubcommand(cmd string, sub []byte) replyError {
	return replyError(fmt.Sprintf("ERR unknown subcommand '%.128s'. Try %s HELP.", sub, strings.ToUpper(cmd)))
}

func asReplyError(err error) (replyError, bool) {
	var re replyError
	ok := errors.As(err, &re)
	return re, ok
}
