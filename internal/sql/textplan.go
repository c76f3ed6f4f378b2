package sql

import (
	"context"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Text INSERTs (COM_QUERY, as sysbench oltp_insert and drivers that
// interpolate arguments on the client send them) differ from each other
// only in their literals. Parsing and planning each one cost about a
// tenth of oltp_insert's CPU, so a session keeps, per literal-free form of
// the statement, the statement prepared with a parameter marker in place
// of each literal, and runs a later INSERT of the same form as that
// prepared statement with its literals as the arguments. The literals
// become the same Datums the parser's literals compile to (expr.literal:
// an integer literal is an INT64 Datum, a quoted string a string Datum),
// and an INSERT converts each value to its column's type either way, so
// the result, warnings and errors are the same.
//
// Only literals that are whole values of a VALUES row are replaced, and
// only those the scanner decodes exactly like the parser: integers that
// fit in an INT64 and single-quoted strings without backslashes (whose
// meaning depends on sql_mode). Anything it does not know makes the
// statement take the full parse: double quotes (identifiers under
// ANSI_QUOTES), adjacent strings (which MySQL concatenates), introducers,
// hex, bit, decimal and float literals, comments, variables, parameter
// markers, and any SELECT, TABLE or WITH, where a number can be a column
// position (ORDER BY 1) that a parameter is not.

// maxTextPlans bounds a session's cache of text INSERT forms.
const maxTextPlans = 256

// runCachedInsert runs query through the session's text plan cache when it
// is a single INSERT or REPLACE of a cacheable form. ok is false when the
// caller must parse and run query itself.
func (s *Session) runCachedInsert(ctx context.Context, query string) (res *Result, ok bool, err error) {
	if s.textPlans == nil {
		return nil, false, nil
	}
	form, params, ok := normalizeInsert(query)
	if !ok {
		return nil, false, nil
	}
	key := s.db + "\x00" + form
	p, seen := s.textPlans[key]
	if !seen {
		p = s.prepareForm(form, len(params))
		if len(s.textPlans) >= maxTextPlans {
			clear(s.textPlans)
		}
		s.textPlans[key] = p
	}
	if p == nil {
		return nil, false, nil
	}
	res, err = s.run(ctx, p.stmt, params, p)
	return res, true, err
}

// prepareForm parses a literal-free form, or returns nil when it is not a
// single INSERT with exactly nparams parameter markers.
func (s *Session) prepareForm(form string, nparams int) *prepared {
	stmts, err := parseSQL(s.parser, form)
	if err != nil || len(stmts) != 1 {
		return nil
	}
	ins, isInsert := stmts[0].(*ast.InsertStmt)
	if !isInsert || ins.Select != nil {
		return nil
	}
	if expr.NumberParams(ins) != nparams {
		return nil
	}
	return &prepared{info: PreparedStmt{ParamCount: nparams}, stmt: ins}
}

// normalizeInsert returns query with each literal that is a whole value of
// a VALUES row (an integer or a quoted string standing alone between the
// row's parentheses and commas) replaced by "?", and those literals'
// values in order, when query is an INSERT or REPLACE statement the scanner
// can read exactly as the parser does (see the comment at the top of this
// file). Literals anywhere else stay in the form as they were: inside an
// expression a parameter could behave differently from a literal (a
// string compared under a collation), and the form is then simply less
// general.
func normalizeInsert(query string) (form string, params []types.Datum, ok bool) {
	q := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(query), ";"))
	if !hasPrefixFold(q, "insert") && !hasPrefixFold(q, "replace") {
		return "", nil, false
	}
	var b strings.Builder
	b.Grow(len(q))
	word := -1        // start of the identifier or keyword being read
	depth := 0        // parenthesis depth
	inValues := false // after VALUES, before ON DUPLICATE KEY UPDATE
	for i := 0; i < len(q); {
		c := q[i]
		if isIdentByte(c) || c >= 0x80 {
			if word < 0 {
				word = i
				if c >= '0' && c <= '9' {
					n, next, isInt := scanInt(q, i)
					if !isInt {
						return "", nil, false
					}
					if inValues && depth == 1 && rowValue(q, i, next) {
						params = append(params, types.NewInt(n))
						b.WriteByte('?')
					} else {
						b.WriteString(q[i:next])
					}
					i, word = next, -1
					continue
				}
			}
			b.WriteByte(c)
			i++
			continue
		}
		// Not an identifier byte: the word (if any) ends here.
		prevWord := word >= 0
		if prevWord {
			w := q[word:i]
			if isSelectWord(w) {
				return "", nil, false
			}
			if depth == 0 && (strings.EqualFold(w, "values") || strings.EqualFold(w, "value")) {
				inValues = true
			}
			if depth == 0 && strings.EqualFold(w, "on") {
				inValues = false
			}
		}
		word = -1
		switch c {
		case '\'':
			if prevWord {
				return "", nil, false // an introducer (_utf8mb4'..', N'..', X'..', B'..')
			}
			v, next, strOK := scanString(q, i)
			if !strOK {
				return "", nil, false
			}
			j := next
			for j < len(q) && isSpace(q[j]) {
				j++
			}
			if j < len(q) && (q[j] == '\'' || q[j] == '"') {
				return "", nil, false // adjacent strings are concatenated
			}
			if inValues && depth == 1 && rowValue(q, i, next) {
				params = append(params, types.NewString(v))
				b.WriteByte('?')
			} else {
				b.WriteString(q[i:next])
			}
			i = next
		case '`':
			end := strings.IndexByte(q[i+1:], '`')
			if end < 0 {
				return "", nil, false
			}
			b.WriteString(q[i : i+end+2])
			i += end + 2
		case '"', '\\', '?', '#', ';', '@':
			// Double quotes (identifiers under ANSI_QUOTES), escapes,
			// markers, comments, several statements, variables.
			return "", nil, false
		case '-', '/':
			if i+1 < len(q) && (q[i+1] == '-' || q[i+1] == '*') {
				return "", nil, false // a comment or an optimizer hint
			}
			b.WriteByte(c)
			i++
		case '.':
			if i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' && !prevWord {
				return "", nil, false // .5 is a decimal literal
			}
			b.WriteByte(c)
			i++
		case '(':
			depth++
			b.WriteByte(c)
			i++
		case ')':
			depth--
			b.WriteByte(c)
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	if word >= 0 && isSelectWord(q[word:]) {
		return "", nil, false
	}
	if len(params) == 0 {
		return "", nil, false
	}
	return b.String(), params, true
}

// rowValue reports whether the literal at q[start:end] stands alone as a
// value of a VALUES row: after "(" or "," and before "," or ")".
func rowValue(q string, start, end int) bool {
	i := start - 1
	for i >= 0 && isSpace(q[i]) {
		i--
	}
	j := end
	for j < len(q) && isSpace(q[j]) {
		j++
	}
	return i >= 0 && (q[i] == '(' || q[i] == ',') && j < len(q) && (q[j] == ',' || q[j] == ')')
}

// scanInt reads the integer literal at q[i:]. next is where it ends;
// isInt is false when what starts there is not a plain decimal integer
// that fits in an int64 (a decimal, float, hex or bit literal, or an
// identifier starting with digits).
func scanInt(q string, i int) (n int64, next int, isInt bool) {
	j := i
	for j < len(q) && q[j] >= '0' && q[j] <= '9' {
		j++
	}
	if j < len(q) && (isIdentByte(q[j]) || q[j] == '.' || q[j] >= 0x80) {
		return 0, 0, false
	}
	n, err := strconv.ParseInt(q[i:j], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return n, j, true
}

// scanString reads the single-quoted string at q[i:], where a doubled
// quote stands for one. It refuses backslashes, whose meaning depends on
// sql_mode (NO_BACKSLASH_ESCAPES).
func scanString(q string, i int) (v string, next int, ok bool) {
	var sb strings.Builder
	j := i + 1
	for j < len(q) {
		switch c := q[j]; c {
		case '\\':
			return "", 0, false
		case '\'':
			if j+1 < len(q) && q[j+1] == '\'' {
				sb.WriteByte('\'')
				j += 2
				continue
			}
			return sb.String(), j + 1, true
		default:
			sb.WriteByte(c)
			j++
		}
	}
	return "", 0, false
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isSelectWord(w string) bool {
	return strings.EqualFold(w, "select") || strings.EqualFold(w, "table") || strings.EqualFold(w, "with")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) &&
		(len(s) == len(prefix) || !isIdentByte(s[len(prefix)]))
}
