// Package sqljson holds MySQL's JSON values: parsing, the canonical text
// MySQL prints (object keys sorted shorter first, then byte-wise; ", " and
// ": " separators), path expressions ($.a[0].b, $."k", [*], .*, **),
// the comparison order of JSON values, and the operations behind the JSON_*
// functions (extract, set/insert/replace, remove, contains, keys, length,
// type).
//
// Contract with neighbours: a JSON column stores Canonical text, so equal
// documents are equal bytes; expr evaluates JSON_* functions on values
// parsed from that text, and types.Convert parses and canonicalises what is
// written to a JSON column. Values are plain Go data: nil (JSON null),
// bool, json.Number, string, []any and Object. They are never mutated in
// place by this package's operations: Set and Remove return copies of what
// they change.
package sqljson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Object is a JSON object.
type Object map[string]any

// ErrInvalid is returned for text that is not a JSON document.
var ErrInvalid = errors.New("invalid JSON text")

// Parse reads one JSON document (numbers kept as json.Number).
func Parse(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decode(dec)
	if err != nil {
		return nil, ErrInvalid
	}
	if _, err := dec.Token(); err == nil {
		return nil, ErrInvalid // trailing data
	}
	return v, nil
}

func decode(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := Object{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, ErrInvalid
				}
				v, err := decode(dec)
				if err != nil {
					return nil, err
				}
				o[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decode(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, ErrInvalid
	default:
		return t, nil // nil, bool, json.Number, string
	}
}

// Canonical parses b and returns MySQL's text for it.
func Canonical(b []byte) ([]byte, error) {
	v, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return Append(nil, v), nil
}

// SortedKeys returns o's keys in MySQL's order: shorter first, then
// byte-wise.
func SortedKeys(o Object) []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) < len(keys[j])
		}
		return keys[i] < keys[j]
	})
	return keys
}

// Append appends MySQL's text for v.
func Append(buf []byte, v any) []byte {
	switch t := v.(type) {
	case nil:
		return append(buf, "null"...)
	case bool:
		return strconv.AppendBool(buf, t)
	case json.Number:
		return appendNumber(buf, t)
	case string:
		return AppendString(buf, t)
	case []any:
		buf = append(buf, '[')
		for i, e := range t {
			if i > 0 {
				buf = append(buf, ", "...)
			}
			buf = Append(buf, e)
		}
		return append(buf, ']')
	case Object:
		buf = append(buf, '{')
		for i, k := range SortedKeys(t) {
			if i > 0 {
				buf = append(buf, ", "...)
			}
			buf = AppendString(buf, k)
			buf = append(buf, ": "...)
			buf = Append(buf, t[k])
		}
		return append(buf, '}')
	}
	return append(buf, "null"...)
}

// appendNumber prints integers as they are and other numbers as MySQL
// prints a DOUBLE in JSON (1.5, 100.0, 1e100).
func appendNumber(buf []byte, n json.Number) []byte {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return append(buf, s...)
		}
		if _, err := strconv.ParseUint(s, 10, 64); err == nil {
			return append(buf, s...)
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return append(buf, s...)
	}
	return AppendFloat(buf, f)
}

// AppendFloat prints a double as a JSON number the way MySQL does.
func AppendFloat(buf []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendFloat(buf, f, 'f', 1, 64)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 64)
}

// AppendString appends s as a JSON string literal.
func AppendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				buf = append(buf, '\\', '"')
			case '\\':
				buf = append(buf, '\\', '\\')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				if c < 0x20 {
					buf = fmt.Appendf(buf, "\\u%04x", c)
				} else {
					buf = append(buf, c)
				}
			}
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		buf = append(buf, s[i:i+size]...)
		i += size
	}
	return append(buf, '"')
}

// TypeName is JSON_TYPE's answer for v.
func TypeName(v any) string {
	switch t := v.(type) {
	case nil:
		return "NULL"
	case bool:
		return "BOOLEAN"
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			if _, err := strconv.ParseInt(string(t), 10, 64); err == nil {
				return "INTEGER"
			}
			if _, err := strconv.ParseUint(string(t), 10, 64); err == nil {
				return "UNSIGNED INTEGER"
			}
		}
		return "DOUBLE"
	case string:
		return "STRING"
	case []any:
		return "ARRAY"
	case Object:
		return "OBJECT"
	}
	return "NULL"
}

// Length is JSON_LENGTH: elements of an array, members of an object, 1
// for a scalar.
func Length(v any) int {
	switch t := v.(type) {
	case []any:
		return len(t)
	case Object:
		return len(t)
	}
	return 1
}

// rank orders JSON types for comparison as MySQL does (higher ranks sort
// later): null < numbers < strings < objects < arrays < booleans.
func rank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case json.Number:
		return 1
	case string:
		return 2
	case Object:
		return 3
	case []any:
		return 4
	case bool:
		return 5
	}
	return 0
}

// Compare orders two JSON values: by type rank, then numbers numerically,
// strings byte-wise, arrays element by element, objects by their canonical
// text (MySQL only defines equality for them), booleans false < true.
func Compare(a, b any) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return cmpInt(ra, rb)
	}
	switch x := a.(type) {
	case nil:
		return 0
	case json.Number:
		return compareNumbers(x, b.(json.Number))
	case string:
		return strings.Compare(x, b.(string))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case []any:
		y := b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := Compare(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmpInt(len(x), len(y))
	case Object:
		return bytes.Compare(Append(nil, x), Append(nil, b))
	}
	return 0
}

func compareNumbers(a, b json.Number) int {
	if ai, err := strconv.ParseInt(string(a), 10, 64); err == nil {
		if bi, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return cmpInt64(ai, bi)
		}
	}
	af, _ := strconv.ParseFloat(string(a), 64)
	bf, _ := strconv.ParseFloat(string(b), 64)
	switch {
	case af < bf:
		return -1
	case af > bf:
		return 1
	}
	return 0
}

func cmpInt(a, b int) int { return cmpInt64(int64(a), int64(b)) }

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Contains is JSON_CONTAINS(target, candidate): a scalar is contained in
// an equal scalar or in an array holding it; an array in an array holding
// each of its elements; an object in an object having each of its members
// with a containing value.
func Contains(target, cand any) bool {
	switch t := target.(type) {
	case []any:
		if c, ok := cand.([]any); ok {
			for _, ce := range c {
				if !Contains(t, ce) {
					return false
				}
			}
			return true
		}
		for _, te := range t {
			if Contains(te, cand) {
				return true
			}
		}
		return false
	case Object:
		c, ok := cand.(Object)
		if !ok {
			return false
		}
		for k, cv := range c {
			tv, ok := t[k]
			if !ok || !Contains(tv, cv) {
				return false
			}
		}
		return true
	}
	if _, ok := cand.([]any); ok {
		return false
	}
	if _, ok := cand.(Object); ok {
		return false
	}
	return rank(target) == rank(cand) && Compare(target, cand) == 0
}
