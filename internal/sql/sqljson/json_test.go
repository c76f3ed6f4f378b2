package sqljson

import "testing"

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		`{"b":1,"a":[1,2.50,"x"],"aa":null}`: `{"a": [1, 2.5, "x"], "b": 1, "aa": null}`,
		` [ true , false ] `:                 `[true, false]`,
		`"a\u00e9\n"`:                        `"aé\n"`,
		`1e2`:                                `100.0`,
		`18446744073709551615`:               `18446744073709551615`,
	} {
		got, err := Canonical([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{`{a}`, `[1,]`, `1 2`, ``, `{"a":1`} {
		if _, err := Canonical([]byte(bad)); err == nil {
			t.Errorf("Canonical(%q) accepted", bad)
		}
	}
}

func TestPathsAndUpdates(t *testing.T) {
	doc, _ := Parse([]byte(`{"a": {"b": [10, 20, 30]}, "c d": 1}`))
	get := func(path string) string {
		p, err := ParsePath(path)
		if err != nil {
			return "error"
		}
		return string(Append(nil, Extract(doc, p)))
	}
	for path, want := range map[string]string{
		`$.a.b[1]`:      `[20]`,
		`$.a.b[last]`:   `[30]`,
		`$.a.b[last-1]`: `[20]`,
		`$."c d"`:       `[1]`,
		`$.a.b[*]`:      `[10, 20, 30]`,
		`$**.b`:         `[[10, 20, 30]]`,
		`$.x`:           `[]`,
		`$.a[0].b[0]`:   `[10]`,
		`a`:             `error`,
		`$**`:           `error`,
	} {
		if got := get(path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	p, _ := ParsePath(`$.a.b[5]`)
	if got := string(Append(nil, Set(doc, p, "new", SetAny))); got != `{"a": {"b": [10, 20, 30, "new"]}, "c d": 1}` {
		t.Errorf("append: %s", got)
	}
	p, _ = ParsePath(`$.a.b[0]`)
	if got := string(Append(nil, Remove(doc, p))); got != `{"a": {"b": [20, 30]}, "c d": 1}` {
		t.Errorf("remove: %s", got)
	}
	if got := string(Append(nil, doc)); got != `{"a": {"b": [10, 20, 30]}, "c d": 1}` {
		t.Errorf("the original changed: %s", got)
	}
}

func TestCompareAndContains(t *testing.T) {
	v := func(s string) any { x, _ := Parse([]byte(s)); return x }
	ordered := []string{`null`, `-1`, `2.5`, `10`, `"a"`, `"b"`, `{"a": 1}`, `[1]`, `[1, 2]`, `false`, `true`}
	for i := 1; i < len(ordered); i++ {
		if Compare(v(ordered[i-1]), v(ordered[i])) >= 0 {
			t.Errorf("%s should sort before %s", ordered[i-1], ordered[i])
		}
	}
	if Compare(v(`1`), v(`1.0`)) != 0 {
		t.Errorf("1 and 1.0 differ")
	}
	if !Contains(v(`{"a": [1, 2], "b": 3}`), v(`{"a": [2]}`)) || Contains(v(`[1, 2]`), v(`[3]`)) || !Contains(v(`[1, [2, 3]]`), v(`3`)) {
		t.Errorf("Contains")
	}
}
