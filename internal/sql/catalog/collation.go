package catalog

import (
	"strings"

	"github.com/strata-db/strata/internal/sql/collate"
)

// CollationsInForce is the TableInfo.Collations of every table stored
// now: its columns' recorded collations decide comparison, ordering and
// index key encoding.
//
// Tables stored before collations were in force (Collations 0) compared,
// sorted and encoded their index entries byte-wise whatever collation
// name their columns recorded. Load keeps them that way by rewriting, in
// memory, each non-binary collation they record (the table's default and
// every column's) to its character set's binary one, utf8mb4_bin for
// utf8mb4: what SHOW CREATE TABLE and information_schema then show is what
// the table does. The next DDL that stores such a table stores the
// rewritten names with Collations set, so nothing changes for it.
const CollationsInForce = 1

// keepBinary rewrites the collations of a table stored before
// CollationsInForce (see there).
func (t *TableInfo) keepBinary() {
	if t.Collations >= CollationsInForce {
		return
	}
	if t.Collate != "" && !collate.IsBinary(t.Collate) {
		t.Collate = binaryOf(t.Collate)
	}
	for _, c := range t.Columns {
		if c.Type == nil {
			continue
		}
		if name := c.Type.GetCollate(); name != "" && !collate.IsBinary(name) {
			c.Type.SetCollate(binaryOf(name))
		}
	}
}

// binaryOf is the binary collation of a collation's character set.
func binaryOf(name string) string {
	name = strings.ToLower(name)
	if strings.HasPrefix(name, "utf8_") {
		name = "utf8mb3_" + name[len("utf8_"):]
	}
	if i := strings.Index(name, "_"); i > 0 {
		return name[:i] + "_bin"
	}
	return "utf8mb4_bin"
}
