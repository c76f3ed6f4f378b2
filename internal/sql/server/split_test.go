package server

import "testing"

func TestSplitFirstStatement(t *testing.T) {
	cases := []struct{ in, first, rest string }{
		{"SELECT 1", "SELECT 1", ""},
		{"SELECT 1;", "SELECT 1", ""},
		{"SELECT 1; \n ", "SELECT 1", ""},
		{"SELECT 1; -- trailing comment", "SELECT 1", ""},
		{"SELECT 1; /* c */ ;", "SELECT 1", ""},
		{"SELECT 1; SELECT 2", "SELECT 1", " SELECT 2"},
		{"SELECT ';'; SELECT 2", "SELECT ';'", " SELECT 2"},
		{`SELECT "a\";b"; SELECT 2`, `SELECT "a\";b"`, " SELECT 2"},
		{"SELECT 'it''s;'; X", "SELECT 'it''s;'", " X"},
		{"SELECT `a;b`; X", "SELECT `a;b`", " X"},
		{"SELECT 1 -- ;\n; X", "SELECT 1 -- ;\n", " X"},
		{"SELECT 1 # ;\n; X", "SELECT 1 # ;\n", " X"},
		{"SELECT 1 /* ; */; X", "SELECT 1 /* ; */", " X"},
		{"SELECT 1--1; X", "SELECT 1--1", " X"}, // "--1" is arithmetic, not a comment
		{"SELECT 1; /*!40101 SET x=1 */", "SELECT 1", " /*!40101 SET x=1 */"},
		{"SELECT 'unterminated; X", "SELECT 'unterminated; X", ""},
	}
	for _, c := range cases {
		first, rest := splitFirstStatement(c.in)
		if first != c.first || rest != c.rest {
			t.Errorf("split(%q) = (%q, %q), want (%q, %q)", c.in, first, rest, c.first, c.rest)
		}
	}
}
