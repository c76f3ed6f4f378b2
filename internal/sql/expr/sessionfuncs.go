package expr

import (
	"regexp"
	"strings"
	"time"

	"github.com/strata-db/strata/internal/sql/types"
)

// Functions applications call that read session state (ROW_COUNT,
// FOUND_ROWS), wait (SLEEP), or match regular expressions (REGEXP_LIKE,
// REGEXP_INSTR, REGEXP_SUBSTR, REGEXP_REPLACE; Go's RE2 syntax, which
// covers the patterns applications write but not ICU's back references).
// The match_type argument understands c (case sensitive, the default
// here), i (insensitive), m (multi-line) and n (. matches newlines).

func init() {
	for name, def := range map[string]*funcDef{
		"sleep":          {minArgs: 1, maxArgs: 1, volatile: true, retType: retInt, eval: evalSleep},
		"row_count":      {minArgs: 0, maxArgs: 0, volatile: true, retType: retInt, eval: evalRowCount},
		"found_rows":     {minArgs: 0, maxArgs: 0, volatile: true, retType: retUint, eval: evalFoundRows},
		"regexp_like":    {minArgs: 2, maxArgs: 3, nullIfNullArg: true, retType: retInt, eval: evalRegexpLike},
		"regexp_instr":   {minArgs: 2, maxArgs: 6, nullIfNullArg: true, retType: retInt, eval: evalRegexpInstr},
		"regexp_substr":  {minArgs: 2, maxArgs: 5, nullIfNullArg: true, retType: retArg0String, eval: evalRegexpSubstr},
		"regexp_replace": {minArgs: 3, maxArgs: 6, nullIfNullArg: true, retType: retLongString, eval: evalRegexpReplace},
	} {
		builtins[name] = def
	}
}

// evalSleep waits, and returns 1 when the statement was interrupted first.
// Without a statement context (EvalContext.Ctx, which the session always
// sets) it does not wait.
func evalSleep(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	if args[0].IsNull() || ctx == nil || ctx.Ctx == nil {
		return types.NewInt(0), nil
	}
	secs, _ := args[0].ToFloat64()
	if secs <= 0 {
		return types.NewInt(0), nil
	}
	t := time.NewTimer(time.Duration(secs * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return types.NewInt(0), nil
	case <-ctx.Ctx.Done():
		return types.NewInt(1), nil
	}
}

func evalRowCount(ctx *EvalContext, _ *Func, _ []types.Datum) (types.Datum, error) {
	if ctx == nil {
		return types.NewInt(-1), nil
	}
	return types.NewInt(ctx.RowCount), nil
}

func evalFoundRows(ctx *EvalContext, _ *Func, _ []types.Datum) (types.Datum, error) {
	if ctx == nil {
		return types.NewUint(0), nil
	}
	return types.NewUint(ctx.FoundRows), nil
}

// regexpArg compiles a pattern with a MySQL match_type.
func regexpArg(pattern types.Datum, matchType string) (*regexp.Regexp, error) {
	p, _ := pattern.ToString()
	flags := ""
	for _, c := range matchType {
		switch c {
		case 'i':
			flags = strings.ReplaceAll(flags, "i", "") + "i"
		case 'c':
			flags = strings.ReplaceAll(flags, "i", "")
		case 'm':
			flags += "m"
		case 'n':
			flags += "s"
		}
	}
	if flags != "" {
		p = "(?" + flags + ")" + p
	}
	return compileRegexp(p)
}

func optArg(args []types.Datum, i int) (types.Datum, bool) {
	if i < len(args) {
		return args[i], true
	}
	return types.Datum{}, false
}

func matchTypeArg(args []types.Datum, i int) string {
	if d, ok := optArg(args, i); ok {
		s, _ := d.ToString()
		return s
	}
	return ""
}

func evalRegexpLike(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	re, err := regexpArg(args[1], matchTypeArg(args, 2))
	if err != nil {
		return types.Datum{}, err
	}
	s, _ := args[0].ToString()
	return types.NewBool(re.MatchString(s)), nil
}

// runeStart converts a 1-based character position to a byte offset of s.
func runeStart(s string, pos int64) int {
	if pos <= 1 {
		return 0
	}
	n := int64(1)
	for i := range s {
		if n == pos {
			return i
		}
		n++
	}
	return len(s)
}

func charPos(s string, byteOff int) int64 { return int64(len([]rune(s[:byteOff]))) + 1 }

func optInt(args []types.Datum, i int, def int64) int64 {
	if d, ok := optArg(args, i); ok {
		n, _ := d.ToInt64()
		return n
	}
	return def
}

// matches returns the byte ranges of the matches of re in s at or after
// the character position pos.
func matches(re *regexp.Regexp, s string, pos int64) [][]int {
	start := runeStart(s, pos)
	ms := re.FindAllStringIndex(s[start:], -1)
	for _, m := range ms {
		m[0] += start
		m[1] += start
	}
	return ms
}

func evalRegexpInstr(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	re, err := regexpArg(args[1], matchTypeArg(args, 5))
	if err != nil {
		return types.Datum{}, err
	}
	s, _ := args[0].ToString()
	occ := optInt(args, 3, 1)
	ms := matches(re, s, optInt(args, 2, 1))
	if occ < 1 || int64(len(ms)) < occ {
		return types.NewInt(0), nil
	}
	m := ms[occ-1]
	if optInt(args, 4, 0) == 1 {
		return types.NewInt(charPos(s, m[1])), nil
	}
	return types.NewInt(charPos(s, m[0])), nil
}

func evalRegexpSubstr(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	re, err := regexpArg(args[1], matchTypeArg(args, 4))
	if err != nil {
		return types.Datum{}, err
	}
	s, _ := args[0].ToString()
	occ := optInt(args, 3, 1)
	ms := matches(re, s, optInt(args, 2, 1))
	if occ < 1 || int64(len(ms)) < occ {
		return types.Null, nil
	}
	m := ms[occ-1]
	return types.NewString(s[m[0]:m[1]]), nil
}

// evalRegexpReplace replaces every match (occurrence 0, the default) or
// only the given one, from position pos on; $1-style references in the
// replacement are not expanded (MySQL's \1 is not either).
func evalRegexpReplace(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	re, err := regexpArg(args[1], matchTypeArg(args, 5))
	if err != nil {
		return types.Datum{}, err
	}
	s, _ := args[0].ToString()
	repl, _ := args[2].ToString()
	occ := optInt(args, 4, 0)
	ms := matches(re, s, optInt(args, 3, 1))
	var sb strings.Builder
	last := 0
	for i, m := range ms {
		if occ > 0 && int64(i+1) != occ {
			continue
		}
		sb.WriteString(s[last:m[0]])
		sb.WriteString(repl)
		last = m[1]
	}
	sb.WriteString(s[last:])
	return types.NewString(sb.String()), nil
}
