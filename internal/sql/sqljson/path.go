package sqljson

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode"
)

type legKind uint8

const (
	legKey      legKind = iota // .key
	legAnyKey                  // .*
	legIndex                   // [n], [last], [last-n]
	legAnyIndex                // [*]
	legDeep                    // **
)

type leg struct {
	kind     legKind
	key      string
	index    int
	fromLast bool // index counts back from the last element
}

// Path is a parsed JSON path expression.
type Path struct {
	legs []leg
	text string
}

// ErrPath is returned for a malformed path expression.
var ErrPath = errors.New("invalid JSON path expression")

// String returns the path's text.
func (p *Path) String() string { return p.text }

// HasWildcard reports whether the path may match several values.
func (p *Path) HasWildcard() bool {
	for _, l := range p.legs {
		if l.kind == legAnyKey || l.kind == legAnyIndex || l.kind == legDeep {
			return true
		}
	}
	return false
}

// IsRoot reports whether the path is "$" alone.
func (p *Path) IsRoot() bool { return len(p.legs) == 0 }

// ParsePath parses a MySQL JSON path: $ followed by .key, ."quoted key",
// .*, [n], [last], [last-n], [*] and ** legs.
func ParsePath(s string) (*Path, error) {
	p := &Path{text: s}
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "$") {
		return nil, ErrPath
	}
	t = t[1:]
	for {
		t = strings.TrimLeft(t, " \t")
		if t == "" {
			break
		}
		switch {
		case strings.HasPrefix(t, "**"):
			p.legs = append(p.legs, leg{kind: legDeep})
			t = t[2:]
		case t[0] == '.':
			t = strings.TrimLeft(t[1:], " \t")
			switch {
			case strings.HasPrefix(t, "*"):
				p.legs = append(p.legs, leg{kind: legAnyKey})
				t = t[1:]
			case strings.HasPrefix(t, `"`):
				end := 1
				for end < len(t) && t[end] != '"' {
					if t[end] == '\\' {
						end++
					}
					end++
				}
				if end >= len(t) {
					return nil, ErrPath
				}
				var key string
				if err := json.Unmarshal([]byte(t[:end+1]), &key); err != nil {
					return nil, ErrPath
				}
				p.legs = append(p.legs, leg{kind: legKey, key: key})
				t = t[end+1:]
			default:
				end := 0
				for end < len(t) {
					r := rune(t[end])
					if r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r) || r >= 0x80 {
						end++
						continue
					}
					break
				}
				if end == 0 {
					return nil, ErrPath
				}
				p.legs = append(p.legs, leg{kind: legKey, key: t[:end]})
				t = t[end:]
			}
		case t[0] == '[':
			end := strings.IndexByte(t, ']')
			if end < 0 {
				return nil, ErrPath
			}
			in := strings.TrimSpace(t[1:end])
			t = t[end+1:]
			switch {
			case in == "*":
				p.legs = append(p.legs, leg{kind: legAnyIndex})
			case strings.HasPrefix(in, "last"):
				rest := strings.TrimSpace(in[4:])
				n := 0
				if rest != "" {
					if !strings.HasPrefix(rest, "-") {
						return nil, ErrPath
					}
					v, err := strconv.Atoi(strings.TrimSpace(rest[1:]))
					if err != nil || v < 0 {
						return nil, ErrPath
					}
					n = v
				}
				p.legs = append(p.legs, leg{kind: legIndex, index: n, fromLast: true})
			default:
				v, err := strconv.Atoi(in)
				if err != nil || v < 0 {
					return nil, ErrPath
				}
				p.legs = append(p.legs, leg{kind: legIndex, index: v})
			}
		default:
			return nil, ErrPath
		}
	}
	if n := len(p.legs); n > 0 && p.legs[n-1].kind == legDeep {
		return nil, ErrPath // ** must be followed by a leg
	}
	return p, nil
}

// arrayIndex resolves an index leg against an array of n elements.
func (l leg) arrayIndex(n int) int {
	if l.fromLast {
		return n - 1 - l.index
	}
	return l.index
}

// Extract returns the values the path matches, in document order.
func Extract(v any, p *Path) []any {
	var out []any
	walk(v, p.legs, func(m any) { out = append(out, m) })
	return out
}

func walk(v any, legs []leg, emit func(any)) {
	if len(legs) == 0 {
		emit(v)
		return
	}
	l, rest := legs[0], legs[1:]
	switch l.kind {
	case legKey:
		if o, ok := v.(Object); ok {
			if m, ok := o[l.key]; ok {
				walk(m, rest, emit)
			}
		}
	case legAnyKey:
		if o, ok := v.(Object); ok {
			for _, k := range SortedKeys(o) {
				walk(o[k], rest, emit)
			}
		}
	case legIndex:
		a, ok := v.([]any)
		if !ok {
			// A scalar or object is an array of one element.
			if l.arrayIndex(1) == 0 {
				walk(v, rest, emit)
			}
			return
		}
		if i := l.arrayIndex(len(a)); i >= 0 && i < len(a) {
			walk(a[i], rest, emit)
		}
	case legAnyIndex:
		if a, ok := v.([]any); ok {
			for _, e := range a {
				walk(e, rest, emit)
			}
		}
	case legDeep:
		walk(v, rest, emit)
		switch t := v.(type) {
		case Object:
			for _, k := range SortedKeys(t) {
				walk(t[k], legs, emit)
			}
		case []any:
			for _, e := range t {
				walk(e, legs, emit)
			}
		}
	}
}

// SetMode chooses what Set does where the path leads.
type SetMode uint8

// Set modes: JSON_SET, JSON_INSERT, JSON_REPLACE.
const (
	SetAny     SetMode = iota // replace an existing value or add a missing one
	SetInsert                 // only add a missing value
	SetReplace                // only replace an existing value
)

// Set returns v with the value at p (a path without wildcards) set to x
// under mode. A path whose parent does not exist changes nothing.
func Set(v any, p *Path, x any, mode SetMode) any {
	return set(v, p.legs, x, mode)
}

func set(v any, legs []leg, x any, mode SetMode) any {
	if len(legs) == 0 {
		if mode == SetInsert {
			return v
		}
		return x
	}
	l, rest := legs[0], legs[1:]
	switch l.kind {
	case legKey:
		o, ok := v.(Object)
		if !ok {
			return v
		}
		m, exists := o[l.key]
		if !exists {
			if len(rest) > 0 || mode == SetReplace {
				return v
			}
			n := cloneObject(o)
			n[l.key] = x
			return n
		}
		n := cloneObject(o)
		n[l.key] = set(m, rest, x, mode)
		return n
	case legIndex:
		a, isArray := v.([]any)
		if !isArray {
			if l.arrayIndex(1) == 0 {
				return set(v, rest, x, mode)
			}
			// Adding past the end of a scalar wraps it in an array.
			if len(rest) > 0 || mode == SetReplace {
				return v
			}
			return []any{v, x}
		}
		i := l.arrayIndex(len(a))
		if i >= 0 && i < len(a) {
			n := append([]any(nil), a...)
			n[i] = set(a[i], rest, x, mode)
			return n
		}
		if i < len(a) || len(rest) > 0 || mode == SetReplace {
			return v
		}
		return append(append([]any(nil), a...), x)
	}
	return v
}

// Remove returns v without the value at p (a path without wildcards, not
// "$"); a path that leads nowhere changes nothing.
func Remove(v any, p *Path) any {
	return remove(v, p.legs)
}

func remove(v any, legs []leg) any {
	if len(legs) == 0 {
		return v
	}
	l, rest := legs[0], legs[1:]
	switch l.kind {
	case legKey:
		o, ok := v.(Object)
		if !ok {
			return v
		}
		m, exists := o[l.key]
		if !exists {
			return v
		}
		n := cloneObject(o)
		if len(rest) == 0 {
			delete(n, l.key)
		} else {
			n[l.key] = remove(m, rest)
		}
		return n
	case legIndex:
		a, ok := v.([]any)
		if !ok {
			return v
		}
		i := l.arrayIndex(len(a))
		if i < 0 || i >= len(a) {
			return v
		}
		if len(rest) == 0 {
			n := append([]any(nil), a[:i]...)
			return append(n, a[i+1:]...)
		}
		n := append([]any(nil), a...)
		n[i] = remove(a[i], rest)
		return n
	}
	return v
}

func cloneObject(o Object) Object {
	n := make(Object, len(o)+1)
	for k, v := range o {
		n[k] = v
	}
	return n
}
