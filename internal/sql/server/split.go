package server

// splitFirstStatement cuts query at the first ';' that ends a statement,
// i.e. one outside string literals, quoted identifiers and comments. It
// returns the first statement (without the ';') and the rest of the text;
// rest is "" when nothing but whitespace, comments and semicolons follows.
//
// The lexical rules are MySQL's: '...' and "..." strings with backslash
// escapes and doubled quotes, `...` identifiers with doubled backticks,
// "-- " and "#" line comments and /* ... */ block comments (including the
// /*! ... */ executable form, whose content is not split).
func splitFirstStatement(query string) (first, rest string) {
	i := 0
	n := len(query)
	for i < n {
		c := query[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(query, i)
		case c == '#':
			i = skipLine(query, i)
		case c == '-' && isLineCommentStart(query, i):
			i = skipLine(query, i)
		case c == '/' && i+1 < n && query[i+1] == '*':
			i = skipBlockComment(query, i)
		case c == ';':
			rest = query[i+1:]
			if isBlank(rest) {
				rest = ""
			}
			return query[:i], rest
		default:
			i++
		}
	}
	return query, ""
}

// skipQuoted returns the index just past the quoted token starting at i.
// An unterminated token extends to the end of the query.
func skipQuoted(q string, i int) int {
	quote := q[i]
	i++
	for i < len(q) {
		switch q[i] {
		case '\\':
			if quote != '`' {
				i += 2
				continue
			}
		case quote:
			if i+1 < len(q) && q[i+1] == quote { // doubled quote is an escaped quote
				i += 2
				continue
			}
			return i + 1
		}
		i++
	}
	return len(q)
}

// isLineCommentStart reports whether "--" at i starts a comment: MySQL
// requires the second dash to be followed by whitespace, a control
// character or the end of the query.
func isLineCommentStart(q string, i int) bool {
	if i+1 >= len(q) || q[i+1] != '-' {
		return false
	}
	return i+2 >= len(q) || q[i+2] <= ' '
}

func skipLine(q string, i int) int {
	for i < len(q) && q[i] != '\n' {
		i++
	}
	return i
}

func skipBlockComment(q string, i int) int {
	for j := i + 2; j+1 < len(q); j++ {
		if q[j] == '*' && q[j+1] == '/' {
			return j + 2
		}
	}
	return len(q)
}

// isBlank reports whether s holds no statement text: only whitespace,
// comments (other than executable /*! */ ones) and semicolons.
func isBlank(s string) bool {
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == ';':
			i++
		case c == '#':
			i = skipLine(s, i)
		case c == '-' && isLineCommentStart(s, i):
			i = skipLine(s, i)
		case c == '/' && i+2 < len(s) && s[i+1] == '*' && s[i+2] != '!':
			i = skipBlockComment(s, i)
		default:
			return false
		}
	}
	return true
}
