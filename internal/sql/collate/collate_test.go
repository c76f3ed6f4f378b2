package collate

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	xcollate "golang.org/x/text/collate"
	"golang.org/x/text/language"
)

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// TestMySQLFacts checks comparisons whose results MySQL 8.0 documents or
// returns for these collations.
func TestMySQLFacts(t *testing.T) {
	for _, tc := range []struct {
		coll string
		a, b string
		want int
	}{
		{"utf8mb4_0900_ai_ci", "hello", "Hello", 0},
		{"utf8mb4_0900_ai_ci", "resume", "résumé", 0},
		{"utf8mb4_0900_ai_ci", "ß", "ss", 0},
		{"utf8mb4_0900_ai_ci", "a", "a ", -1}, // NO PAD
		{"utf8mb4_0900_ai_ci", "a", "B", -1},
		{"utf8mb4_0900_ai_ci", "Z", "a", 1},
		{"utf8mb4_0900_ai_ci", "_", "a", -1}, // punctuation before letters
		{"utf8mb4_0900_ai_ci", "9", "a", -1},
		{"utf8mb4_0900_as_cs", "a", "A", -1},
		{"utf8mb4_0900_as_cs", "a", "á", -1},
		{"utf8mb4_general_ci", "hello", "HELLO", 0},
		{"utf8mb4_general_ci", "a", "a  ", 0}, // PAD SPACE
		{"utf8mb4_general_ci", "é", "E", 0},
		{"utf8mb4_general_ci", "ß", "s", 0},
		{"utf8mb4_general_ci", "_", "a", 1}, // weights are upper-case code points: 0x5F > 0x41
		{"utf8mb4_unicode_ci", "a", "a ", 0},
		{"utf8mb4_unicode_ci", "ß", "ss", 0},
		{"utf8_general_ci", "ABC", "abc", 0},
	} {
		c := Lookup(tc.coll)
		if c == nil {
			t.Fatalf("%s: not found", tc.coll)
		}
		if got := c.Compare([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("%s: %q vs %q = %d, want %d", tc.coll, tc.a, tc.b, got, tc.want)
		}
		if got := sign(bytes.Compare(c.Key(nil, []byte(tc.a)), c.Key(nil, []byte(tc.b)))); got != tc.want {
			t.Errorf("%s: keys of %q vs %q = %d, want %d", tc.coll, tc.a, tc.b, got, tc.want)
		}
	}
	for _, n := range []string{"binary", "utf8mb4_bin", "utf8mb4_0900_bin", "latin1_bin", "", "no_such"} {
		if Lookup(n) != nil {
			t.Errorf("%q should compare bytes", n)
		}
	}
}

// TestASCIIFastPath checks the per-byte keys and weight-by-weight
// comparison of ASCII text against x/text's own keys and comparison.
func TestASCIIFastPath(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte("aAbBzZ09 _-.,;{}~\t\x01\x7fé😀ß")
	gen := func() []byte {
		n := rng.Intn(8)
		var s []byte
		for i := 0; i < n; i++ {
			if rng.Intn(4) == 0 {
				s = append(s, alphabet[rng.Intn(len(alphabet))])
			} else {
				s = append(s, byte(32+rng.Intn(95)))
			}
		}
		return s
	}
	ref := xcollate.New(language.Und, xcollate.Loose)
	for _, c := range []*Collation{ai0900, as0900, uniCI, genCI} {
		for i := 0; i < 20000; i++ {
			a, b := gen(), gen()
			ka, kb := c.Key(nil, a), c.Key(nil, b)
			if got, want := c.Compare(a, b), sign(bytes.Compare(ka, kb)); got != want {
				t.Fatalf("%s: Compare(%q, %q) = %d, keys say %d", c.Name, a, b, got, want)
			}
			var pa, pb [8]byte
			copy(pa[:], ka)
			copy(pb[:], kb)
			if got, want := c.KeyPrefix(a), binary.BigEndian.Uint64(pa[:]); got != want {
				t.Fatalf("%s: KeyPrefix(%q) = %x, want %x", c.Name, a, got, want)
			}
			_ = pb
			if c.alg == algUCA {
				if !bytes.Equal(ka, c.slowKey(nil, a)) {
					t.Fatalf("%s: fast key of %q differs", c.Name, a)
				}
			}
			if c == ai0900 {
				var buf xcollate.Buffer
				if want := ref.Compare(a, b); want != c.Compare(a, b) {
					t.Fatalf("%q vs %q: x/text %d, here %d", a, b, want, c.Compare(a, b))
				}
				_ = buf
			}
		}
	}
	if !ai0900.asciiOK || !genCI.asciiOK {
		t.Fatalf("ASCII fast path off: ai %v general %v", ai0900.asciiOK, genCI.asciiOK)
	}
}

func BenchmarkCompareASCII(b *testing.B) {
	x := []byte("83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330")
	y := []byte("83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432331")
	for i := 0; i < b.N; i++ {
		ai0900.Compare(x, y)
	}
}

// TestLanguageCollations: the language collations follow their language's
// order (Swedish sorts å, ä, ö after z; Spanish ñ after n).
func TestLanguageCollations(t *testing.T) {
	sv := Lookup("utf8mb4_swedish_ci")
	if sv.Compare([]byte("ö"), []byte("z")) <= 0 || sv.Compare([]byte("A"), []byte("a")) != 0 {
		t.Errorf("swedish: ö vs z %d, A vs a %d", sv.Compare([]byte("ö"), []byte("z")), sv.Compare([]byte("A"), []byte("a")))
	}
	if uniCI.Compare([]byte("ö"), []byte("z")) >= 0 {
		t.Errorf("unicode_ci: ö should sort before z")
	}
	es := Lookup("utf8mb4_spanish_ci")
	if es.Compare([]byte("ñ"), []byte("nz")) <= 0 {
		t.Errorf("spanish: ñ should sort after nz")
	}
	if Lookup("utf8mb4_esperanto_ci") == nil {
		t.Errorf("esperanto missing")
	}
}

// BenchmarkSortSysbenchC sorts 100 values shaped like sysbench's c column
// (oltp_read_only's ORDER BY c) byte-wise and under utf8mb4_0900_ai_ci.
func BenchmarkSortSysbenchC(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	vals := make([][]byte, 100)
	for i := range vals {
		var s []byte
		for j := 0; j < 10; j++ {
			s = append(s, []byte(fmt.Sprintf("%011d-", rng.Int63n(1e11)))...)
		}
		vals[i] = s[:119]
	}
	work := make([][]byte, len(vals))
	b.Run("binary", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			copy(work, vals)
			slices.SortFunc(work, bytes.Compare)
		}
	})
	b.Run("0900_ai_ci", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			copy(work, vals)
			slices.SortFunc(work, ai0900.Compare)
		}
	})
}
