// Package collate orders and compares text under MySQL's collations:
// utf8mb4_0900_ai_ci (MySQL 8's default: accent- and case-insensitive
// Unicode Collation Algorithm, NO PAD), utf8mb4_0900_as_cs, utf8mb4_unicode_ci
// (UCA, PAD SPACE) and utf8mb4_general_ci (one weight per character, PAD
// SPACE), with their utf8mb3 and latin1/ascii relatives. Binary collations
// (binary, *_bin) are not represented: a nil *Collation means "compare the
// bytes", and every caller keeps that as its fast path.
//
// Contract with neighbours: Compare(a, b) and Key agree: Compare(a, b) == 0
// exactly when Key(a) and Key(b) are equal bytes, and bytes.Compare of two
// keys has the sign of Compare. The executor hashes Key for GROUP BY,
// DISTINCT and joins, and the write path stores Key (through the key codec)
// in index entries of a collated column, so an index seek for 'hello' finds
// 'Hello' and a unique index refuses both. Keys cannot be turned back into
// the text: index entries of collated columns are never read for values.
//
// Weights: the UCA collations use golang.org/x/text/collate (DUCET of
// Unicode 6.2 / CLDR 23, root order, primary strength for ai_ci). MySQL's
// tables are UCA 9.0.0 (0900) and UCA 4.0.0 (unicode_ci): characters
// encoded after Unicode 6.2 (most emoji, recent scripts) get x/text's
// implicit weights, and a few reorderings between versions differ.
// general_ci maps each character to its upper-case base letter (canonical
// decomposition's first character, so 'é' weighs as 'E'), characters
// outside the BMP to U+FFFD, as MySQL's table does for Latin letters; its
// exotic entries are not reproduced. A Collation is safe for concurrent use.
package collate

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	xcollate "golang.org/x/text/collate"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"
)

type algorithm uint8

const (
	algUCA     algorithm = iota // x/text root collation
	algGeneral                  // one weight per character
)

// Collation is a non-binary collation.
type Collation struct {
	Name string
	alg  algorithm
	// padSpace: trailing spaces are ignored (PAD SPACE); otherwise they
	// count (NO PAD, the 0900 collations).
	padSpace bool
	// ascii[b] is the key of the one-byte string b under this collation
	// (nil for ignorable bytes), so ASCII text is keyed and compared
	// without calling into x/text. asciiOK is false when some ASCII byte's
	// key is not a fixed concatenation (never for the collations here,
	// checked at init).
	ascii   [128][]byte
	asciiOK bool
	// w16[b] is ascii[b] as one 16-bit weight plus one (0: ignorable), when every
	// ASCII key is empty or two bytes (checked at init; asciiOK needs it).
	w16  [128]uint16
	pool sync.Pool // *xcollate.Collator; x/text collators are not safe for concurrent use
}

var (
	ai0900 = newUCA("utf8mb4_0900_ai_ci", false, xcollate.Loose)
	as0900 = newUCA("utf8mb4_0900_as_cs", false)
	uniCI  = newUCA("utf8mb4_unicode_ci", true, xcollate.Loose)
	genCI  = newGeneral("utf8mb4_general_ci")
)

// byName maps every supported non-binary collation name to its algorithm.
var byName = map[string]*Collation{
	"utf8mb4_0900_ai_ci":     ai0900,
	"utf8mb4_0900_as_ci":     ai0900, // accent-sensitivity not modelled separately
	"utf8mb4_0900_as_cs":     as0900,
	"utf8mb4_unicode_ci":     uniCI,
	"utf8mb4_unicode_520_ci": uniCI,
	"utf8mb3_unicode_ci":     uniCI,
	"utf8mb4_general_ci":     genCI,
	"utf8mb3_general_ci":     genCI,
	"latin1_swedish_ci":      genCI,
	"latin1_general_ci":      genCI,
	"ascii_general_ci":       genCI,
	// The language collations of UCA 4.0.0 (MySQL's utf8mb4_<language>_ci)
	// take x/text's tailoring for the language.
	"utf8mb4_icelandic_ci":  newUCALang("utf8mb4_icelandic_ci", "is"),
	"utf8mb4_latvian_ci":    newUCALang("utf8mb4_latvian_ci", "lv"),
	"utf8mb4_romanian_ci":   newUCALang("utf8mb4_romanian_ci", "ro"),
	"utf8mb4_slovenian_ci":  newUCALang("utf8mb4_slovenian_ci", "sl"),
	"utf8mb4_polish_ci":     newUCALang("utf8mb4_polish_ci", "pl"),
	"utf8mb4_estonian_ci":   newUCALang("utf8mb4_estonian_ci", "et"),
	"utf8mb4_spanish_ci":    newUCALang("utf8mb4_spanish_ci", "es"),
	"utf8mb4_swedish_ci":    newUCALang("utf8mb4_swedish_ci", "sv"),
	"utf8mb4_turkish_ci":    newUCALang("utf8mb4_turkish_ci", "tr"),
	"utf8mb4_czech_ci":      newUCALang("utf8mb4_czech_ci", "cs"),
	"utf8mb4_danish_ci":     newUCALang("utf8mb4_danish_ci", "da"),
	"utf8mb4_lithuanian_ci": newUCALang("utf8mb4_lithuanian_ci", "lt"),
	"utf8mb4_slovak_ci":     newUCALang("utf8mb4_slovak_ci", "sk"),
	"utf8mb4_spanish2_ci":   newUCALang("utf8mb4_spanish2_ci", "es-u-co-trad"),
	"utf8mb4_roman_ci":      newUCALang("utf8mb4_roman_ci", "und"),
	"utf8mb4_persian_ci":    newUCALang("utf8mb4_persian_ci", "fa"),
	"utf8mb4_esperanto_ci":  newUCALang("utf8mb4_esperanto_ci", "eo"),
	"utf8mb4_hungarian_ci":  newUCALang("utf8mb4_hungarian_ci", "hu"),
	"utf8mb4_sinhala_ci":    newUCALang("utf8mb4_sinhala_ci", "si"),
	"utf8mb4_german2_ci":    newUCALang("utf8mb4_german2_ci", "de-u-co-phonebk"),
	"utf8mb4_croatian_ci":   newUCALang("utf8mb4_croatian_ci", "hr"),
	"utf8mb4_vietnamese_ci": newUCALang("utf8mb4_vietnamese_ci", "vi"),
}

// Default is the collation of text when nothing names one: MySQL 8.0's
// utf8mb4_0900_ai_ci.
const Default = "utf8mb4_0900_ai_ci"

// Lookup returns the collation named (any case; utf8_ means utf8mb3_), or
// nil for a binary collation or a name this package does not model (which
// then compares bytes).
func Lookup(name string) *Collation {
	if name == "" {
		return nil
	}
	if c, ok := byName[name]; ok {
		return c
	}
	name = strings.ToLower(name)
	if strings.HasPrefix(name, "utf8_") {
		name = "utf8mb3_" + name[len("utf8_"):]
	}
	return byName[name]
}

// IsBinary reports whether name compares bytes (binary, *_bin, or unknown).
func IsBinary(name string) bool { return Lookup(name) == nil }

func newUCA(name string, padSpace bool, opts ...xcollate.Option) *Collation {
	c := &Collation{Name: name, alg: algUCA, padSpace: padSpace}
	c.pool.New = func() any { return xcollate.New(language.Und, opts...) }
	c.initASCII()
	return c
}

// newUCALang is a PAD SPACE, accent- and case-insensitive UCA collation
// tailored for a language (a BCP 47 tag).
func newUCALang(name, tag string) *Collation {
	c := &Collation{Name: name, alg: algUCA, padSpace: true}
	lang := language.Make(tag)
	c.pool.New = func() any { return xcollate.New(lang, xcollate.Loose) }
	c.initASCII()
	return c
}

func newGeneral(name string) *Collation {
	c := &Collation{Name: name, alg: algGeneral, padSpace: true}
	c.initASCII()
	return c
}

// initASCII fills the per-byte keys and checks, on every pair of ASCII
// bytes, that keying a string byte by byte gives x/text's key: then any
// ASCII string's key is the concatenation of its bytes' keys.
func (c *Collation) initASCII() {
	for b := 0; b < 128; b++ {
		// Keyed without PAD SPACE trimming: a space inside a string weighs.
		if c.alg == algGeneral {
			w := generalWeight(rune(b))
			c.ascii[b] = []byte{byte(w >> 8), byte(w)}
		} else {
			c.ascii[b] = c.slowKeyNoPad(nil, []byte{byte(b)})
		}
	}
	c.asciiOK = true
	for b, k := range c.ascii {
		switch len(k) {
		case 0:
		case 2:
			w := uint16(k[0])<<8 | uint16(k[1])
			if w == 0xFFFF {
				c.asciiOK = false
			}
			c.w16[b] = w + 1
		default:
			c.asciiOK = false
		}
	}
	if !c.asciiOK {
		return
	}
	if c.alg != algUCA || c.Name != ai0900Name {
		// Only the primary-strength UCA key is a plain concatenation of
		// per-character weights; the tertiary one has level separators.
		c.asciiOK = c.alg == algGeneral
		return
	}
	var pair [2]byte
	for a := 32; a < 127; a++ {
		for b := 32; b < 127; b++ {
			pair[0], pair[1] = byte(a), byte(b)
			want := c.slowKey(nil, pair[:])
			got := append(append([]byte(nil), c.ascii[a]...), c.ascii[b]...)
			if !bytes.Equal(want, got) {
				c.asciiOK = false
				return
			}
		}
	}
}

const ai0900Name = "utf8mb4_0900_ai_ci"

func isASCII(s []byte) bool {
	for len(s) >= 8 {
		if binary.LittleEndian.Uint64(s)&0x8080808080808080 != 0 {
			return false
		}
		s = s[8:]
	}
	for _, b := range s {
		if b >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func trimSpace(s []byte) []byte {
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// Key appends the sort key of s to buf.
func (c *Collation) Key(buf, s []byte) []byte {
	if c.padSpace {
		s = trimSpace(s)
	}
	if c.asciiOK && isASCII(s) {
		// Every ASCII key is empty or one 16-bit weight (w16).
		buf = slices.Grow(buf, 2*len(s))
		for _, b := range s {
			if w := c.w16[b]; w != 0 {
				w--
				buf = append(buf, byte(w>>8), byte(w))
			}
		}
		return buf
	}
	return c.slowKey(buf, s)
}

func (c *Collation) slowKey(buf, s []byte) []byte {
	if c.padSpace {
		s = trimSpace(s)
	}
	if c.alg == algGeneral {
		for len(s) > 0 {
			r, n := utf8.DecodeRune(s)
			s = s[n:]
			w := generalWeight(r)
			buf = append(buf, byte(w>>8), byte(w))
		}
		return buf
	}
	col := c.pool.Get().(*xcollate.Collator)
	var b xcollate.Buffer
	buf = append(buf, col.Key(&b, s)...)
	c.pool.Put(col)
	return buf
}

// generalWeight is general_ci's weight of a character: its upper-case base
// letter.
func generalWeight(r rune) rune {
	if r > 0xFFFF || r == utf8.RuneError {
		return 0xFFFD
	}
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}
	if r == 'ß' {
		return 'S'
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	if d := norm.NFD.Bytes(buf[:n]); len(d) > 0 {
		if base, _ := utf8.DecodeRune(d); base != utf8.RuneError {
			r = base
		}
	}
	return unicode.ToUpper(r)
}

// KeyPrefix returns the first 8 bytes of s's key, zero padded, as a
// big-endian integer: a smaller prefix means a smaller key, equal
// prefixes say nothing. ASCII text is keyed only as far as needed.
func (c *Collation) KeyPrefix(s []byte) uint64 {
	var b [8]byte
	if c.padSpace {
		s = trimSpace(s)
	}
	if c.asciiOK && isASCII(s) {
		n := 0
		for _, ch := range s {
			if w := c.w16[ch]; w != 0 {
				w--
				b[n], b[n+1] = byte(w>>8), byte(w)
				if n += 2; n == 8 {
					break
				}
			}
		}
		return binary.BigEndian.Uint64(b[:])
	}
	var kb [64]byte
	copy(b[:], c.Key(kb[:0], s))
	return binary.BigEndian.Uint64(b[:])
}

// Compare orders a and b: -1, 0 or +1.
func (c *Collation) Compare(a, b []byte) int {
	if c.asciiOK {
		if c.padSpace {
			a, b = trimSpace(a), trimSpace(b)
		}
		if r, ok := c.compareASCII(a, b); ok {
			return r
		}
	}
	var ka, kb [64]byte
	return bytes.Compare(c.Key(ka[:0], a), c.Key(kb[:0], b))
}

// compareASCII compares a and b weight by weight while they are ASCII,
// without building keys: equal leading bytes have equal weights, so the
// walk starts at the first byte that differs, and the first pair of
// different weights decides (no ASCII character starts a contraction).
// ok=false when a non-ASCII byte comes before the answer.
func (c *Collation) compareASCII(a, b []byte) (int, bool) {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n {
		wa, wb := binary.LittleEndian.Uint64(a[i:]), binary.LittleEndian.Uint64(b[i:])
		if (wa|wb)&0x8080808080808080 != 0 || wa != wb {
			break
		}
		i += 8
	}
	for i < n && a[i] == b[i] {
		if a[i] >= utf8.RuneSelf {
			return 0, false
		}
		i++
	}
	j := i
	for {
		var wa, wb uint16
		for i < len(a) && wa == 0 {
			if a[i] >= utf8.RuneSelf {
				return 0, false
			}
			wa = c.w16[a[i]]
			i++
		}
		for j < len(b) && wb == 0 {
			if b[j] >= utf8.RuneSelf {
				return 0, false
			}
			wb = c.w16[b[j]]
			j++
		}
		switch {
		case wa == wb:
			if wa == 0 {
				return 0, true
			}
		case wa < wb:
			return -1, true
		default:
			return 1, true
		}
	}
}

// Equal reports whether a and b are equal under c.
func (c *Collation) Equal(a, b []byte) bool { return c.Compare(a, b) == 0 }

// RuneEqual reports whether two characters are equal under c (LIKE
// matches character by character, as MySQL does).
func (c *Collation) RuneEqual(a, b rune) bool {
	if a == b {
		return true
	}
	if c.asciiOK && a < utf8.RuneSelf && b < utf8.RuneSelf {
		return c.w16[a] == c.w16[b]
	}
	if c.alg == algGeneral {
		return generalWeight(a) == generalWeight(b)
	}
	var ka, kb [32]byte
	return bytes.Equal(c.runeKey(ka[:0], a), c.runeKey(kb[:0], b))
}

func (c *Collation) runeKey(buf []byte, r rune) []byte {
	var tmp [utf8.UTFMax]byte
	n := utf8.EncodeRune(tmp[:], r)
	col := c.pool.Get().(*xcollate.Collator)
	var b xcollate.Buffer
	buf = append(buf, col.Key(&b, tmp[:n])...)
	c.pool.Put(col)
	return buf
}

// slowKeyNoPad is the x/text key of s with no PAD SPACE trimming.
func (c *Collation) slowKeyNoPad(buf, s []byte) []byte {
	col := c.pool.Get().(*xcollate.Collator)
	var b xcollate.Buffer
	buf = append(buf, col.Key(&b, s)...)
	c.pool.Put(col)
	return buf
}
