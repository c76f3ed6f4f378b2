package infoschema

import "strings"

// Charset is a character set the server knows.
type Charset struct {
	Name, DefaultCollation, Description string
	MaxLen                              int
}

// Collation is a collation the server knows.
type Collation struct {
	Name, Charset string
	ID            int
	Default       bool
	SortLen       int
	Pad           string // PAD SPACE or NO PAD
}

// DefaultCollation is the collation of new databases and tables when none
// is named: MySQL 8.0's default for utf8mb4.
const DefaultCollation = "utf8mb4_0900_ai_ci"

// Charsets lists the character sets, as SHOW CHARACTER SET does.
var Charsets = []Charset{
	{"ascii", "ascii_general_ci", "US ASCII", 1},
	{"binary", "binary", "Binary pseudo charset", 1},
	{"latin1", "latin1_swedish_ci", "cp1252 West European", 1},
	{"utf8mb3", "utf8mb3_general_ci", "UTF-8 Unicode", 3},
	{"utf8mb4", "utf8mb4_0900_ai_ci", "UTF-8 Unicode", 4},
}

// Collations lists the collations, with MySQL 8.0's ids.
var Collations = []Collation{
	{"ascii_bin", "ascii", 65, false, 1, "PAD SPACE"},
	{"ascii_general_ci", "ascii", 11, true, 1, "PAD SPACE"},
	{"binary", "binary", 63, true, 1, "NO PAD"},
	{"latin1_bin", "latin1", 47, false, 1, "PAD SPACE"},
	{"latin1_swedish_ci", "latin1", 8, true, 1, "PAD SPACE"},
	{"utf8mb3_bin", "utf8mb3", 83, false, 1, "PAD SPACE"},
	{"utf8mb3_general_ci", "utf8mb3", 33, true, 1, "PAD SPACE"},
	{"utf8mb3_unicode_ci", "utf8mb3", 192, false, 8, "PAD SPACE"},
	{"utf8mb4_0900_ai_ci", "utf8mb4", 255, true, 0, "NO PAD"},
	{"utf8mb4_0900_as_cs", "utf8mb4", 278, false, 0, "NO PAD"},
	{"utf8mb4_0900_bin", "utf8mb4", 309, false, 1, "NO PAD"},
	{"utf8mb4_bin", "utf8mb4", 46, false, 1, "PAD SPACE"},
	{"utf8mb4_general_ci", "utf8mb4", 45, false, 1, "PAD SPACE"},
	{"utf8mb4_unicode_ci", "utf8mb4", 224, false, 8, "PAD SPACE"},
}

// LookupCollation finds a collation by name (any case; utf8_ is utf8mb3_).
func LookupCollation(name string) (Collation, bool) {
	name = strings.ToLower(name)
	if strings.HasPrefix(name, "utf8_") {
		name = "utf8mb3_" + name[len("utf8_"):]
	}
	for _, c := range Collations {
		if c.Name == name {
			return c, true
		}
	}
	return Collation{}, false
}

// LookupCharset finds a character set by name (any case; utf8 is utf8mb3).
func LookupCharset(name string) (Charset, bool) {
	name = strings.ToLower(name)
	if name == "utf8" {
		name = "utf8mb3"
	}
	for _, c := range Charsets {
		if c.Name == name {
			return c, true
		}
	}
	return Charset{}, false
}

// CharsetOfCollation returns the character set of a collation.
func CharsetOfCollation(name string) string {
	if c, ok := LookupCollation(name); ok {
		return c.Charset
	}
	if i := strings.Index(name, "_"); i > 0 {
		return name[:i]
	}
	return name
}
