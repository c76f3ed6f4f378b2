package resp

// globMatch reports whether s matches the Redis glob pattern p: '*' any
// run of bytes, '?' one byte, '[abc]' / '[^abc]' / '[a-z]' a set, '\x' the
// byte x literally. Matching is byte-wise and case-sensitive, as in
// Redis's stringmatchlen. Written by hand: Go's path.Match treats '/'
// specially and has no '^' negation.
func globMatch(p, s []byte) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
			p = p[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			rest, ok := matchClass(p[1:], s[0])
			if !ok {
				return false
			}
			p = rest
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || s[0] != p[0] {
				return false
			}
			s = s[1:]
			p = p[1:]
		}
	}
	return len(s) == 0
}

// matchClass matches c against the set starting after '[' and returns the
// pattern after the closing ']'. An unterminated set extends to the end of
// the pattern, as in Redis.
func matchClass(p []byte, c byte) ([]byte, bool) {
	not := false
	if len(p) > 0 && p[0] == '^' {
		not = true
		p = p[1:]
	}
	match := false
	for len(p) > 0 && p[0] != ']' {
		switch {
		case p[0] == '\\' && len(p) >= 2:
			if p[1] == c {
				match = true
			}
			p = p[2:]
		case len(p) >= 3 && p[1] == '-':
			lo, hi := p[0], p[2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if lo <= c && c <= hi {
				match = true
			}
			p = p[3:]
		default:
			if p[0] == c {
				match = true
			}
			p = p[1:]
		}
	}
	if len(p) > 0 {
		p = p[1:] // ']'
	}
	if not {
		match = !match
	}
	return p, match
}
